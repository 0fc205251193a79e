"""franka_robot_state_broadcaster's topic on the simulator (ROS wiring only).

The simulator node publishes ``robot_state`` of ``config/topics.yaml``
(``/franka_robot_state_broadcaster/robot_state``, ``franka_msgs/msg/FrankaRobotState``, as
franka_ros2's broadcaster) every 1 / ``robot_state_rate`` s of sim time (the real
broadcaster: 1 kHz); its physics thread hands over the states
(:attr:`simops_sim.arm_lane.Frame.robot`), pre-serialized
(:class:`~simops_sim.serialized_messages.RobotStateEncoder`). SimOps fills what the
simulator knows, the rest stays zero:

- ``header`` (the simulator's stamp, the base frame) and ``time`` (sim time, s);
- ``measured_joint_state`` (q, dq, tau_J as on ``joint_states``, without their noise) and
  ``desired_joint_state`` (the controller's q_d and dq_d; no tau_J_d);
- ``tau_ext_hat_filtered`` (effort): the joint torques the contacts apply, unfiltered;
- ``robot_mode``: MOVE, or REFLEX during a protective stop;
- ``current_errors``: the protective stop in force; ``last_motion_errors``: the latest
  stop, kept after error recovery as libfranka keeps it.
"""

from __future__ import annotations

from franka_msgs.msg import FrankaRobotState
from rclpy.node import Node

from simops_core.robot_spec import RobotSpec
from simops_core.topics import TopicSpec
from simops_ros.qos import qos_profile
from simops_sim.arm_lane import FollowState
from simops_sim.serialized_messages import RobotStateEncoder


class RobotStatePublisher:
    """Publishes the simulated arm's FrankaRobotState on ``topic`` of ``node``."""

    def __init__(self, node: Node, topic: TopicSpec, spec: RobotSpec) -> None:
        self._wire = RobotStateEncoder(spec.arm_joints, spec.base_frame)
        self._publisher = node.create_publisher(FrankaRobotState, topic.name,
                                                qos_profile(topic))

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
