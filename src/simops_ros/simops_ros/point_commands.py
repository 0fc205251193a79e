"""Streamed arm commands as JointTrajectory messages, read as JointTrajectoryController does."""

from __future__ import annotations

from collections.abc import Sequence

from builtin_interfaces.msg import Duration, Time
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


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
