"""Identification data from rosbag2 bags: aligned, resampled and split into sequences.

Bags are read only through the shared reader (:mod:`simops_core.bag_reader`,
:mod:`simops_core.bag_series`). Joint states are found by message type and joint names (the
real arm publishes them on /franka/joint_states, the simulator on /joint_states); commands
come from a ``JointTrajectory`` topic, the ``joint_commands`` topic of config/topics.yaml, or
a forward command controller's ``~/commands`` (``Float64MultiArray`` positions streamed to a
position interface).

Clocks: joint states carry header stamps (the arm driver's clock: system time on a real
arm and on the stand-in, sim time under /clock). A stamped ``JointTrajectory`` (excite and
the policy stamp theirs) starts at its stamp, as JointTrajectoryController starts it, so
its timing is exact. When each command took effect is still needed (a segment starts from
the target in force then), and streamed ``Float64MultiArray`` commands and unstamped
trajectories have nothing else. See :class:`ReceiveClock`: a command received at ``w`` took
effect at ``w`` minus the clock offset, unless the arm was running late then (its newest
joint state was old), in which case it took effect once the arm caught up. A stamped command
cannot take effect before its stamp. The transport latency that remains is absorbed by the
fitted command delay (for stamped segments of one command period it shifts the target by
only (latency)^2 / (2 period)).

Every array is in the robot spec's joint order; times are s on the joint-state clock,
relative to the recording's first joint state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.ndimage import uniform_filter1d

from simops_core.bag_reader import BagError, RawBag, message_typestore, read_bag
from simops_core.bag_series import (
    FLOAT_ARRAY,
    JOINT_STATE,
    TRAJECTORY,
    command_series,
    joint_series,
)
from simops_core.paths import resolve_resource
from simops_core.receive_clock import ReceiveClock, delivery_times
from simops_core.robot_spec import ARM_DOF, RobotSpec, gripper_width, load_robot_spec
from simops_core.stamps import to_seconds
from simops_core.topics import TopicSpec
from simops_sim.joint_commands import limit_violation
from simops_sim.trajectory_plan import TrajectoryError, TrajectoryGoal, goal_from_message
from simops_sysid.replay import STREAM_TIMEOUT, CommandLog, physics_targets

STREAM_HOLD = STREAM_TIMEOUT   # s a streamed command stays in force (the node's timeout)
MIN_SEQUENCE = 2.0          # s, shortest sequence worth fitting
MAX_GAP = 0.05              # s, longest gap between joint states inside the data
MAX_LAG = 0.02             # s a joint state may arrive later than the fastest one did
EFFORT_WINDOW = 0.1         # s, moving average on the effort before it is compared
# s after a command the arm took at a time the recording cannot tell (it ran late) during
# which the measurements are not compared: the stand-in's replay of such a command settles
# from 4 mrad to its noise in about 0.5 s
UNTIMED_SETTLE = 0.5
START_WINDOW = 0.04         # s each side of a sequence start for its smoothed start position
LIMIT_SLACK = 0.1           # rad a measured position or a command may lie outside the limits
# A ros2_controllers forward command controller's topic (forward_controllers_base.cpp:74):
# a position interface's stream, e.g. /joint_position_controller/commands.
INTERFACE_TOPIC = '/commands'
TRACKING_SLACK = 0.05       # rad: the largest median distance of a position stream to the arm


class DataError(ValueError):
    """A bag cannot be used for identification; the one-line message names the problem."""


@dataclass(frozen=True)
class States:
    """One bag's arm joint states, checked.

    ``t`` (N,) s from the first; ``q``, ``qd``, ``effort`` (N, 9) rad, rad/s, N*m in
    ``spec.joint_names`` order (fingers held when unrecorded); ``command_topics`` names the
    bag's command topics (none: only torque mode can use the bag).
    """

    bag: Path
    joint_states_topic: str
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    effort: np.ndarray
    command_topics: tuple[str, ...]


@dataclass(frozen=True)
class Recording(States):
    """One bag's joint states and the commands of its busiest command topic.

    ``commands`` are on the joint-state clock. ``lag`` (N,) s: how much later than the
    fastest one each joint state was received; a stalled or catching-up arm (or transport)
    shows here, and there command timing is lost. Receive times are delivery times
    (:func:`~simops_core.receive_clock.delivery_times`): where the bag holds send times a
    recorder short of CPU does not show here. ``untimed`` (K,) s: when the commands that
    arrived while the arm ran late took effect by :class:`ReceiveClock`'s estimate, which
    the arm may have missed by up to the lag (:meth:`ReceiveClock.arm_late`).
    """

    commands: CommandLog
    lag: np.ndarray
    untimed: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def measured_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The arm's recorded position (7,) rad and velocity (7,) rad/s at ``t`` s, interpolated.

        Where the replay starts a trajectory goal, as the arm's controller did.
        """
        return (_interpolated(self.t, self.q[:, :ARM_DOF], t),
                _interpolated(self.t, self.qd[:, :ARM_DOF], t))

    @property
    def command_span(self) -> tuple[float, float]:
        """(start, end) s of the data a replay can reproduce: commanded, plus the final hold."""
        start = max(float(self.commands.t[0]), float(self.t[0]))
        hold = STREAM_HOLD if self.commands.targets is not None else np.inf
        return start, float(min(self.t[-1], self.commands.t[-1] + hold))


def _interpolated(times: np.ndarray, rows: np.ndarray, t: float) -> np.ndarray:
    """``rows`` (N, J) at ``t`` s, linear between ``times`` (N,) s, held beyond the ends.

    ``np.interp`` per column, to the bit (the same slope and sum), without copying each
    column of a long recording on every call.
    """
    i = int(np.searchsorted(times, t, side='right'))
    if i == 0:
        return rows[0].copy()
    if i == len(times):
        return rows[-1].copy()
    if t == times[i - 1]:
        return rows[i - 1].copy()
    slope = (rows[i] - rows[i - 1]) / (times[i] - times[i - 1])
    return slope * (t - times[i - 1]) + rows[i - 1]


@dataclass(frozen=True)
class SequenceData:
    """One replay sequence, starting from its measured state.

    ``t0`` s is the start; the replay runs ``targets.shape[0] - history`` physics steps of
    ``dt`` s. ``targets`` (history + T, 14) are the undelayed controller inputs (position
    targets rad, then desired velocities rad/s; :func:`simops_sysid.replay.physics_targets`),
    the first ``history`` rows commanded before ``t0``; ``gripper`` m the gripper target. ``qpos0``,
    ``qvel0`` (9,) the measured state at ``t0``. ``t`` (K,) s the measurement times inside
    ``(t0, t0 + T dt]``, ``q``, ``qd``, ``effort`` (K, 7) the measured arm joints there.
    """

    name: str
    t0: float
    dt: float
    history: int
    targets: np.ndarray
    gripper: float
    qpos0: np.ndarray
    qvel0: np.ndarray
    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    effort: np.ndarray

    @property
    def steps(self) -> int:
        """Physics steps the replay runs."""
        return self.targets.shape[0] - self.history

    @property
    def duration(self) -> float:
        """S of replayed motion."""
        return self.steps * self.dt


def load_states(bag: str | Path, spec: RobotSpec, topics: dict[str, TopicSpec]) -> States:
    """Read ``bag``'s arm joint states, checked; raise :class:`DataError` naming the problem."""
    return _read_states(bag, spec, topics)[0]


def _read_states(bag: str | Path, spec: RobotSpec, topics: dict[str, TopicSpec]
                 ) -> tuple[States, RawBag, np.ndarray, float]:
    """The checked joint states and what reading their commands needs.

    Also returns the bag read for states and commands, the header stamps (s) and the time
    (s) the states' ``t`` counts from.
    """
    states, commands = _listed_topics(bag, topics)
    raw = read_bag(bag, topics=[*states, *commands])
    store = message_typestore(raw)
    topic = _joint_state_topic(raw, states, spec, store)
    msgs = list(raw.decode(topic, store))   # decoded once: the arrays and the header stamps
    series = joint_series(raw, topic, spec.joint_names, store, msgs)
    stamps = np.array([to_seconds(m.header.stamp) for m in msgs])
    if np.any(np.diff(stamps) <= 0):
        k = int(np.flatnonzero(np.diff(stamps) <= 0)[0])
        raise DataError(f'{bag}: {topic} header stamps are not strictly increasing (message '
                        f'{k + 1} at {stamps[k + 1]:.6f} s follows {stamps[k]:.6f} s)')
    arm = len(spec.arm_joints)
    where = f'{bag}: {topic}'
    if not np.all(np.isfinite(series.position[:, :arm])):
        raise DataError(f'{where} lacks a position for some arm joint in some messages')
    _check_in_limits(where, 'position', series.position[:, :arm], spec)
    _check_finite(where, 'velocity', series.velocity[:, :arm], missing_ok=False)
    _check_finite(where, 'effort', series.effort[:, :arm], missing_ok=True)
    position, velocity = _hold_unrecorded_fingers(series.position, series.velocity, spec)
    origin = float(series.t[0])
    return (States(Path(bag), topic, series.t - origin, position, velocity,
                   np.nan_to_num(series.effort), commands), raw, stamps, origin)


def command_topics(bag: str | Path, topics: dict[str, TopicSpec]) -> tuple[str, ...]:
    """The command topics of ``bag`` with messages, from its listing alone (nothing decoded).

    What :attr:`States.command_topics` holds once the bag is read; raise :class:`DataError`
    for a bag without joint states.
    """
    return _listed_topics(bag, topics)[1]


def _listed_topics(bag: str | Path, topics: dict[str, TopicSpec]
                   ) -> tuple[list[str], tuple[str, ...]]:
    """``bag``'s joint-state topics and command topics that hold messages."""
    try:
        listing = read_bag(bag, topics=())
    except BagError as exc:
        raise DataError(str(exc)) from None
    if not any(t.count for t in listing.topics.values()):
        raise DataError(f'{bag}: the bag is empty (no messages on any topic)')
    states = [n for n, t in listing.topics.items() if t.type == JOINT_STATE and t.count]
    commands = tuple(n for n, t in listing.topics.items() if t.count and (
        t.type == TRAJECTORY or (t.type == FLOAT_ARRAY and (
            n == topics['joint_commands'].name or n.endswith(INTERFACE_TOPIC)))))
    if not states:
        have = ', '.join(f'{n} ({t.type}, {t.count})' for n, t in listing.topics.items())
        raise DataError(f'{bag}: no sensor_msgs/msg/JointState topic with messages; the bag '
                        f'has {have}')
    return states, commands


def load_recording(bag: str | Path, spec: RobotSpec, topics: dict[str, TopicSpec]) -> Recording:
    """Read ``bag``'s joint states and commands; raise :class:`DataError` naming the problem."""
    states, raw, stamps, origin = _read_states(bag, spec, topics)
    if not states.command_topics:
        have = ', '.join(f'{n} ({t.type}, {t.count})' for n, t in raw.topics.items())
        raise DataError(f'{bag}: no command topic ({topics["joint_commands"].name} or a '
                        f'trajectory_msgs/msg/JointTrajectory topic) with messages; the bag '
                        f'has {have}; without commands, fit --mode torque uses the efforts')
    store = message_typestore(raw)
    topic = states.joint_states_topic
    received = delivery_times(raw.topics[topic].log_time, raw.topics[topic].publish_time)
    clock = ReceiveClock(received, stamps if np.all(stamps > 0) else received)
    command_topic = max(states.command_topics, key=lambda n: raw.topics[n].count)
    log, untimed = _commands(raw, command_topic, spec, store, clock, origin, states)
    lag = received - stamps if np.all(stamps > 0) else np.zeros_like(stamps)
    return Recording(**vars(states), commands=log, lag=lag - lag.min(), untimed=untimed)


def _check_positions(states: States, log: CommandLog) -> None:
    """Raise :class:`DataError` unless a forward controller's stream holds arm positions.

    A velocity or effort controller's ``~/commands`` is a Float64MultiArray too; position
    targets stay within tracking error of the measured positions (median
    :data:`TRACKING_SLACK`).
    """
    measured = np.column_stack([np.interp(log.t, states.t, states.q[:, j])
                                for j in range(ARM_DOF)])
    distance = float(np.nanmedian(np.abs(log.targets - measured)))
    if distance > TRACKING_SLACK:
        raise DataError(f'{states.bag}: {log.source} does not hold positions near the arm\'s '
                        f'(median distance {distance:.2f} rad): fit replays position streams; '
                        'a velocity or effort controller\'s commands it cannot')


def _hold_unrecorded_fingers(position: np.ndarray, velocity: np.ndarray, spec: RobotSpec
                             ) -> tuple[np.ndarray, np.ndarray]:
    """Positions and velocities (N, 9) with the finger columns made finite.

    A real FR3's ``/franka/joint_states`` has no finger joints (franka_gripper publishes
    them on a topic of its own), and the fit does not identify the gripper: a finger
    without a recorded value holds its recorded mean, or half the spec's home width when
    it was never recorded, at rest.
    """
    arm = len(spec.arm_joints)
    position, velocity = position.copy(), velocity.copy()
    for column in range(arm, position.shape[1]):
        values = position[:, column]
        finite = np.isfinite(values)
        rest = float(values[finite].mean()) if finite.any() else spec.gripper.home_width / 2
        values[~finite] = rest
        velocity[~np.isfinite(velocity[:, column]), column] = 0.0
    return position, velocity


def _check_finite(where: str, field: str, values: np.ndarray, missing_ok: bool) -> None:
    """Raise :class:`DataError` for a NaN or Inf ``field`` value (M, 7).

    A field no message carries (all NaN) is accepted when ``missing_ok`` (a JointState
    without efforts); otherwise every value must be finite.
    """
    bad = ~np.isfinite(values)
    if not bad.any() or (missing_ok and np.all(np.isnan(values))):
        return
    rows = np.flatnonzero(bad.any(axis=1))
    raise DataError(f'{where}: {rows.size} of {len(values)} messages have a NaN, Inf or '
                    f'missing {field} (first: message {rows[0]}); record again or drop them')


def _check_in_limits(where: str, field: str, values: np.ndarray, spec: RobotSpec) -> None:
    """Raise :class:`DataError` for an arm value (M, 7) rad beyond the limits + slack.

    The check is the sim node's (:func:`simops_sim.joint_commands.limit_violation`), with
    :data:`LIMIT_SLACK` of room for encoder noise and servo overshoot; NaN is not judged here.
    """
    bound = (spec.position_lower - LIMIT_SLACK, spec.position_upper + LIMIT_SLACK)
    with np.errstate(invalid='ignore'):
        problem = limit_violation(np.atleast_2d(values), bound, spec.arm_joints,
                                  np.arange(len(spec.arm_joints)), field)
    if problem is not None:
        raise DataError(f'{where}: {problem}, outside its limits by more than {LIMIT_SLACK:g} '
                        f'rad; this is not a recording of {spec.name}, or it is corrupt')


def _joint_state_topic(raw: RawBag, candidates: list[str], spec: RobotSpec, store: object
                       ) -> str:
    """The JointState topic that names every arm joint (the most messages wins)."""
    found: dict[str, tuple[str, ...]] = {}
    best = None
    for topic in sorted(candidates, key=lambda n: -raw.topics[n].count):
        first = next(raw.decode(topic, store))
        names = tuple(first.name)
        found[topic] = names
        if set(spec.arm_joints) <= set(names):
            best = topic
            break
    if best is None:
        detail = '; '.join(f'{t} has {list(n)}' for t, n in found.items())
        raise DataError(f'{raw.path}: joint names do not match robot {spec.name} (expected '
                        f'{", ".join(spec.arm_joints)}): {detail}')
    return best


def _commands(raw: RawBag, topic: str, spec: RobotSpec, store: object, clock: ReceiveClock,
              origin: float, states: States) -> tuple[CommandLog, np.ndarray]:
    """Commands of ``topic`` on the joint-state clock, relative to ``origin`` s.

    Also returns when those that arrived while the arm ran late took effect (K,) s.
    """
    arm = spec.arm_joints
    if raw.topics[topic].type == FLOAT_ARRAY:
        series = command_series(raw, topic, arm, store)
        received = np.sort(delivery_times(raw.topics[topic].log_time,
                                          raw.topics[topic].publish_time))
        effect, late = clock.estimate(received)
        log = CommandLog(topic, effect - origin, targets=series.position, limits=spec)
        if topic.endswith(INTERFACE_TOPIC):
            _check_positions(states, log)
        _check_in_limits(f'{raw.path}: {topic}', 'command', series.position, spec)
        return log, log.t[late]
    goals: list[TrajectoryGoal] = []
    arrival = []
    delivered = delivery_times(raw.topics[topic].log_time, raw.topics[topic].publish_time)
    for msg, received in zip(raw.decode(topic, store), delivered, strict=True):
        try:
            goal = goal_from_message(msg, arm)
        except TrajectoryError as exc:
            raise DataError(f'{raw.path}: {topic} message {len(goals)}: {exc}') from None
        named = np.full_like(goal.positions, np.nan)
        named[:, goal.joints] = goal.positions[:, goal.joints]
        _check_in_limits(f'{raw.path}: {topic} message {len(goals)}', 'command', named, spec)
        if goal.start is not None:
            goal = replace(goal, start=goal.start - origin)
        goals.append(goal)
        arrival.append(received)
    order = np.argsort(arrival, kind='stable')
    effect, late = clock.estimate(np.asarray(arrival)[order])
    effect = effect - origin
    starts = np.array([-np.inf if g.start is None else g.start for g in goals])[order]
    effect = np.maximum(effect, starts)
    return (CommandLog(topic, effect, goals=tuple(goals[i] for i in order), limits=spec),
            effect[late])


def average_effort(effort: np.ndarray, samples: int) -> np.ndarray:
    """Centred moving average over ``samples`` rows of ``effort`` (N, J) N*m.

    Commands reach the arm with a transport jitter of a millisecond or so; the servo effort
    ``kp (u - q)`` jumps with it, while the motion does not. Left in, that noise in the
    replayed input pulls ``kp`` down (errors in variables); averaged over a few command
    periods, in the measurement and the replay alike, it nearly cancels.
    """
    return uniform_filter1d(effort, max(1, samples), axis=0, mode='nearest')


def start_position(rec: Recording, index: int) -> np.ndarray:
    """Position (9,) rad at sample ``index``, a cubic fitted over :data:`START_WINDOW` around it.

    A replay starts from the measured state, so the measurement noise of that one sample
    (1e-4 rad on the stand-in, encoder noise on an arm) would launch the servo into a
    transient that lasts a servo time constant (about kv / kp, 0.1 s) and pulls on the
    fitted gains; the local fit averages it down.
    """
    window = np.flatnonzero(np.abs(rec.t - rec.t[index]) <= START_WINDOW)
    if window.size < 8:
        return rec.q[index].copy()
    dt = rec.t[window] - rec.t[index]
    basis = np.vander(dt, 4)
    coeffs, *_ = np.linalg.lstsq(basis, rec.q[window], rcond=None)
    return coeffs[-1]


class Split(NamedTuple):
    """A recording cut into sequences.

    ``sequences`` kept; ``lagging``: how many were left out because a joint state lagged;
    ``untimed``: seconds of measurements not compared after untimed commands.
    """

    sequences: list[SequenceData]
    lagging: int
    untimed: float


def split_sequences(rec: Recording, dt: float, length: float, rate: float,
                    history: int, joints: Sequence[int]) -> Split:
    """Cut ``rec``'s commanded span into sequences of about ``length`` s.

    Each sequence starts on a joint-state sample with its measured state; measurements are
    decimated to about ``rate`` Hz; ``joints`` are the arm-joint indices that are fitted.
    Sequences in which a joint state lagged more than :data:`MAX_LAG` are left out. The
    measurements from :data:`EFFORT_WINDOW` / 2 before a command the arm took at a time the
    recording cannot tell (``rec.untimed``) to :data:`MAX_LAG` + :data:`UNTIMED_SETTLE`
    after it are not compared: the replay takes it at the estimate, the arm up to the lag
    later, from another state. Raises :class:`DataError` when the span is shorter than
    :data:`MIN_SEQUENCE`, the joint states have gaps, or every sequence lagged.

    The first sequence starts once every target the replay feeds the arm, ``history`` steps
    back included, comes from a recorded command: one command after the first recorded one
    (whose segment starts from a target the bag may not hold: a recorder can discover a new
    publisher later than the arm does, and miss its first commands), plus the history; and
    no earlier than the last command that holds before the first that moves
    (:meth:`CommandLog.first_move`), where the arm's controller had every command and the
    arm had settled on them: when it took the first of them, the bag does not say.
    """
    start, end = rec.command_span
    first = min(max(1, rec.commands.first_move() - 1), len(rec.commands) - 1)
    start = max(start, float(rec.commands.t[first]) + history * dt)
    if end - start < MIN_SEQUENCE:
        raise DataError(f'{rec.bag}: too little data: {max(end - start, 0.0):.2f} s of commanded '
                        f'motion, need at least {MIN_SEQUENCE:g} s')
    inside = (rec.t >= start) & (rec.t <= end)
    gaps = np.diff(rec.t[inside])
    if gaps.size and gaps.max() > MAX_GAP:
        at = float(rec.t[inside][int(np.argmax(gaps))])
        raise DataError(f'{rec.bag}: {rec.joint_states_topic} has a {gaps.max() * 1e3:.0f} ms '
                        f'gap at {at:.3f} s (more than {MAX_GAP * 1e3:.0f} ms); record again')
    period = float(np.median(np.diff(rec.t)))
    every = max(1, round(1.0 / (rate * period)))
    count = max(1, round((end - start) / length))
    edges = np.linspace(start, end, count + 1)
    index = np.searchsorted(rec.t, edges[0])
    t0 = float(rec.t[index])
    total = int((end - t0) / dt)
    arm = np.asarray(joints, dtype=int)
    # Replay the targets from the first recorded command on, from the arm's measured position
    # there: each later segment starts from the previous one's end, so by t0 the targets no
    # longer depend on that start (which carries tracking error and encoder bias).
    lead = max(0, int(np.ceil((t0 - history * dt - float(rec.commands.t[0])) / dt)))
    origin = t0 - (history + lead) * dt
    initial = rec.q[min(int(np.searchsorted(rec.t, origin)), len(rec.t) - 1), :7]
    targets = physics_targets(rec.commands, origin, total + history + lead, dt,
                              initial, rec.measured_at)[lead:]
    width = float(gripper_width(rec.q[index, ARM_DOF:]))
    effort = average_effort(rec.effort, round(EFFORT_WINDOW / period))
    untimed = np.zeros(rec.t.size, dtype=bool)
    for at in rec.untimed:
        untimed |= (rec.t >= at - EFFORT_WINDOW / 2) & (rec.t <= at + MAX_LAG + UNTIMED_SETTLE)
    sequences = []
    lagging, untimed_s = 0, 0.0
    for i in range(count):
        first = int(np.searchsorted(rec.t, edges[i]))
        s0 = float(rec.t[first])
        k0 = round((s0 - t0) / dt)
        steps = int((edges[i + 1] - s0) / dt)
        if steps * dt < MIN_SEQUENCE / 2:
            continue
        window = (rec.t >= s0 - history * dt) & (rec.t <= s0 + steps * dt)
        if rec.lag[window].max() > MAX_LAG:
            lagging += 1
            continue
        margin = EFFORT_WINDOW / 2   # where the averaged effort sees the sequence's ends
        inside = (rec.t > s0 + margin) & (rec.t <= s0 + steps * dt - margin)
        timed = inside & ~untimed
        untimed_s += float(np.count_nonzero(inside & untimed)) * period
        sel = np.flatnonzero(timed)[::every]
        if sel.size == 0:
            continue
        sequences.append(SequenceData(
            name=f'{rec.bag.name}[{i}]', t0=s0, dt=dt, history=history,
            targets=targets[k0:k0 + history + steps], gripper=width,
            qpos0=start_position(rec, first), qvel0=rec.qd[first].copy(), t=rec.t[sel],
            q=rec.q[sel][:, arm], qd=rec.qd[sel][:, arm], effort=effort[sel][:, arm]))
    if not sequences:
        raise DataError(f'{rec.bag}: every sequence has joint states that arrived more than '
                        f'{MAX_LAG * 1e3:g} ms late (worst {rec.lag.max() * 1e3:.0f} ms): the '
                        'arm or the recorder was starved, so command timing is unknown; '
                        'record again on a less loaded machine')
    return Split(sequences, lagging, untimed_s)


def detect_robot(bag: str | Path, topics: dict[str, TopicSpec]) -> RobotSpec:
    """The robot spec (of ``config/robot``) whose arm joints ``bag``'s joint states name.

    Raises :class:`DataError` when no spec matches (pass ``--robot``).
    """
    try:
        listing = read_bag(bag, topics=())
        states = [n for n, t in listing.topics.items() if t.type == JOINT_STATE and t.count]
        raw = read_bag(bag, topics=states)
    except BagError as exc:
        raise DataError(str(exc)) from None
    store = message_typestore(raw)
    names = {name for topic in states for name in next(raw.decode(topic, store)).name}
    for file in sorted(resolve_resource('config/robot').glob('*.yaml')):
        spec = load_robot_spec(file)
        if set(spec.arm_joints) <= names:
            return spec
    raise DataError(f'{bag}: its joint states name {sorted(names)}, the arm joints of no robot '
                    'spec in config/robot; pass --robot with a spec for this arm')
