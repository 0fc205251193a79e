"""FollowJointTrajectory goals as JointTrajectoryController judges them (no rclpy).

The rules of ros2_controllers' ``joint_trajectory_controller`` for its action
(``<controller>/follow_joint_trajectory``, control_msgs/FollowJointTrajectory):

- a goal must name every controller joint, have points, end at rest and, when its
  ``header.stamp`` is set, not end in the past; JTC *rejects* any other goal at once (the
  client sees the goal not accepted), it sends no result code for it;
- tolerances: the controller's defaults (:class:`simops_core.robot_spec.Constraints`), each
  overridden by a goal's positive value and erased by -1 (no tolerance); any other negative
  value, or a tolerance naming an unknown joint, makes the whole goal fall back to the
  defaults;
- while the trajectory runs, a joint whose position (velocity) error exceeds its path
  tolerance aborts the goal with PATH_TOLERANCE_VIOLATED; after the last point's time the
  goal succeeds once every joint is within its goal tolerance, and with ``goal_time`` > 0 is
  aborted with GOAL_TOLERANCE_VIOLATED when that takes longer; a new goal aborts the running
  one with INVALID_GOAL. Errors are desired minus actual, as JTC computes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from simops_core.robot_spec import Constraints
from simops_sim.trajectory_plan import TrajectoryGoal

ERASE = -1.0   # a goal tolerance of -1 erases the default: no tolerance
ERASE_MATCH = 1.2e-7   # how close to -1 counts as -1 (JTC compares with float epsilon)

# One tolerance entry of a goal: (joint name, position rad, velocity rad/s,
# acceleration rad/s^2), as control_msgs/JointTolerance carries it.
JointTolerance = tuple[str, float, float, float]


class FollowResult(IntEnum):
    """control_msgs/FollowJointTrajectory result codes."""

    SUCCESSFUL = 0
    INVALID_GOAL = -1
    INVALID_JOINTS = -2
    OLD_HEADER_TIMESTAMP = -3
    PATH_TOLERANCE_VIOLATED = -4
    GOAL_TOLERANCE_VIOLATED = -5


@dataclass(frozen=True)
class Tolerances:
    """A goal's tolerances (0 meaning none).

    ``path`` and ``goal`` (7, 3): position rad, velocity rad/s, acceleration rad/s^2 per
    joint; ``goal_time`` s after the last point (0: no limit).
    """

    path: np.ndarray
    goal: np.ndarray
    goal_time: float


def default_tolerances(constraints: Constraints) -> Tolerances:
    """The controller's own tolerances (a goal that sets none gets these)."""
    joints = len(constraints.trajectory)
    path, goal = np.zeros((joints, 3)), np.zeros((joints, 3))
    path[:, 0] = constraints.trajectory
    goal[:, 0] = constraints.goal
    goal[:, 1] = constraints.stopped_velocity_tolerance
    return Tolerances(path, goal, constraints.goal_time)


def goal_tolerances(defaults: Tolerances, joints: Sequence[str],
                    path: Sequence[JointTolerance], goal: Sequence[JointTolerance],
                    goal_time: float) -> tuple[Tolerances, str | None]:
    """The tolerances of a goal over ``defaults``; and why the defaults were kept, or None.

    ``joints`` are the controller's joint names, in the order of the tolerance rows.
    """
    try:
        time_limit = _resolve(defaults.goal_time, goal_time)
    except ValueError:
        return defaults, f'illegal goal_time_tolerance {goal_time:g} s'
    resolved = {}
    for kind, entries, base in (('path', path, defaults.path), ('goal', goal, defaults.goal)):
        table = base.copy()
        for name, *values in entries:
            if name not in joints:
                return defaults, f'{kind}_tolerance names joint {name!r}, which is not the ' \
                                 'controller\'s'
            row = joints.index(name)
            try:
                table[row] = [_resolve(d, v) for d, v in zip(base[row], values, strict=True)]
            except ValueError:
                return defaults, f'{kind}_tolerance of {name!r} has an illegal value {values}'
        resolved[kind] = table
    return Tolerances(resolved['path'], resolved['goal'], time_limit), None


def _resolve(default: float, value: float) -> float:
    """JTC's rule for one goal tolerance: > 0 replaces, -1 erases (0), 0 keeps the default."""
    if value > 0.0:
        return float(value)
    if abs(value - ERASE) < ERASE_MATCH:
        return 0.0
    if value < 0.0 or not math.isfinite(value):
        raise ValueError(value)
    return default


def goal_problem(goal: TrajectoryGoal, joint_count: int, end_velocity: np.ndarray | None,
                 now: float) -> str | None:
    """Why JTC would reject ``goal`` (on sim time ``now``, s), or None to accept it.

    The message checks of :func:`simops_sim.trajectory_plan.parse_trajectory` come first;
    this adds JTC's ``validate_trajectory_msg`` (joint_trajectory_controller.cpp:1671-1760,
    ros2_controllers jazzy ed360c9), which judges the action's goals and the topic's
    trajectories alike with franka's ``allow_partial_joints_goal: false`` and Jazzy's
    ``allow_nonzero_velocity_at_trajectory_end: false``: every one of the ``joint_count``
    joints named, the last point's velocities ``end_velocity`` (or None when it has none)
    zero, and a stamped trajectory not ending in the past.
    """
    if len(goal.joints) != joint_count:
        return (f'names {len(goal.joints)} of the controller\'s {joint_count} joints; a goal '
                'must name all of them')
    if end_velocity is not None and np.any(np.abs(end_velocity) > np.finfo(np.float32).eps):
        return 'its last point has a non-zero velocity; a trajectory must end at rest'
    if goal.start is not None and goal.start + float(goal.times[-1]) < now:
        return (f'its header.stamp puts its end {now - goal.start - goal.times[-1]:.3f} s in '
                'the past')
    return None


class GoalMonitor:
    """Judges one running goal at each check, as JTC does in its update.

    ``start`` is the sim time (s) the goal's ``time_from_start`` counts from; ``times`` (K,)
    s its points' times.
    """

    def __init__(self, tolerances: Tolerances, start: float, times: np.ndarray) -> None:
        self.tolerances = tolerances
        self.due = start + np.asarray(times, dtype=float)
        self.end = float(self.due[-1])

    def index(self, now: float) -> int:
        """The goal's point the trajectory is heading for at sim time ``now`` (K after it)."""
        return int(np.searchsorted(self.due, now, side='right'))

    def check(self, now: float, error_q: np.ndarray, error_qd: np.ndarray
              ) -> tuple[FollowResult, str] | None:
        """The outcome at sim time ``now`` (s), or None while the goal runs on.

        ``error_q`` (7,) rad and ``error_qd`` (7,) rad/s are desired minus actual.
        """
        errors = np.abs(np.column_stack((error_q, error_qd)))
        if now < self.end:
            bad = _violations(errors, self.tolerances.path)
            if bad.size:
                return FollowResult.PATH_TOLERANCE_VIOLATED, (
                    f'path tolerance violated by joint {bad[0] + 1} (position error '
                    f'{error_q[bad[0]]:.4g} rad, velocity error {error_qd[bad[0]]:.4g} rad/s)')
            return None
        bad = _violations(errors, self.tolerances.goal)
        if not bad.size:
            return FollowResult.SUCCESSFUL, 'Goal successfully reached!'
        late = now - self.end
        if self.tolerances.goal_time > 0.0 and late > self.tolerances.goal_time:
            return FollowResult.GOAL_TOLERANCE_VIOLATED, (
                f'goal tolerance not reached {late:.3f} s after the last point (goal_time '
                f'{self.tolerances.goal_time:g} s): joint {bad[0] + 1} position error '
                f'{error_q[bad[0]]:.4g} rad, velocity error {error_qd[bad[0]]:.4g} rad/s')
        return None


def _violations(errors: np.ndarray, tolerance: np.ndarray) -> np.ndarray:
    """Joints (indices) with an error (N, 2) beyond a set (> 0) tolerance (N, 3)."""
    limits = tolerance[:, :2]
    return np.flatnonzero(np.any((limits > 0.0) & (errors > limits), axis=1))
