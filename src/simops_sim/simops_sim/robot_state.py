"""franka_robot_state_broadcaster's topic on the simulator (ROS wiring only).

Node ``franka_robot_state_broadcaster`` publishes ``~/robot_state``
(``franka_msgs/msg/FrankaRobotState``, system-default QoS, as franka_ros2's broadcaster)
every 1 / ``robot_state_rate`` s of sim time (the real broadcaster: 1 kHz); the simulator's
physics thread hands it the states (:attr:`simops_sim.stepper.Frame.robot`), pre-serialized
(:class:`~simops_sim.wire.RobotStateEncoder`). SimOps fills what the simulator knows, the
rest stays zero:

- ``header`` (the simulator's stamp, the base frame) and ``time`` (sim time, s);
- ``measured_joint_state`` (q, dq, tau_J as on ``joint_states``, without their noise) and
  ``desired_joint_state`` (the controller's q_d and dq_d; no tau_J_d);
- ``tau_ext_hat_filtered`` (effort): the joint torques the contacts apply, unfiltered;
- ``robot_mode``: MOVE, or REFLEX during a protective stop;
- ``current_errors``: the protective stop in force; ``last_motion_errors``: the latest
  stop, kept after error recovery as libfranka keeps it.

The node ignores the process's global ROS arguments, like the gripper's node.
"""

from __future__ import annotations

from franka_msgs.msg import FrankaRobotState
from rclpy.node import Node
from rclpy.qos import qos_profile_system_default

from simops_core.robot_spec import RobotSpec
from simops_sim.stepper import FollowState
from simops_sim.wire import RobotStateEncoder

NODE_NAME = 'franka_robot_state_broadcaster'


class RobotStateNode(Node):
    """Publishes the simulated arm's FrankaRobotState (see :meth:`publish_state`)."""

    def __init__(self, spec: RobotSpec) -> None:
        super().__init__(NODE_NAME, use_global_arguments=False)
        self._wire = RobotStateEncoder(spec.arm_joints, spec.base_frame)
        self._publisher = self.create_publisher(FrankaRobotState, '~/robot_state',
                                                qos_profile_system_default)

    def publish_state(self, state: FollowState) -> None:
        """Publish ``state`` (one caller at a time: the encoder is reused)."""
        for row, values in zip(self._wire.rows, (
                state.actual_q, state.actual_qd, state.actual_effort, state.desired_q,
                state.desired_qd, state.contact), strict=True):
            row[:] = values
        mode = (FrankaRobotState.ROBOT_MODE_MOVE if state.stop is None
                else FrankaRobotState.ROBOT_MODE_REFLEX)
        self._publisher.publish(self._wire.encode(
            state.stamp_ns, state.time, mode, state.stop and state.stop.error,
            state.last_stop and state.last_stop.error))
