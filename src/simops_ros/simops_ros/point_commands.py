"""Streamed arm commands: Float64MultiArray, or JointTrajectory read as JTC reads it."""


from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from rclpy.duration import Duration as Timeout
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.stamps import split_nanoseconds
from simops_core.topics import TopicSpec
from simops_ros.gripper_goals import GripperGoals
from simops_ros.qos import qos_profile

LEAD = 0.5      # command periods a chained segment starts after it was computed
HISTORY = 4     # chained targets kept before the newest, for timers that fire early
DUE_MARGIN = 0.5   # command periods a chained message's first point is due before it is sent


class SegmentChain:
    """Start times of a stream of one-period segments on a fixed grid, each from the last.

    A timer fires a few milliseconds early or late, so segments stamped when they were
    computed overlap or leave gaps. Chained segments run from ``first + k * period`` ns
    instead, :data:`LEAD` periods after they were computed (so the controller has them
    before they start). Each message repeats the chain's points from the last one due
    :data:`DUE_MARGIN` periods before it was computed (in steady state the two targets
    before its own, the first one period before the segment starts):
    JointTrajectoryController samples a message whose first point is due from where the
    message is at arrival, which is exactly where the previous message had the target, so
    neither the arm's measured state (where JTC starts a trajectory whose first point is
    still ahead) nor when the message arrives changes the target. The margin keeps the
    first point due where the controller's clock runs a little behind this node's (another
    computer's clock; a controller cycle that began before the message arrived): a point
    due only just now could still be ahead there, and the controller would start from the
    measured state, a step of the tracking error within one 1 ms cycle.

    The chain (re)starts with the target before it held for a period (the first target
    itself when there is none): on its first message, after a timer that fired more than
    half a period late (the previous segment has ended: the controller holds its target),
    and when none of the :data:`HISTORY` points kept is due by the margin (a clock that
    jumped back). A timer that fires early, or just after a point fell due, only makes its
    message begin one point earlier.
    """

    def __init__(self, period_ns: int) -> None:
        self.period_ns = period_ns
        self._due: int | None = None   # ns: where the next target's segment starts
        self._points: list[tuple[int, np.ndarray]] = []   # (ns, target), oldest first

    def next(self, now_ns: int, target: np.ndarray) -> tuple[int, list[np.ndarray]]:
        """The stamp (ns) and earlier targets of the message for ``target`` (7,) rad.

        ``now_ns``: when it was computed. The earlier targets come oldest first, one period
        apart, the first at the stamp, due :data:`DUE_MARGIN` periods before ``now_ns``;
        ``target`` follows them, one period on.
        """
        period = self.period_ns
        wanted = now_ns + round(LEAD * period)
        target = np.array(target, dtype=float)
        due_by = now_ns - round(DUE_MARGIN * period)   # the first point sent is due by then
        if (self._due is None or wanted - self._due > period // 2
                or self._points[0][0] > due_by):
            held = self._points[-1][1] if self._points else target
            self._due, self._points = wanted, [(wanted - period, held), (wanted, held)]
        self._points.append((self._due + period, target))
        self._due += period
        first = max(k for k, (ns, _) in enumerate(self._points) if ns <= due_by)
        sent = self._points[first:]
        self._points = self._points[-HISTORY - 1:]
        return sent[0][0], [point for _, point in sent[:-1]]


def _duration(seconds: float) -> Duration:
    sec, nanosec = split_nanoseconds(round(seconds * 1e9))
    return Duration(sec=sec, nanosec=nanosec)


def point_command(joint_names: Sequence[str], positions: Sequence[float], horizon: float,
                  stamp: Time, earlier: Sequence[Sequence[float]] = ()) -> JointTrajectory:
    """Reach ``positions`` (rad, ``joint_names`` order) ``horizon`` s after the last point.

    ``earlier`` come first, the first of them at ``stamp`` (on the publisher's ROS clock:
    sim time under use_sim_time; zero means "now"): the targets sent before
    (:class:`SegmentChain`), one ``horizon`` apart. With a first point already due when the
    message arrives,
    JointTrajectoryController interpolates the message's points from there, so neither
    transport latency nor where the arm is shifts the segment, and a recording of these
    messages times every command exactly (``simops_sysid fit`` replays them). Without
    ``earlier`` (a policy's command) it is one point, which the controller reaches from the
    arm's measured state at arrival.
    """
    points = [JointTrajectoryPoint(positions=[float(p) for p in point],
                                   time_from_start=_duration(k * horizon))
              for k, point in enumerate(earlier)]
    points.append(JointTrajectoryPoint(positions=[float(p) for p in positions],
                                       time_from_start=_duration(max(len(earlier), 1)
                                                                 * horizon)))
    msg = JointTrajectory(joint_names=list(joint_names), points=points)
    msg.header.stamp = stamp
    return msg


def participant(gid: Sequence[int]) -> bytes:
    """The DDS participant of an endpoint: its GUID prefix, the first 12 bytes of its gid."""
    return bytes(gid[:12])


class ArmCommandPublisher:
    """Arm targets on the command topic a node's ``command_interface`` names.

    ``float64_array``: ``/joint_commands`` (``std_msgs/Float64MultiArray``: the arm targets in
    rad, then the gripper width in m when given); ``joint_trajectory``: ``/joint_trajectory``
    reaching ``target`` one ``period`` (s) after its stamp (:func:`point_command`; the arm
    only: the gripper width goes to franka_gripper's ``gripper_action``, when given, as
    :class:`~simops_ros.gripper_goals.GripperGoals`, and each width on ``gripper_command``
    for the recording, since the goals are not on a topic). ``chained`` trajectories form a
    :class:`SegmentChain`: what ``excite`` sends, so that a recording times the arm's target
    exactly.
    """

    def __init__(self, node: Node, topics: Mapping[str, TopicSpec], interface: str,
                 joint_names: Sequence[str], period: float, chained: bool = False,
                 gripper_action: str | None = None) -> None:
        self.trajectory = interface == 'joint_trajectory'
        key = 'joint_trajectory' if self.trajectory else 'joint_commands'
        self.topic = topics[key].name
        self._publisher = node.create_publisher(
            JointTrajectory if self.trajectory else Float64MultiArray, self.topic,
            qos_profile(topics[key]))
        self._node = node
        self._clock = node.get_clock()
        self._names = list(joint_names)
        self._period = period
        self._chain = SegmentChain(round(period * 1e9)) if chained else None
        self.gripper = None
        if self.trajectory and gripper_action:
            self.gripper = GripperGoals(node, gripper_action)
            self._width = node.create_publisher(Float64MultiArray,
                                                topics['gripper_command'].name,
                                                qos_profile(topics['gripper_command']))
            node.get_logger().info('gripper widths go as goals to '
                                   f'{node.resolve_topic_name(gripper_action)}')

    def delivered(self, arm_topic: str) -> str | None:
        """None once the arm's controller and every subscriber have every command; else what lacks.

        The command QoS is reliable, and a reader acknowledges a sample only once it has
        matched this writer: until then what is published is lost to it, however soon a
        recorder on the same topic stores it. Judged in this node's view of the graph: a
        subscription of the process that publishes the arm's joint states ``arm_topic``
        (ros2_control's controller_manager runs the broadcaster and the controller in one
        process, one DDS participant; so does the simulator) is known, every subscription
        known on the topic is matched, and none has anything left to acknowledge. Without
        the first, a recorder discovered before the controller made the others true while
        the controller missed the commands: on the stand-in, 1.3 s of them.
        """
        publisher = self._publisher
        subscribers = self._node.get_subscriptions_info_by_topic(publisher.topic_name)
        arm = {participant(i.endpoint_gid) for i in
               self._node.get_publishers_info_by_topic(arm_topic)}
        if not any(participant(i.endpoint_gid) in arm for i in subscribers):
            return (f'no subscriber of {publisher.topic_name} in the process that publishes '
                    f'{arm_topic} yet')
        known, matched = len(subscribers), publisher.get_subscription_count()
        if matched < known:
            return f'{matched} of the {known} subscribers of {publisher.topic_name} matched'
        if not publisher.wait_for_all_acked(Timeout(seconds=0)):
            return f'a subscriber of {publisher.topic_name} has not acknowledged'
        return None

    def __call__(self, target: np.ndarray, gripper: float | None = None) -> None:
        """Publish the arm ``target`` (7,) rad and ``gripper`` (m), if any.

        The gripper width goes on ``/joint_commands``, or as a goal beside a trajectory. A
        trajectory is stamped by the :class:`SegmentChain` when ``chained``, else zero: the
        controller starts it when it arrives and reaches ``target`` one period later, so no
        delivery delay compresses the segment (a stamp in the past would: JTC reaches the
        point at stamp + period, whenever the message arrives).
        """
        if self.trajectory:
            earlier: list[np.ndarray] = []
            stamp = Time()
            if self._chain is not None:
                ns, earlier = self._chain.next(self._clock.now().nanoseconds, target)
                sec, nanosec = split_nanoseconds(ns)
                stamp = Time(sec=sec, nanosec=nanosec)
            self._publisher.publish(point_command(self._names, target, self._period, stamp,
                                                  earlier))
            if gripper is not None and self.gripper is not None:
                self.gripper(gripper)
                self._width.publish(Float64MultiArray(data=[float(gripper)]))
            return
        data = target.tolist() + ([] if gripper is None else [float(gripper)])
        self._publisher.publish(Float64MultiArray(data=data))
