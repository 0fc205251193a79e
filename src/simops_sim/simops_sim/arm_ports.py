"""One simulated arm's topics and actions on a node (ROS wiring only).

The simulator node serves a lone arm itself; in a world of several arms (``fr3_duo``) each
arm gets a node of its own in the arm's namespace (``<ns>/left``), where the topics of
``config/topics.yaml`` resolve relative to it (``/left/joint_states``) and carry the spec's
own joint names, as franka_ros2 serves each robot of a namespaced multi-robot bringup. The
world's ``/clock`` and ``/diagnostics`` stay with the simulator node.

Per arm: ``joint_states``, ``ee_pose``, ``object_pose`` and franka's robot state out; the
streamed ``joint_commands``, the position interface's ``position_commands`` (its
controller's ``~/commands``), ``joint_trajectory`` and ``goal_pose`` in; the
FollowJointTrajectory action; ``~/user_stop`` (std_srvs/SetBool), the arm's user stop to
press (true) and release (false), which a real arm has as a button (its robot mode and error
recovery: :mod:`simops_sim.reflexes`); and the :mod:`simops_sim.companions` nodes (error
recovery, franka_gripper). A bad command is rejected with a warning throttled per kind; the
arm holds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from trajectory_msgs.msg import JointTrajectory

from simops_core.franka_ros2 import ARM_CONTROLLER, POSITION_CONTROLLER, FrankaRelease
from simops_core.robot_spec import RobotSpec
from simops_core.topics import TopicSpec, load_qos
from simops_ros.polled import PolledGroup, never_called, take_all
from simops_ros.qos import qos_from_spec, qos_profile, subscription_qos
from simops_ros.rclpy_compat import MessageInfo
from simops_sim.arm_lane import ArmLane, Frame
from simops_sim.companions import companion_nodes
from simops_sim.follow_action import FollowJointTrajectoryServer
from simops_sim.follow_goal import goal_problem
from simops_sim.joint_commands import (
    CommandError,
    check_command,
    parse_joint_command,
    parse_position_command,
)
from simops_sim.robot_state import RobotStatePublisher
from simops_sim.serialized_messages import JointStateEncoder, PoseStampedEncoder
from simops_sim.stepper import Warn
from simops_sim.trajectory_plan import check_goal, goal_from_message

ARM_TOPICS = ('joint_states', 'ee_pose', 'object_pose', 'robot_state', 'joint_commands',
              'position_commands', 'joint_trajectory', 'goal_pose')


def arm_topics(topics: Mapping[str, TopicSpec], relative: bool) -> dict[str, TopicSpec]:
    """The :data:`ARM_TOPICS` of ``topics``; ``relative`` drops the leading ``/`` of each."""
    return {key: replace(topics[key], name=topics[key].name.lstrip('/')) if relative
            else topics[key] for key in ARM_TOPICS}


class ArmPorts:
    """The arm ``arm`` (spec ``spec``) on ``node``, under ``topics`` (see :func:`arm_topics`).

    ``companions`` are the nodes made beside ``node``, in its namespace, as franka_ros2
    ``release`` runs them; the owner spins and destroys them.
    """

    def __init__(self, node: Node, arm: ArmLane, spec: RobotSpec,
                 topics: Mapping[str, TopicSpec], warn: Warn, release: FrankaRelease,
                 polled: bool = False) -> None:
        self._node, self._arm, self._spec, self._topics = node, arm, spec, topics
        self._warn = warn

        def publisher(kind: type, key: str) -> Any:
            return node.create_publisher(kind, topics[key].name, qos_profile(topics[key]))

        self._state_pub = publisher(JointState, 'joint_states')
        self._ee_pub = publisher(PoseStamped, 'ee_pose')
        self._object_pub = publisher(PoseStamped, 'object_pose')
        # The arm's commands: taken by the physics thread before each step (take_commands),
        # as a real arm's update loop reads them, when ``polled``; else by the executor.
        self._polled: list[tuple[Any, Callable[[Any, MessageInfo], None]]] = []
        group = PolledGroup() if polled else None
        for kind, key, callback in ((Float64MultiArray, 'joint_commands', self._on_command),
                                    (Float64MultiArray, 'position_commands',
                                     self._on_position),
                                    (JointTrajectory, 'joint_trajectory', self._on_trajectory)):
            if group is None:
                node.create_subscription(kind, topics[key].name, callback,
                                         subscription_qos(topics[key]))
            else:
                self._polled.append((node.create_subscription(
                    kind, topics[key].name, never_called, subscription_qos(topics[key]),
                    callback_group=group, raw=True), callback))
        node.create_subscription(PoseStamped, topics['goal_pose'].name, self._on_goal,
                                 subscription_qos(topics['goal_pose']))
        FollowJointTrajectoryServer(node, arm, spec, topics['joint_trajectory'])
        node.create_service(SetBool, '~/user_stop', self._on_user_stop)
        self._robot_state = RobotStatePublisher(
            node, topics['robot_state'], spec, qos_from_spec(load_qos(release.convenience_qos)))
        self.companions = companion_nodes(arm, spec, node.get_namespace(), release)
        self._wire_lock = threading.Lock()   # the encoders: physics thread and ~/reset
        self._state_wire = JointStateEncoder(spec.joint_names, spec.base_frame)
        self._pose_wire = PoseStampedEncoder(spec.base_frame)

    # --- ROS callbacks (executor thread) -------------------------------------------------

    def _on_user_stop(self, request: SetBool.Request,
                      response: SetBool.Response) -> SetBool.Response:
        response.message = self._arm.user_stop(bool(request.data))
        response.success = True
        self._node.get_logger().warning(response.message)
        return response

    def _reject(self, key: str, exc: CommandError) -> None:
        topic = self._topics[key].name
        count = self._arm.count_rejected()
        self._warn(f'{topic}.{exc.kind}', f'rejected {topic} command: {exc}; holding the last '
                                          f'valid target ({count} rejected so far)')

    def _on_command(self, msg: Float64MultiArray, info: MessageInfo) -> None:
        try:
            command = parse_joint_command(msg.data, self._spec.arm_joints)
            check_command(command, self._spec)
            self._check_controller()
        except CommandError as exc:
            self._reject('joint_commands', exc)
            return
        self._arm.submit(command, info.get('received_timestamp'))

    def _on_position(self, msg: Float64MultiArray, info: MessageInfo) -> None:
        try:
            command = parse_position_command(msg.data, self._spec.arm_joints,
                                             POSITION_CONTROLLER)
            check_command(command, self._spec)
            self._check_controller(POSITION_CONTROLLER)
        except CommandError as exc:
            self._reject('position_commands', exc)
            return
        self._arm.submit(command, info.get('received_timestamp'))

    def _on_trajectory(self, msg: JointTrajectory, info: MessageInfo) -> None:
        try:
            goal = goal_from_message(msg, self._spec.arm_joints)
            check_goal(goal, self._spec)
            goal = self._arm.on_sim_clock(goal)
            last = msg.points[-1].velocities   # JTC validates the topic as its goals
            problem = goal_problem(goal, len(self._spec.arm_joints),
                                   np.asarray(last) if len(last) else None,
                                   self._arm.sim_time())
            if problem:
                raise CommandError(problem, 'malformed')
            self._check_controller()
        except CommandError as exc:
            self._reject('joint_trajectory', exc)
            return
        self._arm.submit(goal, info.get('received_timestamp'))

    def _check_controller(self, controller: str = ARM_CONTROLLER) -> None:
        refusal = self._arm.refusal(controller)
        if refusal:
            raise CommandError(refusal, 'inactive')

    def _on_goal(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        position, quaternion = np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])
        norm = float(np.linalg.norm(quaternion))
        if not (np.all(np.isfinite(position)) and np.isfinite(norm) and norm > 1e-9):
            self._reject('goal_pose', CommandError('non-finite position or zero quaternion',
                                                   'non_finite'))
            return
        self._arm.set_goal_pose(position, quaternion / norm)

    # --- physics thread ------------------------------------------------------------------

    def take_commands(self) -> None:
        """Take every queued command, in order, through the callbacks (polled ports only)."""
        for subscription, callback in self._polled:
            for data, info in take_all(subscription):
                callback(deserialize_message(data, subscription.msg_type), info)

    def publish(self, frame: Frame) -> None:
        """Publish the arm's ``frame``, pre-serialized (:mod:`simops_sim.serialized_messages`)."""
        stamp = frame.stamp_ns
        with self._wire_lock:
            if frame.joints is not None:
                for row, values in zip(self._state_wire.rows, frame.joints, strict=True):
                    row[:] = values
                self._state_pub.publish(self._state_wire.encode(stamp))
            if frame.flange is not None:
                self._ee_pub.publish(self._pose_wire.encode(stamp, *frame.flange))
            if frame.object is not None:
                self._object_pub.publish(self._pose_wire.encode(stamp, *frame.object))
            if frame.robot is not None:
                self._robot_state.publish_state(frame.robot)
