"""Streamed arm commands: Float64MultiArray, or JointTrajectory read as JTC reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.topics import TopicSpec
from simops_ros.qos import qos_profile


def point_command(joint_names: Sequence[str], positions: Sequence[float], horizon: float,
                  stamp: Time) -> JointTrajectory:
    """One point: reach ``positions`` (rad, ``joint_names`` order) ``horizon`` s after ``stamp``.

    ``stamp`` is when the command was computed, on the publisher's ROS clock (sim time under
    use_sim_time). JointTrajectoryController starts the segment at the stamp, not at
    arrival, so transport latency shifts nothing, and a recording of these messages times
    every command exactly (``simops_sysid fit`` aligns on it). With a horizon of one command
    period the previous segment has ended when the next arrives. A zero stamp means "now".
    """
    nanoseconds = round(horizon * 1e9)
    point = JointTrajectoryPoint(positions=[float(p) for p in positions],
                                 time_from_start=Duration(sec=nanoseconds // 1_000_000_000,
                                                          nanosec=nanoseconds % 1_000_000_000))
    msg = JointTrajectory(joint_names=list(joint_names), points=[point])
    msg.header.stamp = stamp
    return msg


class ArmCommandPublisher:
    """Arm targets on the command topic a node's ``command_interface`` names.

    ``float64_array``: ``/joint_commands`` (``std_msgs/Float64MultiArray``: the arm targets in
    rad, then the gripper width in m when given); ``joint_trajectory``: ``/joint_trajectory``
    with one point one ``period`` (s) ahead of its stamp (:func:`point_command`; the arm only).
    """

    def __init__(self, node: Node, topics: Mapping[str, TopicSpec], interface: str,
                 joint_names: Sequence[str], period: float) -> None:
        self.trajectory = interface == 'joint_trajectory'
        key = 'joint_trajectory' if self.trajectory else 'joint_commands'
        self.topic = topics[key].name
        self._publisher = node.create_publisher(
            JointTrajectory if self.trajectory else Float64MultiArray, self.topic,
            qos_profile(topics[key]))
        self._clock = node.get_clock()
        self._names = list(joint_names)
        self._period = period

    def __call__(self, target: np.ndarray, gripper: float | None = None,
                 stamp: Time | None = None) -> None:
        """Publish the arm ``target`` (7,) rad and, on ``/joint_commands``, ``gripper`` (m).

        A trajectory is stamped ``stamp`` (the measured state's stamp it was computed from,
        on the arm's clock) or, when None, this node's clock now.
        """
        if self.trajectory:
            self._publisher.publish(point_command(
                self._names, target, self._period,
                self._clock.now().to_msg() if stamp is None else stamp))
            return
        data = target.tolist() + ([] if gripper is None else [float(gripper)])
        self._publisher.publish(Float64MultiArray(data=data))
