"""Recorded commands turned into the simulator's controller inputs, one row per physics step.

Open-loop replay drives the model exactly as the simulator node drives the arm
(:mod:`simops_sim.stepper`): a command is applied before the first physics step that runs
after it arrived; a ``JointTrajectory`` starts a
:class:`simops_sim.trajectory_plan.TrajectoryPlan` from the arm's measured position and
velocity then (JointTrajectoryController's start state; the recording's, so the replay
stays open loop), and a streamed
``Float64MultiArray`` target becomes a plan by the node's own stream rule
(:class:`simops_sim.stream_rule.StreamPacer`, on the recorded arrivals: a stream at 1 kHz is
followed at 1 kHz); the plan is sampled (position and velocity) at every physics step. The
command delay is applied afterwards with :func:`simops_sim.delay.shift_commands`, the rule
the node's delay line follows; a fractional delay blends the two neighbouring whole-step
shifts, so the fit sees a smooth function of the delay that equals the node's behaviour at
every whole step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_sim.delay import shift_commands
from simops_sim.stream_rule import StreamPacer, VelocityLimits
from simops_sim.trajectory_plan import TrajectoryGoal, TrajectoryPlan

_SIM_DEFAULTS = defaults(load_parameter_schema('sim'))
STREAM_PERIOD = float(_SIM_DEFAULTS['control_period'])    # s
STREAM_TIMEOUT = float(_SIM_DEFAULTS['command_timeout'])  # s

Measured = Callable[[float], tuple[np.ndarray, np.ndarray]]
"""The arm's measured position (7,) rad and velocity (7,) rad/s at a time (s)."""


@dataclass(frozen=True)
class CommandLog:
    """Commands in arrival order on the joint-state clock.

    ``t`` (M,) s: when each command reached the arm. Exactly one of ``targets`` (M, 7) rad
    (streamed position targets, NaN for joints a command left out) and ``goals`` (M
    trajectory goals, arm-joint order) is set. Streamed targets become plans by the
    simulator's stream rule with its ``control_period`` ``period`` s and ``command_timeout``
    ``timeout`` s, and the arm's velocity limits ``limits`` (its robot spec; None: no
    catch-up ceiling); see :mod:`simops_sim.stream_rule`. Commands that made the simulator
    stop are replayed: whether they did depends on a target the recording may not show (its
    first commands can be missed).
    """

    source: str
    t: np.ndarray
    targets: np.ndarray | None = None
    goals: tuple[TrajectoryGoal, ...] | None = None
    period: float = STREAM_PERIOD
    limits: VelocityLimits | None = None
    timeout: float = STREAM_TIMEOUT

    def __len__(self) -> int:
        return int(self.t.size)

    def first_move(self) -> int:
        """Index of the first command whose arm target differs from the first one's.

        The commands before it hold where the arm was (``excite`` holds until the controller
        has its commands); ``len(self)`` when nothing moves.
        """
        if self.goals is not None:
            finals = [goal.positions[-1] for goal in self.goals]
        else:
            finals = list(self.targets) if self.targets is not None else []
        return next((k for k, final in enumerate(finals)
                     if not np.array_equal(final, finals[0], equal_nan=True)), len(self))


def application_steps(arrival: np.ndarray, t0: float, dt: float) -> np.ndarray:
    """Index of the physics step (0 = the step starting at ``t0``) that first sees each command.

    The node sleeps until a step is due, applies what arrived, then steps: the step starting
    at ``t0 + k dt`` runs at wall time ``t0 + (k + 1) dt``, so a command arriving at ``a`` s
    is applied at ``k = ceil((a - t0) / dt - 1)``.
    """
    return np.ceil((np.asarray(arrival) - t0) / dt - 1.0 - 1e-9).astype(np.int64)


def physics_targets(log: CommandLog, t0: float, steps: int, dt: float,
                    initial: np.ndarray, measured: Measured | None = None) -> np.ndarray:
    """Controller inputs (steps, 14) at the physics steps starting at ``t0 + k dt`` s.

    Columns: the arm's position targets (7) rad, then its desired velocities (7) rad/s, which
    the controller feeds forward as the node's :class:`TrajectoryPlan` samples them.
    ``initial`` (7,) is the target in force before ``t0``; every
    command that arrived before ``t0`` is applied first, as the node would have.
    ``measured(t)``: the arm's measured position (7,) rad and velocity (7,) rad/s at ``t`` s,
    where each trajectory goal starts; None (a log without a recorded arm): from the
    target, at rest. See :func:`controller_inputs` for the same rows one step at a time.
    """
    rows = controller_inputs(log, t0, dt, initial, measured)
    out = np.empty((steps, 2 * len(initial)))
    for k in range(steps):
        out[k] = next(rows)
    return out


def controller_inputs(log: CommandLog, t0: float, dt: float, initial: np.ndarray,
                      measured: Measured | None = None) -> Iterator[np.ndarray]:
    """:func:`physics_targets`' rows (14,), one per physics step, without end.

    ``measured`` is asked when a trajectory goal is applied, before that step: a simulation
    stepping the arm between rows closes the loop as the node does.
    """
    target = np.array(initial, dtype=float)
    velocity = np.zeros_like(target)
    first = application_steps(log.t, t0, dt)
    pacer = StreamPacer(log.limits)
    plan: TrajectoryPlan | None = None
    pending = 0
    now = t0   # summed step by step, as MuJoCo sums its time
    k = 0
    while True:
        while pending < len(log) and first[pending] <= k:
            if plan is not None:   # the current target: the plan's position now
                plan.sample(now, target, velocity)
            if log.goals is not None:
                goal = log.goals[pending]
                pacer.end()
            else:
                row = log.targets[pending]
                goal, _ = pacer.goal(float(log.t[pending]), row, target, log.period,
                                     log.timeout, np.flatnonzero(~np.isnan(row)))
            start = now if goal.start is None else goal.start
            if log.goals is not None and measured is not None:
                position, moving = measured(now)
                plan = TrajectoryPlan(goal, start, position, now, moving)
            else:
                plan = TrajectoryPlan(goal, start, target, now)
            if log.goals is None:
                pacer.followed(float(log.t[pending]), plan.positions[-1])
            pending += 1
        if plan is not None and plan.sample(now, target, velocity):
            plan = None
        yield np.concatenate((target, velocity))
        now += dt
        k += 1


def delayed(targets: np.ndarray, history: int, delay_steps: float) -> np.ndarray:
    """``targets`` (history + T, n) delayed by ``delay_steps`` (>= 0, may be fractional).

    The first ``history`` rows are what was commanded before the sequence; returns the (T, n)
    rows the actuators see. Whole values equal :func:`shift_commands` exactly. A delay a
    rounding error below zero (an optimizer step onto the bound) counts as zero.
    """
    delay_steps = max(0.0, delay_steps)
    whole = int(np.floor(delay_steps))
    frac = float(delay_steps - whole)
    if whole + 1 > history:
        raise ValueError(f'delay of {delay_steps:.2f} steps needs more than {history} steps '
                         'of command history')
    out = shift_commands(targets, whole, targets[0])[history:]
    if frac > 0.0:
        later = shift_commands(targets, whole + 1, targets[0])[history:]
        out = (1.0 - frac) * out + frac * later
    return out
