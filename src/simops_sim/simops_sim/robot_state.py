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
- ``robot_mode``: MOVE, REFLEX during a protective stop, USER_STOPPED while the user stop
  is pressed and IDLE once it is released, until error recovery
  (:func:`simops_sim.reflexes.robot_mode`);
- ``current_errors``: the protective stop in force; ``last_motion_errors``: the latest
  stop, kept after error recovery as libfranka keeps it (the user stop sets none).

Beside it, the broadcaster's convenience topics that carry what the simulator knows, each
sent only while someone subscribes (the real broadcaster sends them all at
``convenience_publish_rate``, 1 kHz by default; franka_robot_state_broadcaster.cpp:219-249,
v3.4.0), with the QoS of the chosen franka_ros2 release, stamped, in the base frame
(franka_semantic_components/src/franka_robot_state.cpp:154-164):

- ``~/current_pose``: ``O_T_EE`` (:meth:`simops_sim.physics.Physics.ee_pose`);
- ``~/measured_joint_states`` and ``~/desired_joint_states``: the two joint states above;
- ``~/external_joint_torques``: ``tau_ext_hat_filtered``.

``~/last_desired_pose``, ``~/desired_end_effector_twist`` and the two external wrenches are
not served: the simulator has no Cartesian command or wrench estimate.
"""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from franka_msgs.msg import FrankaRobotState
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from simops_core.robot_spec import RobotSpec
from simops_core.topics import TopicSpec
from simops_ros.qos import qos_profile
from simops_sim.arm_lane import FollowState
from simops_sim.reflexes import ProtectiveStop, robot_mode, stop_errors
from simops_sim.serialized_messages import RobotStateEncoder

CONVENIENCE = {'current_pose': PoseStamped, 'measured_joint_states': JointState,
               'desired_joint_states': JointState, 'external_joint_torques': JointState}
"""The convenience topics served, beside ``robot_state`` (the broadcaster's ``~/``)."""


class RobotStatePublisher:
    """The simulated arm's FrankaRobotState on ``topic`` of ``node``, and beside it.

    The :data:`CONVENIENCE` topics go out with ``convenience_qos``.
    """

    def __init__(self, node: Node, topic: TopicSpec, spec: RobotSpec,
                 convenience_qos: QoSProfile) -> None:
        self._wire = RobotStateEncoder(spec.arm_joints, spec.base_frame)
        self._publisher = node.create_publisher(FrankaRobotState, topic.name,
                                                qos_profile(topic))
        broadcaster = topic.name.rpartition('/')[0]
        self._convenience = {key: node.create_publisher(kind, f'{broadcaster}/{key}',
                                                        convenience_qos)
                             for key, kind in CONVENIENCE.items()}
        self._names, self._frame = list(spec.arm_joints), spec.base_frame

    def publish_state(self, state: FollowState) -> None:
        """Publish ``state`` (one caller at a time: the encoder is reused)."""
        for row, values in zip(self._wire.rows, (
                state.actual_q, state.actual_qd, state.actual_effort, state.desired_q,
                state.desired_qd, state.contact), strict=True):
            row[:] = values
        self._publisher.publish(self._wire.encode(
            state.stamp_ns, state.time, robot_mode(state.stop), _error(state.stop),
            _error(state.last_stop)))
        self._publish_convenience(state)

    def _publish_convenience(self, state: FollowState) -> None:
        wanted = [key for key, publisher in self._convenience.items()
                  if publisher.get_subscription_count()]
        if not wanted:
            return
        sec, nanosec = divmod(state.stamp_ns, 1_000_000_000)
        header = Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=self._frame)
        for key in wanted:
            self._convenience[key].publish(self._message(key, header, state))

    def _message(self, key: str, header: Header, state: FollowState) -> Any:
        names = self._names
        if key == 'measured_joint_states':
            return JointState(header=header, name=names, position=state.actual_q.tolist(),
                              velocity=state.actual_qd.tolist(),
                              effort=state.actual_effort.tolist())
        if key == 'desired_joint_states':
            return JointState(header=header, name=names, position=state.desired_q.tolist(),
                              velocity=state.desired_qd.tolist())
        if key == 'external_joint_torques':
            return JointState(header=header, name=names, effort=state.contact.tolist())
        msg = PoseStamped(header=header)
        pos, quat = state.ee
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z = map(float, pos)
        o.w, o.x, o.y, o.z = map(float, quat)
        return msg


def _error(stop: ProtectiveStop | None) -> str | None:
    """The one ``Errors`` field ``stop`` sets, or None."""
    errors = stop_errors(stop)
    return errors[0] if errors else None
