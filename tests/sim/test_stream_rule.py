"""The stream rule is written once: ``fit``'s replay drives the model as the node's stepper.

The same streamed targets, arriving at the same instants, go once through the simulator's
realtime stepper (its lane's inbox, :meth:`Stepper.advance` at each due step) and once
through :func:`simops_sysid.replay.physics_targets`; the controller inputs of every physics
step must be equal bit for bit, for streams at 1 kHz (a real Panda's), 100 Hz and 20 Hz
(SimOps' policy), with jittered arrivals and a stall. So must one-point JointTrajectory
goals (the policy's real-profile commands), which both start from the arm's measured state,
the replay's read from the recording (here: the node's own).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import pytest
from sim_helpers import SCENE_XML

from simops_core.robot_spec import load_robot_spec
from simops_sim.joint_commands import ArmCommand
from simops_sim.reflexes import Reflexes
from simops_sim.stepper import Stepper, Timing
from simops_sim.stream_rule import PACE_WINDOW, StreamPacer
from simops_sim.trajectory_plan import TrajectoryGoal, TrajectoryPlan
from simops_sim.world import World
from simops_sysid.replay import CommandLog, application_steps, physics_targets

PERIOD, TIMEOUT = 0.05, 0.5   # s: the simulator's defaults


def stream(rate: float, seconds: float, seed: int, home: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    """Arrival times (M,) s and targets (M, 7) rad of a jittered stream at ``rate`` Hz.

    Arrivals jitter by up to 20 % of the period, and one stall of 6 periods (targets the
    node never got) sits in the middle. The targets follow a 0.5 Hz sine of 0.2 rad.
    """
    rng = np.random.default_rng(seed)
    period = 1.0 / rate
    nominal = 0.01 + period * np.arange(int(seconds * rate))
    t = nominal + rng.uniform(-0.2, 0.2, nominal.size) * period
    keep = np.ones(t.size, bool)
    keep[t.size // 2: t.size // 2 + 6] = False
    t = t[keep]
    phase = 2 * np.pi * 0.5 * t
    targets = home + 0.2 * np.sin(phase[:, None] + np.arange(7)[None, :])
    return t, targets


def node_inputs(arrivals: np.ndarray, commands: Sequence[ArmCommand | TrajectoryGoal],
                steps: int, late: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The controller inputs (steps, 14) of the node's stepper fed the same arrivals, and the
    arm's measured position and velocity (steps, 14) before each step.

    ``late`` (steps,) s: how late each step runs on its schedule (None: every step on time).
    """
    spec = load_robot_spec('fr3')
    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec}, reflexes=False)
    stepper = Stepper(world, Timing('realtime', 1.0, PERIOD, 0.5, TIMEOUT, 1000.0, 0.0, 0.0,
                                    100.0), 'home', None, 0, None, lambda kind, text: None)
    lane, dt = stepper.arm, world.timestep
    for arrival, command in zip(arrivals, commands, strict=True):
        lane.queue(command, float(arrival))
    out, measured = np.empty((steps, 14)), np.empty((steps, 14))
    for k in range(steps):
        measured[k] = np.concatenate(lane.physics.arm_measured())
        # the step starting at k dt is due at (k + 1) dt
        stepper.advance(0.0 if late is None else float(late[k]), (k + 1) * dt)
        out[k] = np.concatenate(lane.physics.arm_desired())
    return out, measured


@pytest.mark.parametrize('rate', [1000.0, 100.0, 20.0])
def test_the_replay_drives_the_model_as_the_node_does(rate: float) -> None:
    spec = load_robot_spec('fr3')
    arrivals, targets = stream(rate, 1.0, int(rate), spec.home)
    steps = 1200
    node, _ = node_inputs(arrivals, [ArmCommand(t.copy(), None) for t in targets], steps)
    log = CommandLog('/joint_commands', arrivals, targets=targets, period=PERIOD,
                     limits=spec, timeout=TIMEOUT)
    replay = physics_targets(log, 0.0, steps, 0.001, spec.home)
    np.testing.assert_array_equal(replay, node)
    # the stream ends held, and at 1 kHz the arm follows it at 1 kHz: the last target is
    # the controller's within two steps of its arrival, not a 50 ms control period later
    np.testing.assert_array_equal(node[-1, :7], targets[-1])
    if rate == 1000.0:
        np.testing.assert_array_equal(node[int(np.ceil(arrivals[-1] / 0.001)) + 1, :7],
                                      targets[-1])

@pytest.mark.parametrize('with_velocities', [False, True])
def test_trajectory_goals_start_from_the_measured_state_in_the_node_and_the_replay(
        with_velocities: bool) -> None:
    """One-point trajectories at 20 Hz, one period ahead (``point_commands``), or with the
    point's velocity too (a cubic first segment from the measured position and velocity)."""
    spec = load_robot_spec('fr3')
    arrivals, targets = stream(20.0, 1.0, 7, spec.home)
    velocities = 0.2 * np.pi * np.cos(2 * np.pi * 0.5 * arrivals[:, None] + np.arange(7))
    goals = [TrajectoryGoal(np.array([PERIOD]), target[None, :].copy(),
                            velocity[None, :].copy() if with_velocities else None,
                            np.arange(7), None)
             for target, velocity in zip(targets, velocities, strict=True)]
    steps = 1200
    node, measured = node_inputs(arrivals, goals, steps)
    log = CommandLog('/fr3_arm_controller/joint_trajectory', arrivals, goals=tuple(goals))

    def recorded(t: float) -> tuple[np.ndarray, np.ndarray]:
        row = measured[round(t / 0.001)]
        return row[:7], row[7:]

    replay = physics_targets(log, 0.0, steps, 0.001, spec.home, recorded)
    np.testing.assert_array_equal(replay, node)
    # each goal's first target is a step from the measured position, not from the target
    first = int(application_steps(arrivals[3:4], 0.0, 0.001)[0])   # applies the fourth goal
    lagging = measured[first, :7]
    np.testing.assert_array_equal(node[first, :7], lagging)   # the segment leaves from there
    if not with_velocities:   # linearly: 1/50 of the way per 1 ms step of the 50 ms segment
        np.testing.assert_allclose(node[first + 1, :7], lagging + (targets[3] - lagging) / 50,
                                   atol=1e-12)
    else:   # and moving as the arm moved
        np.testing.assert_array_equal(node[first, 7:], measured[first, 7:])
    assert np.abs(lagging - node[first - 1, :7]).max() > 1e-4   # the arm lags its target


def test_a_stream_is_followed_over_its_own_period() -> None:
    """The span: ``period`` until the stream has shown PACE_WINDOW gaps, then their mean,
    or a stall's own gap; a gap beyond MAX_CATCH_UP starts anew."""
    pacer = StreamPacer(None)
    arrivals = [0.001 * k for k in range(PACE_WINDOW + 2)] + [0.2]
    spans = []
    for arrival in arrivals:
        spans.append(pacer.span(arrival, PERIOD, TIMEOUT))
        pacer.followed(arrival, np.zeros(7))
    assert spans[:PACE_WINDOW + 1] == [PERIOD] * (PACE_WINDOW + 1)
    assert spans[PACE_WINDOW + 1] == pytest.approx(0.001)   # a 1 kHz stream at 1 kHz
    assert spans[-1] == pytest.approx(0.2 - 0.001 * (PACE_WINDOW + 1))   # a stall: its gap
    assert pacer.span(1.5, PERIOD, TIMEOUT) == PERIOD   # a gap beyond MAX_CATCH_UP: anew
    assert StreamPacer(None, paced=False).span(0.0, PERIOD, TIMEOUT) == PERIOD


def test_a_stream_received_in_bunches_keeps_its_period() -> None:
    """A 20 Hz stream whose receiver stalls: its targets arrive in pairs 1 ms apart, 99 ms
    between pairs (half of the gaps are 1 ms). Each is reached over about the stream's
    50 ms, never over 1 ms (which would ask for 50 times the speed, a protective stop)."""
    pacer = StreamPacer(None)
    arrivals = np.cumsum([0.0] + [0.001, 0.099] * 8)
    spans = []
    for arrival in arrivals:
        spans.append(pacer.span(float(arrival), PERIOD, TIMEOUT))
        pacer.followed(float(arrival), np.zeros(7))
    assert min(spans) >= 0.049, spans
    assert max(spans) <= 0.1, spans


def test_a_simulator_catching_up_follows_a_sim_time_stream_as_one_on_time() -> None:
    """A node ticking on sim time (20 Hz) drives a simulator that stalled 0.3 s and catches
    up at 10 times the wall's pace: each target reaches it a few ms of wall time after the
    previous one, when the simulator's clock reaches the node's next tick. The simulator
    follows the stream as it does on time (its controller inputs equal to rounding),
    each target over the stream's 50 ms of sim time; paced on the wall, the targets were
    reached over 5 ms, at ten times the stream's speed (a protective stop on a 0.4 rad/s
    stream, as the policy's Ctrl-C test met in CI)."""
    spec = load_robot_spec('fr3')
    dt, steps = 0.001, 1500
    sent = 0.0101 + PERIOD * np.arange(24)   # sim time (s) of each tick's target
    targets = spec.home + 0.02 * np.arange(1, sent.size + 1)[:, None]   # 0.4 rad/s
    # the schedule: on time, then 0.3 s late at step 400, caught up at 10x the wall's pace
    late = np.zeros(steps)
    behind = 0.3 - 0.9 * dt * np.arange(steps - 400)
    late[400:] = np.maximum(behind, 0.0)
    wall = dt * (np.arange(steps) + 1) + late   # when each step runs (time.monotonic())
    # a target arrives when the simulator's clock has reached the tick it was sent at
    reached = np.ceil(sent / dt - 1).astype(int)
    arrivals = wall[reached]
    assert np.diff(arrivals).min() < 0.006   # in the catch-up, 5 ms of wall apart
    commands = [ArmCommand(t.copy(), None) for t in targets]
    on_time, _ = node_inputs(dt * (reached + 1), commands, steps)
    caught_up, _ = node_inputs(arrivals, commands, steps, late)
    np.testing.assert_allclose(caught_up, on_time, rtol=0.0, atol=1e-12)   # to rounding
    assert np.abs(np.diff(on_time[:, :7], axis=0)).max() / dt < 0.5   # rad/s


def test_a_fast_jittered_stream_is_followed_without_growing_lag() -> None:
    """A 1 kHz stream whose gaps alternate 1.0 and 1.1 ms (Gaz et al.'s Panda recording), one
    joint moving at 85 % of its velocity limit: some physics steps take two targets, which the
    plan must catch up on. Once it has caught up on its first targets (reached over the control
    period, before the stream showed its pace), the arm target stays within two of the
    stream's steps of the stream; before the catch-up ratio it fell 74 mrad behind."""
    spec = load_robot_spec('fr3')
    gaps = np.where(np.arange(1000) % 3 == 2, 0.0011, 0.001)
    arrivals = 0.01 + np.cumsum(gaps)
    speed = 0.85 * spec.velocity[0]
    targets = np.repeat(spec.home[None, :7], arrivals.size, axis=0)
    targets[:, 0] += speed * (arrivals - arrivals[0])
    log = CommandLog('stream', arrivals, targets=targets, period=PERIOD, limits=spec,
                     timeout=TIMEOUT)
    dt = 0.001
    rows = physics_targets(log, 0.0, int(arrivals[-1] / dt), dt, spec.home[:7])
    now = dt * np.arange(rows.shape[0])
    stream = np.interp(now, arrivals, targets[:, 0])
    settled = now > arrivals[0] + 0.5   # the first targets' ramp (50 ms spans) caught up
    assert np.abs(rows[settled, 0] - stream[settled]).max() < 2 * speed * 0.0011


def test_a_catch_up_towards_a_position_limit_keeps_to_the_limit_there() -> None:
    """A 20 Hz stream whose arm target lags (a stall) near fr3_joint5's upper limit: the plan
    catches up no faster than the arm allows at the target, so the simulator does not stop
    its own arm. The bound is Franka's position-based limit, computed here from the spec's
    numbers (robot_specifications.rst, "Position-Based Velocity Limits"); a ceiling of half
    the constant 5.26 rad/s (2.63 rad/s) was beyond the 2.45 rad/s allowed at 2.607 rad."""
    spec = load_robot_spec('fr3')
    joint = 4
    pacer = StreamPacer(spec)
    previous = spec.home[:7].copy()
    previous[joint] = 2.55
    pacer.followed(0.0, previous)   # the stream's last target, followed from a stall
    current, target = previous.copy(), previous.copy()
    current[joint], target[joint] = 2.40, 2.607   # the arm target lags the stream
    goal, speed = pacer.goal(PERIOD, target, current, PERIOD, TIMEOUT)
    plan = TrajectoryPlan(goal, 0.0, current, 0.0)
    ends, velocities = plan.segments()
    q_max = spec.position_upper[joint]
    allowed = min(spec.velocity[joint],
                  -spec.velocity_offset[joint]
                  + np.sqrt(2.0 * spec.deceleration[joint] * (q_max - 2.607)))
    assert allowed == pytest.approx(2.45, abs=0.01)
    assert speed[joint] == pytest.approx(0.057 / PERIOD)   # the stream asks for 1.14 rad/s
    assert velocities[0, joint] <= allowed + 1e-12
    assert velocities[0, joint] > 0.9 * allowed   # it still catches up, at the limit
    np.testing.assert_array_equal(ends[-1], target)
    assert Reflexes(spec).command(speed, 0.0, (ends, velocities)) is None


def test_a_stream_asking_for_more_than_the_limit_is_followed_at_its_own_speed() -> None:
    """The ceiling never slows a stream below what it asks for: a stream beyond the arm's
    position-based limit is followed as sent, and the arm stops on it, as a real one does."""
    spec = load_robot_spec('fr3')
    joint = 4
    pacer = StreamPacer(spec)
    current = spec.home[:7].copy()
    current[joint] = 2.45
    target = current.copy()
    target[joint] = 2.607   # 3.14 rad/s over the period, beyond 2.45 rad/s there
    goal, speed = pacer.goal(0.0, target, current, PERIOD, TIMEOUT)
    plan = TrajectoryPlan(goal, 0.0, current, 0.0)
    ends, velocities = plan.segments()
    assert velocities[0, joint] == pytest.approx(speed[joint])
    stop = Reflexes(spec).command(speed, 0.0, (ends, velocities))
    assert stop is not None and stop.error == 'joint_velocity_violation'
