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

LEAD = 0.5   # command periods a chained segment starts after it was computed


class SegmentChain:
    """Start times of a stream of one-period segments on a fixed grid, each from the last.

    A timer fires a few milliseconds early or late, so segments stamped when they were
    computed overlap or leave gaps. Chained segments start at ``first + k * period`` ns
    instead, :data:`LEAD` periods after they were computed (so the controller has them
    before they start), each from the target the one before reached: the controller's
    target moves continuously, and when a message arrives does not change it. A timer late
    or early by more than half a period restarts the chain.
    """

    def __init__(self, period_ns: int) -> None:
        self.period_ns = period_ns
        self._due: int | None = None
        self._last: np.ndarray | None = None

    def next(self, now_ns: int, target: np.ndarray) -> tuple[int, np.ndarray | None]:
        """The stamp (ns) for ``target`` (7,) rad computed at ``now_ns``, and where it starts.

        The start is the previous target, or None when the chain (re)starts: a one-point
        trajectory, which the controller reaches from wherever it is.
        """
        wanted = now_ns + round(LEAD * self.period_ns)
        previous = self._last
        if self._due is None or abs(wanted - self._due) > self.period_ns // 2:
            self._due, previous = wanted, None
        stamp = self._due
        self._due += self.period_ns
        self._last = np.array(target, dtype=float)
        return stamp, previous


def _duration(seconds: float) -> Duration:
    sec, nanosec = split_nanoseconds(round(seconds * 1e9))
    return Duration(sec=sec, nanosec=nanosec)


def point_command(joint_names: Sequence[str], positions: Sequence[float], horizon: float,
                  stamp: Time, previous: Sequence[float] | None = None) -> JointTrajectory:
    """Reach ``positions`` (rad, ``joint_names`` order) ``horizon`` s after ``stamp``.

    ``stamp`` is when the segment starts, on the publisher's ROS clock (sim time under
    use_sim_time); a zero stamp means "now". With ``previous`` (the target last sent) the
    trajectory has two points, ``previous`` at ``stamp`` and ``positions`` at ``stamp`` +
    ``horizon``. JointTrajectoryController then interpolates between them whenever the
    message arrives before ``stamp``: neither transport latency nor where the arm is shifts
    the segment, and a recording of these messages times every command exactly
    (``simops_sysid fit`` replays them). Arriving later, it is joined where it is by then.
    Without ``previous`` (the first command) it is one point, which the controller reaches
    from its current state at arrival.
    """
    point = JointTrajectoryPoint(positions=[float(p) for p in positions],
                                 time_from_start=_duration(horizon))
    points = [point]
    if previous is not None:
        points.insert(0, JointTrajectoryPoint(positions=[float(p) for p in previous],
                                              time_from_start=_duration(0.0)))
    msg = JointTrajectory(joint_names=list(joint_names), points=points)
    msg.header.stamp = stamp
    return msg


class ArmCommandPublisher:
    """Arm targets on the command topic a node's ``command_interface`` names.

    ``float64_array``: ``/joint_commands`` (``std_msgs/Float64MultiArray``: the arm targets in
    rad, then the gripper width in m when given); ``joint_trajectory``: ``/joint_trajectory``
    reaching ``target`` one ``period`` (s) after its stamp (:func:`point_command`; the arm
    only: the gripper width goes to franka_gripper's ``gripper_action``, when given, as
    :class:`~simops_ros.gripper_goals.GripperGoals`). ``chained`` trajectories form a
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
            node.get_logger().info('gripper widths go as goals to '
                                   f'{node.resolve_topic_name(gripper_action)}')

    def delivered(self) -> str | None:
        """None once every subscriber of the topic has everything published; else what lacks.

        The command QoS is reliable, and a reader acknowledges a sample only once it has
        matched this writer: until then what is published is lost to it, however soon a
        recorder on the same topic stores it. Judged in this node's view of the graph: every
        subscription it has discovered on the topic is matched, and none has anything left
        to acknowledge.
        """
        publisher = self._publisher
        known = len(self._node.get_subscriptions_info_by_topic(publisher.topic_name))
        matched = publisher.get_subscription_count()
        if not known:
            return f'no subscriber on {publisher.topic_name}'
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
            previous, stamp = None, Time()
            if self._chain is not None:
                ns, previous = self._chain.next(self._clock.now().nanoseconds, target)
                sec, nanosec = split_nanoseconds(ns)
                stamp = Time(sec=sec, nanosec=nanosec)
            self._publisher.publish(point_command(self._names, target, self._period, stamp,
                                                  previous))
            if gripper is not None and self.gripper is not None:
                self.gripper(gripper)
            return
        data = target.tolist() + ([] if gripper is None else [float(gripper)])
        self._publisher.publish(Float64MultiArray(data=data))
