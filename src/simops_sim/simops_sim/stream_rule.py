"""The stream rule: how a streamed position target becomes a plan (no rclpy).

Written once, run by the simulator node (:class:`simops_sim.arm_lane.ArmLane`) and by
``fit``'s replay (:func:`simops_sysid.replay.physics_targets`) on the same arrivals. Arrivals
are on the clock the plans run on: a recording's receive times for the replay; for the node,
its schedule's (sim time: :meth:`simops_sim.stepper.Stepper.advance` takes a catching-up
simulator's lateness off them).

A target streamed on ``/joint_commands`` is reached linearly from the arm's current target,
as JointTrajectoryController reaches a one-point trajectory, over the stream's *span*:

- the first target of a stream, and every target when arrivals do not pace the stream
  (lockstep): ``period``, the simulator's ``control_period``;
- within a paced (realtime) stream: the stream's own period, the mean of its last
  :data:`PACE_WINDOW` gaps between arrivals (``period`` until it has shown that many; a
  mean, since targets received in bunches while the receiver stalled keep the stream's
  total time, though half of the gaps may be a millisecond), or the gap since the
  previous arrival where that is
  longer (a stall: the stream's own pace, so targets this node dropped or held through do
  not make the next one a jump), at most ``timeout`` (the command timeout). A stream that
  streams at 1 kHz is followed at 1 kHz, one at 20 Hz at 20 Hz; a gap longer than
  :data:`MAX_CATCH_UP` ends the stream.

The speed the stream asks for is its step from the previous target over the span (what the
velocity reflex judges). Where the arm target is behind the stream (a stall, or two targets
taken in one physics step: a 1 kHz stream with a millisecond of jitter does that every few
steps), the plan catches up no faster than :data:`CATCH_UP_SPEED` of the velocity limits,
or :data:`CATCH_UP_RATIO` times the stream's speed where that is faster, never beyond the
limits unless the stream itself asks for more. Without the ratio a stream faster than
:data:`CATCH_UP_SPEED` of the limits never caught up: on Gaz et al.'s Panda recording
(1 kHz, joints at up to 2 rad/s) the arm target fell 20 ms behind the stream within a second.
The limits are the arm's at the target, in the direction of travel: where the spec has
position-based limits (the FR3's), the catch-up towards a position limit slows as the arm
does (:meth:`~simops_core.robot_spec.RobotSpec.velocity_bounds`). A ceiling of the constant
limits made the simulator stop its own arm: an FR3 streamed towards fr3_joint5 at 2.6 rad
caught up at 2.63 rad/s, half the constant 5.26 rad/s but beyond the 2.45 rad/s allowed
there, while the policy's own steps stayed under it.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

import numpy as np

from simops_core.policy_step import StepSettings
from simops_sim.trajectory_plan import TrajectoryGoal, point_goal, stream_goal

MAX_CATCH_UP = 1.0      # s: a longer gap between two arrivals ends the stream
# of the velocity limits: a stalled stream's fastest catch-up, the policy's default
# velocity_scale (the servo's overshoot stays clear)
CATCH_UP_SPEED = StepSettings.velocity_scale
CATCH_UP_RATIO = 1.25   # a fast stream's catch-up: this many times its own speed
PACE_WINDOW = 8         # gaps the stream's period is the mean of


class VelocityLimits(Protocol):
    """An arm's joint velocity limits, as :class:`~simops_core.robot_spec.RobotSpec` has them.

    ``velocity`` (7,) rad/s: the constant limits.
    """

    velocity: np.ndarray

    def velocity_bounds(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The slowest and fastest velocities (rad/s) allowed at ``position`` (..., 7) rad."""


class StreamPacer:
    """One arm's stream of position targets, turned into goals by the stream rule.

    ``limits``: the arm's velocity limits (a robot spec; None: no catch-up ceiling);
    ``paced``: whether arrival times pace the stream (realtime), or every target takes the
    period (lockstep).
    """

    def __init__(self, limits: VelocityLimits | None, paced: bool = True) -> None:
        self.limits = limits
        self.paced = paced
        self._at: float | None = None          # arrival (s) of the last followed target
        self._reference = np.zeros(0)          # (7,) rad, that target as followed
        self._gaps: deque[float] = deque(maxlen=PACE_WINDOW)

    def end(self) -> None:
        """The stream ends (a trajectory, a hold, a cancel, a reset or a stop)."""
        self._at = None
        self._gaps.clear()

    def continues(self, arrival: float) -> bool:
        """Whether a target arriving at ``arrival`` s continues a paced stream."""
        return self.paced and self._at is not None and arrival - self._at <= MAX_CATCH_UP

    def span(self, arrival: float, period: float, timeout: float) -> float:
        """The span (s) a target arriving at ``arrival`` s is reached over; see the module.

        ``period`` s: the span outside a paced stream; ``timeout`` s: the longest span.
        """
        if not self.continues(arrival):
            return period
        gap = arrival - self._at
        gaps = self._gaps
        pace = sum(gaps) / len(gaps) if len(gaps) == PACE_WINDOW else period
        return min(max(pace, gap), max(pace, timeout))

    def goal(self, arrival: float, target: np.ndarray, current: np.ndarray, period: float,
             timeout: float, joints: np.ndarray | None = None
             ) -> tuple[TrajectoryGoal, np.ndarray]:
        """The goal for ``target`` (7,) rad arriving at ``arrival`` s, and the speed it asks for.

        ``current`` (7,) rad: the arm target now, where the plan starts; ``period`` and
        ``timeout`` s: see :meth:`span`; ``joints``: the arm joints the target names (None:
        all). The speed (7,) rad/s is the step from the previous target of the stream
        (``current`` when none) over the span.
        """
        span = self.span(arrival, period, timeout)
        reference = self._reference if self.continues(arrival) else current
        speed = np.abs(np.asarray(target, float) - reference) / span
        if joints is not None:   # joints a target leaves out do not move
            speed[np.setdiff1d(np.arange(speed.size), joints)] = 0.0
        if self.limits is None:
            return point_goal(target, span, joints), speed
        ceiling = catch_up_ceiling(self.limits, target, current, speed)
        return stream_goal(target, current, span, ceiling, joints), speed

    def followed(self, arrival: float, end: np.ndarray) -> None:
        """The goal for the target that arrived at ``arrival`` s is followed to ``end`` (7,)."""
        if self.continues(arrival):
            self._gaps.append(arrival - self._at)
        else:
            self._gaps.clear()
        self._at = arrival
        self._reference = np.array(end, dtype=float)


def catch_up_ceiling(limits: VelocityLimits, target: np.ndarray, current: np.ndarray,
                     speed: np.ndarray) -> np.ndarray:
    """The fastest catch-up (7,) rad/s from the arm target ``current`` to ``target`` (7,) rad.

    ``speed`` (7,) rad/s: what the stream asks for. See the module docstring: the arm's
    limit at ``target`` in the direction of travel bounds it unless ``speed`` is higher.
    """
    low, high = limits.velocity_bounds(target)
    allowed = np.where(target >= current, high, -low)
    faster = np.minimum(CATCH_UP_RATIO * speed, np.maximum(speed, allowed))
    ceiling = np.maximum(faster, np.minimum(CATCH_UP_SPEED * limits.velocity, allowed))
    # at a position limit nothing is allowed towards it: the stream's own speed, else the
    # constant ceiling (the arm stops there, as it would)
    return np.where(ceiling > 0.0, ceiling, CATCH_UP_SPEED * limits.velocity)
