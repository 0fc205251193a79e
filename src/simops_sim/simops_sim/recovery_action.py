"""franka_hardware's error recovery on the simulator (ROS wiring only): node ``action_server``.

As franka_ros2's hardware interface serves it: the action ``~/error_recovery``
(franka_msgs/action/ErrorRecovery, so ``/action_server/error_recovery``) ends a protective
stop (:mod:`simops_sim.reflexes`) and succeeds, also when no stop was in force (libfranka's
``automaticErrorRecovery`` does the same). The arm keeps holding where it stopped: the next
command moves it. While the user stop is pressed the goal aborts, as franka_hardware's
server aborts on the recovery's ``franka::CommandException``
(franka_hardware/src/franka_action_server.cpp:57-74 at a6c4dee).

The node ignores the process's global ROS arguments but takes the simulator's namespace,
like the gripper's node.
"""

from __future__ import annotations

from typing import Any

from franka_msgs.action import ErrorRecovery
from rclpy.action import ActionServer
from rclpy.node import Node

from simops_sim.arm_lane import ArmLane, RecoveryRefusedError

NODE_NAME = 'action_server'   # franka_hardware's ActionServer node


class RecoveryNode(Node):
    """Serves ``~/error_recovery`` for the simulator's arm."""

    def __init__(self, arm: ArmLane, namespace: str) -> None:
        super().__init__(NODE_NAME, namespace=namespace, use_global_arguments=False)
        self._arm = arm
        ActionServer(self, ErrorRecovery, '~/error_recovery', self._execute)

    def _execute(self, handle: Any) -> ErrorRecovery.Result:
        try:
            cleared = self._arm.recover()
        except RecoveryRefusedError as exc:   # libfranka's CommandException: the goal aborts
            self.get_logger().error(f'error recovery refused: {exc}')
            handle.abort()
            return ErrorRecovery.Result()
        if cleared is None:
            self.get_logger().info('error recovery: no error to recover from')
        else:
            self.get_logger().info(f'error recovery: cleared the {cleared.message()}')
        handle.succeed()
        return ErrorRecovery.Result()
