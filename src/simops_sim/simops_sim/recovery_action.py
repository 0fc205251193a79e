"""franka_hardware's error recovery on the simulator (ROS wiring only): node ``action_server``.

As franka_ros2's hardware interface serves it: the action ``~/error_recovery``
(franka_msgs/action/ErrorRecovery, so ``/action_server/error_recovery``) ends a protective
stop (:mod:`simops_sim.reflexes`) and succeeds, also when no stop was in force (libfranka's
``automaticErrorRecovery`` does the same). The arm keeps holding where it stopped: the next
command moves it.

The node ignores the process's global ROS arguments but takes the simulator's namespace,
like the gripper's node.
"""

from __future__ import annotations

from typing import Any

from franka_msgs.action import ErrorRecovery
from rclpy.action import ActionServer
from rclpy.node import Node

from simops_sim.arm_lane import ArmLane

NODE_NAME = 'action_server'   # franka_hardware's ActionServer node


class RecoveryNode(Node):
    """Serves ``~/error_recovery`` for the simulator's arm."""

    def __init__(self, arm: ArmLane, namespace: str) -> None:
        super().__init__(NODE_NAME, namespace=namespace, use_global_arguments=False)
        self._arm = arm
        ActionServer(self, ErrorRecovery, '~/error_recovery', self._execute)

    def _execute(self, handle: Any) -> ErrorRecovery.Result:
        cleared = self._arm.recover()
        if cleared is None:
            self.get_logger().info('error recovery: no error to recover from')
        else:
            self.get_logger().info(f'error recovery: cleared the {cleared.message()}')
        handle.succeed()
        return ErrorRecovery.Result()
