"""Joint trajectories sampled at physics rate, as ros2_control's JointTrajectoryController does.

A trajectory starts from the state it is handed at its start time: the arm's measured
position and velocity for a JointTrajectory (the topic or the action), as franka_ros2's
``fr3_arm_controller`` starts one (below); the current target, at rest, for a streamed
target (:mod:`simops_sim.stream_rule`). Between points it is
interpolated as JointTrajectoryController's ``interpolate_between_points`` does
(joint_trajectory_controller/src/trajectory.cpp, ros2_controllers jazzy ed360c9): linearly
when the points carry only positions, with cubic Hermite splines when every point carries
velocities, and with quintic Hermite splines when every point also carries accelerations
(MoveIt sends them). Joints are matched by
name; joints the trajectory does not name keep their current target. After the last point
the arm holds its position.

The start state: with ``interpolate_from_desired_state`` and ``open_loop_control`` false
(franka's ``fr3_ros_controllers.yaml`` sets neither), JointTrajectoryController samples a new
trajectory from the state its state interfaces read at its first update
(joint_trajectory_controller.cpp:298-313, ros2_controllers jazzy ed360c9): position and
velocity (``fr3_arm_controller``'s state interfaces), no acceleration, which
``set_point_before_trajectory_msg`` fills with zeros when the first point has accelerations
(trajectory.cpp:50-72). The first segment then is linear from the measured position when
the points carry only positions, cubic from the measured position and velocity with
velocities, quintic (zero start acceleration) with accelerations too.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.stamps import to_seconds
from simops_sim.joint_commands import CommandError, limit_violation

KNOT_TOLERANCE = 1e-6   # s; clocks that differ by rounding pick the same side of a knot


class TrajectoryError(CommandError):
    """A trajectory that must be rejected; see :class:`CommandError` for ``kind``."""


@dataclass(frozen=True)
class TrajectoryGoal:
    """A validated trajectory in arm-joint order, not yet anchored in time.

    ``times`` (K,) s from the start, strictly increasing; ``positions`` (K, 7) rad, columns
    not in ``joints`` unused; ``velocities`` (K, 7) rad/s or None; ``joints`` are the
    arm-joint indices the trajectory names; ``start`` is the requested sim start time
    (s), or None for "now"; ``accelerations`` (K, 7) rad/s^2, or None (only with velocities).
    """

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    joints: np.ndarray
    start: float | None
    accelerations: np.ndarray | None = None


def parse_trajectory(names: Sequence[str], times: Sequence[float],
                     positions: Sequence[Sequence[float]],
                     velocities: Sequence[Sequence[float]], arm_joints: Sequence[str],
                     start: float | None,
                     accelerations: Sequence[Sequence[float]] = ()) -> TrajectoryGoal:
    """Validate a JointTrajectory's content; raise :class:`TrajectoryError`."""
    slots = {name: i for i, name in enumerate(arm_joints)}
    unknown = [n for n in names if n not in slots]
    if unknown:
        raise TrajectoryError(f'unknown joint {unknown[0]!r} (expected '
                              f'{", ".join(arm_joints)})', 'malformed')
    if not names or len(set(names)) != len(names):
        raise TrajectoryError('joint_names must be non-empty and without duplicates',
                              'malformed')
    if not times:
        raise TrajectoryError('has no points', 'malformed')
    stamps = np.asarray(times, dtype=float)
    if stamps[0] < 0 or np.any(np.diff(stamps) <= 0) or not np.all(np.isfinite(stamps)):
        raise TrajectoryError('time_from_start must be >= 0 and strictly increasing',
                              'malformed')
    joints = np.array([slots[n] for n in names])
    pos = np.zeros((len(stamps), len(arm_joints)))
    vel = np.zeros_like(pos) if all(len(v) for v in velocities) else None
    acc = (np.zeros_like(pos) if vel is not None and len(accelerations) == len(stamps)
           and all(len(a) for a in accelerations) else None)
    for k, point in enumerate(positions):
        if len(point) != len(names):
            raise TrajectoryError(f'point {k} has {len(point)} positions for {len(names)} '
                                  'joints', 'malformed')
        pos[k, joints] = point
        if vel is not None:
            if len(velocities[k]) != len(names):
                raise TrajectoryError(f'point {k} has {len(velocities[k])} velocities for '
                                      f'{len(names)} joints', 'malformed')
            vel[k, joints] = velocities[k]
        if acc is not None:
            if len(accelerations[k]) != len(names):
                raise TrajectoryError(f'point {k} has {len(accelerations[k])} accelerations '
                                      f'for {len(names)} joints', 'malformed')
            acc[k, joints] = accelerations[k]
    if not all(np.all(np.isfinite(x)) for x in (pos, vel, acc) if x is not None):
        raise TrajectoryError('has a NaN or Inf position, velocity or acceleration',
                              'non_finite')
    return TrajectoryGoal(stamps, pos, vel, joints, start, acc)


def point_goal(target: np.ndarray, horizon: float,
               joints: np.ndarray | None = None) -> TrajectoryGoal:
    """One point reaching the arm ``target`` (7,) rad ``horizon`` s from now.

    This is what :func:`simops_ros.point_commands.point_command` sends, and what the stream
    rule reaches a streamed target by: a linear segment from the plan's start state.
    ``joints`` (arm-joint indices) limits it to those joints; None means all.
    """
    named = np.arange(len(target)) if joints is None else joints
    return TrajectoryGoal(np.array([float(horizon)]), np.asarray(target, float)[None, :].copy(),
                          None, named, None)


def stream_goal(target: np.ndarray, current: np.ndarray, period: float, speed: np.ndarray,
                joints: np.ndarray | None = None) -> TrajectoryGoal:
    """A streamed target (7,) rad, from the arm target ``current`` (7,) rad.

    The :func:`point_goal` reached over ``period`` (s), or slower where that would move a
    joint faster than its ``speed`` (7,) rad/s, all positive. Sysid replays recorded targets
    at the velocity limits (where the simulator would stop on a faster one, as the arm
    does: :mod:`simops_sim.reflexes`); the simulator catches up after a stall with it.
    """
    named = np.arange(len(target)) if joints is None else joints
    needed = np.abs(np.asarray(target)[named] - current[named]) / speed[named]
    return point_goal(target, max(period, float(needed.max(initial=0.0))), joints)


def goal_from_message(msg: Any, arm_joints: Sequence[str]) -> TrajectoryGoal:
    """A ``trajectory_msgs/JointTrajectory`` as a goal; raise :class:`TrajectoryError`.

    ``msg`` is read by attribute, so an rclpy message and one decoded from a bag both work.
    The goal starts at ``header.stamp`` (s on the publisher's clock), or now when it is zero.
    """
    stamp = to_seconds(msg.header.stamp)
    return parse_trajectory(
        list(msg.joint_names),
        [to_seconds(p.time_from_start) for p in msg.points],
        [list(p.positions) for p in msg.points], [list(p.velocities) for p in msg.points],
        arm_joints, stamp if stamp > 0 else None, [list(p.accelerations) for p in msg.points])


def check_goal(goal: TrajectoryGoal, spec: RobotSpec) -> None:
    """Raise :class:`TrajectoryError` for a position or velocity beyond the spec's limits.

    Only the joints the goal names are checked. Such a trajectory could only drive the arm
    into its stops, and its cubic terms could overflow.
    """
    names = spec.arm_joints
    problem = limit_violation(goal.positions, (spec.position_lower, spec.position_upper),
                              names, goal.joints, 'position')
    if problem is not None:
        raise TrajectoryError(f'{problem} (the spec\'s limits)', 'position_limits')
    if goal.velocities is not None:
        problem = limit_violation(goal.velocities, (-spec.velocity, spec.velocity), names,
                                  goal.joints, 'velocity')
        if problem is not None:
            raise TrajectoryError(f'{problem} (the spec\'s limits)', 'velocity_limits')


def _sent_speed(times: np.ndarray, positions: np.ndarray, velocities: np.ndarray | None,
                current: np.ndarray) -> np.ndarray:
    """Peak speed (7,) rad/s of points ``positions`` (K, 7) at ``times`` (K,) from ``current``."""
    peak = np.zeros(len(current))
    if times[0] > KNOT_TOLERANCE:
        peak = np.abs(positions[0] - current) / times[0]
    if len(times) > 1:
        between = np.abs(positions[1:] - positions[:-1]) / (times[1:] - times[:-1])[:, None]
        peak = np.maximum(peak, between.max(axis=0))
    if velocities is not None:
        peak = np.maximum(peak, np.abs(velocities).max(axis=0))
    return peak


class TrajectoryPlan:
    """A goal anchored at sim time ``start``, taken over at sim time ``now`` (s).

    Points are due at ``start`` plus their ``time_from_start``. As JointTrajectoryController
    samples a new trajectory, the state ``current`` (7,) rad, moving at ``velocity`` (7,)
    rad/s (None: at rest), at ``now`` (``start`` when None) is where it leaves from: the
    measured state for a JointTrajectory, the target for a streamed one (module docstring).
    A first point still ahead is reached by a segment from ``current`` at ``now``, so a
    stamp in the past shortens that segment. A first point already due (``time_from_start``
    0, as a trajectory that starts with the previous target has) makes the plan independent
    of ``now``, ``current`` and ``velocity``: when the trajectory reaches the arm does not
    matter.
    """

    def __init__(self, goal: TrajectoryGoal, start: float, current: np.ndarray,
                 now: float | None = None, velocity: np.ndarray | None = None) -> None:
        times, pos = goal.times, goal.positions.copy()
        vel, acc = goal.velocities, goal.accelerations
        if len(goal.joints) < len(current):   # joints it does not name keep their target
            keep = np.setdiff1d(np.arange(len(current)), goal.joints)
            pos[:, keep] = current[keep]
        self._sent = _sent_speed(times, pos, vel, current)
        taken = 0.0 if now is None else now - start
        if times[0] > taken + KNOT_TOLERANCE:  # a first segment from the start state
            times = np.concatenate(([taken], times))
            pos = np.vstack((current, pos))
            moving = np.zeros_like(current) if velocity is None else velocity
            vel = None if vel is None else np.vstack((moving, vel))
            acc = None if acc is None else np.vstack((np.zeros_like(current), acc))
        self.start = start
        self.times, self.positions, self.velocities = times, pos, vel
        self.accelerations = acc
        self.end = start + float(times[-1])
        # Per-step sampling runs at 1 kHz in Python: knots as floats, segment lengths (s),
        # steps and slopes computed once (the same arithmetic as computing them per sample;
        # np.diff's, by slices: a stream makes a plan every period).
        self._knots = [float(x) for x in times]
        self._spans = times[1:] - times[:-1]
        self._steps = pos[1:] - pos[:-1]
        self._slopes = self._steps / self._spans[:, None]

    def peak_speed(self) -> np.ndarray:
        """Per joint, the fastest the trajectory moves as sent (7,) rad/s.

        Between points, and at them; the first point is reached from the start state over
        its whole ``time_from_start``, whenever the trajectory arrived (a late arrival
        shortens that segment in the plan, as JTC runs it, but the sender did not ask for the
        speed). Between points it is the mean speed of the segment (the linear
        interpolation's speed; a cubic segment's own peak can be higher).
        """
        return self._sent

    def segments(self, cycle: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Where the plan moves and how fast: end positions (S, 7) rad, velocities (S, 7) rad/s.

        Each segment's end point with its mean velocity, as the plan runs it (from the
        current target), and with velocities also each point's own; what the position-based
        velocity limits judge (:meth:`simops_sim.reflexes.Reflexes.command`).

        ``cycle`` s: the controller's update period (franka_ros2's controller manager runs
        at ``update_rate: 1000``, franka_bringup/config/controllers.yaml). The controller
        samples the plan once a cycle, so a segment shorter than a cycle (a first point a
        few microseconds ahead when the trajectory is taken over, reached from the measured
        state) moves its step within one cycle: its speed is that step over a cycle, not
        over its own length.
        """
        slopes = self._slopes
        if cycle > 0.0:
            slopes = self._steps / np.maximum(self._spans, cycle)[:, None]
        if self.velocities is None:
            return self.positions[1:], slopes
        return (np.vstack((self.positions[1:], self.positions[1:])),
                np.vstack((slopes, self.velocities[1:])))

    def sample(self, now: float, out: np.ndarray, velocity: np.ndarray | None = None) -> bool:
        """Write the target (7,) rad at sim time ``now`` into ``out``; True once finished.

        ``velocity`` (7,), when given, receives the trajectory's velocity there (rad/s): the
        derivative of the interpolation, linear between points without velocities, cubic
        Hermite with them and quintic Hermite with accelerations too, as
        JointTrajectoryController samples; 0 before and after.
        """
        t = now - self.start
        reached = t + KNOT_TOLERANCE   # a knot within the tolerance counts as reached
        knots = self._knots
        if reached >= knots[-1] or reached <= knots[0]:
            out[:] = self.positions[-1] if reached >= knots[-1] else self.positions[0]
            if velocity is not None:
                velocity[:] = 0.0
            return reached >= knots[-1]
        k = bisect.bisect_right(knots, reached) - 1
        t0 = knots[k]
        h = knots[k + 1] - t0
        s = (t - t0) / h
        p0, p1 = self.positions[k], self.positions[k + 1]
        if self.velocities is None:
            np.multiply(s, self._steps[k], out=out)
            out += p0
            if velocity is not None:
                velocity[:] = self._slopes[k]
            return False
        v0, v1 = self.velocities[k] * h, self.velocities[k + 1] * h
        if self.accelerations is not None:
            a0, a1 = self.accelerations[k] * h * h, self.accelerations[k + 1] * h * h
            _quintic(s, h, p0, v0, a0, a1, v1, p1, out, velocity)
            return False
        s2, s3 = s * s, s * s * s
        out[:] = ((2 * s3 - 3 * s2 + 1) * p0 + (s3 - 2 * s2 + s) * v0
                  + (-2 * s3 + 3 * s2) * p1 + (s3 - s2) * v1)
        if velocity is not None:
            velocity[:] = ((6 * s2 - 6 * s) * p0 + (3 * s2 - 4 * s + 1) * v0
                           + (-6 * s2 + 6 * s) * p1 + (3 * s2 - 2 * s) * v1) / h
        return False


def _quintic(s: float, h: float, p0: np.ndarray, v0: np.ndarray, a0: np.ndarray,
             a1: np.ndarray, v1: np.ndarray, p1: np.ndarray, out: np.ndarray,
             velocity: np.ndarray | None) -> None:
    """The quintic Hermite segment at ``s`` in [0, 1] of a segment ``h`` s long.

    Positions ``p0``, ``p1`` (7,) rad, velocities ``v0``, ``v1`` scaled by ``h`` and
    accelerations ``a0``, ``a1`` scaled by ``h``^2 at its ends; the position goes into
    ``out`` and, when given, the velocity (rad/s) into ``velocity``.
    """
    s2, s3 = s * s, s * s * s
    s4, s5 = s3 * s, s3 * s2
    out[:] = ((1 - 10 * s3 + 15 * s4 - 6 * s5) * p0 + (s - 6 * s3 + 8 * s4 - 3 * s5) * v0
              + (0.5 * s2 - 1.5 * s3 + 1.5 * s4 - 0.5 * s5) * a0
              + (0.5 * s3 - s4 + 0.5 * s5) * a1 + (-4 * s3 + 7 * s4 - 3 * s5) * v1
              + (10 * s3 - 15 * s4 + 6 * s5) * p1)
    if velocity is not None:
        velocity[:] = ((-30 * s2 + 60 * s3 - 30 * s4) * p0
                       + (1 - 18 * s2 + 32 * s3 - 15 * s4) * v0
                       + (s - 4.5 * s2 + 6 * s3 - 2.5 * s4) * a0
                       + (1.5 * s2 - 4 * s3 + 2.5 * s4) * a1
                       + (-12 * s2 + 28 * s3 - 15 * s4) * v1
                       + (30 * s2 - 60 * s3 + 30 * s4) * p1) / h
