"""Protective stops: the checks against adversarial inputs, and the arm's behaviour in physics.

A command beyond the velocity limit, a measured velocity or position beyond the limits and a
contact torque beyond the collision threshold stop the arm; it holds, refuses commands until
the stop is cleared, and a reset clears it too.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from limit_helpers import allowed_velocity
from sim_helpers import SCENE_XML

from simops_core.robot_spec import load_robot_spec
from simops_sim.physics import Physics
from simops_sim.reflexes import SPEED_TOLERANCE, Reflexes
from simops_sim.trajectory_plan import TrajectoryGoal, TrajectoryPlan, point_goal

SPEC = load_robot_spec('fr3')
REFLEXES = Reflexes(SPEC)
FRACTION = st.floats(0.0, 3.0, allow_nan=False)


def vector(draw: st.DrawFn, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    return np.array([draw(st.floats(lo, hi)) for lo, hi in zip(low, high, strict=True)])


@given(st.lists(FRACTION, min_size=7, max_size=7))
def test_a_command_stops_the_arm_exactly_when_a_joint_would_exceed_its_limit(
        fractions: list[float]) -> None:
    peak = np.array(fractions) * SPEC.velocity
    stop = REFLEXES.command(peak, 1.5)
    over = np.array(fractions) > 1.0 + SPEED_TOLERANCE
    assert (stop is not None) == bool(over.any())
    if stop is not None:
        excess = peak - SPEC.velocity * (1.0 + SPEED_TOLERANCE)
        assert stop.error == 'joint_velocity_violation' and stop.time == 1.5
        assert stop.joint == SPEC.arm_joints[int(np.argmax(excess))]
        assert stop.joint in stop.message() and 'rad/s' in stop.message()


@st.composite
def inside(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A measured state within every limit, the position-based velocity limits included
    (computed from the YAML's raw numbers with Franka's formula: tests/core/test_safety.py)."""
    position = vector(draw, SPEC.position_lower, SPEC.position_upper)
    low, high = allowed_velocity(position)
    return (position, vector(draw, np.array(low), np.array(high)),
            vector(draw, -SPEC.collision_torque, SPEC.collision_torque))


@given(inside())
def test_a_state_within_the_limits_never_stops_the_arm(
        state: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    assert REFLEXES.measure(*state, 0.0) is None


@given(inside(), st.integers(0, 6), st.sampled_from(['velocity', 'position', 'contact']),
       st.floats(1e-6, 1e9), st.sampled_from([-1.0, 1.0]))
def test_any_state_beyond_a_limit_stops_the_arm_and_names_the_joint(
        state: tuple[np.ndarray, np.ndarray, np.ndarray], joint: int, what: str,
        beyond: float, sign: float) -> None:
    position, velocity, contact = (x.copy() for x in state)
    if what == 'velocity':
        velocity[joint] = sign * SPEC.velocity[joint] * (1.0 + beyond)
        error = 'joint_velocity_violation'
    elif what == 'position':
        edge = SPEC.position_upper if sign > 0 else SPEC.position_lower
        position[joint] = edge[joint] + sign * (2e-3 + beyond)
        error = 'joint_position_limits_violation'
    else:
        contact[joint] = sign * SPEC.collision_torque[joint] * (1.0 + beyond)
        error = 'joint_reflex'
    stop = REFLEXES.measure(position, velocity, contact, 2.0)
    assert stop is not None and stop.error == error
    assert stop.joint == SPEC.arm_joints[joint]


@given(inside(), st.integers(0, 20),
       st.sampled_from([0.5, 0.999, 1.0, 1.0005, 1.001, 2.0, -1.001, math.nan, math.inf]))
def test_the_fast_check_agrees_with_the_full_one(
        state: tuple[np.ndarray, np.ndarray, np.ndarray], slot: int, scale: float) -> None:
    """``within`` (the per-step fast path) passes exactly the states ``measure`` passes."""
    measured = np.stack(state)
    bound = np.stack((SPEC.position_upper, SPEC.velocity, SPEC.collision_torque))
    measured.flat[slot] = bound.flat[slot] * scale   # near a bound, inside or out, or NaN
    assert REFLEXES.within(measured) == (REFLEXES.measure(*measured, 0.0) is None)


@given(inside(), st.integers(0, 6), st.floats(0.9, 1.1), st.sampled_from([-1.0, 1.0]))
def test_the_per_step_check_passes_no_velocity_beyond_the_position_based_limit(
        state: tuple[np.ndarray, np.ndarray, np.ndarray], joint: int, scale: float,
        sign: float) -> None:
    """At any position, a velocity about at the position-based limit there (limits computed
    here, independently): the per-step check (and its stopping-distance shortcut) passes it
    exactly when the full check does, and only when the limits allow it."""
    position, velocity, contact = (x.copy() for x in state)
    low, high = allowed_velocity(position)
    velocity = np.clip(velocity, low, high)
    velocity[joint] = scale * (high[joint] if sign > 0 else low[joint])
    within = REFLEXES.within(np.stack((position, velocity, contact)))
    assert within == (REFLEXES.measure(position, velocity, contact, 0.0) is None)
    if within:
        slack = 1.0 + SPEED_TOLERANCE
        assert np.all(velocity <= np.array(high) * slack)
        assert np.all(velocity >= np.array(low) * slack)


@given(inside(), st.integers(0, 6), st.floats(0.02, 0.99), st.sampled_from([-1.0, 1.0]))
def test_towards_a_limit_the_velocity_limit_is_the_position_based_one(
        state: tuple[np.ndarray, np.ndarray, np.ndarray], joint: int, fraction: float,
        sign: float) -> None:
    """Near a position limit a measured velocity towards it under the constant limit, but
    beyond Franka's position-based limit there, stops the arm; away from it, it does not."""
    position, velocity, contact = (x.copy() for x in state)
    edge = SPEC.position_upper if sign > 0 else SPEC.position_lower
    position[joint] = edge[joint] - sign * fraction * 0.1     # within 0.1 rad of the limit
    low, high = allowed_velocity(position)
    velocity = np.clip(velocity, low, high)
    allowed = high[joint] if sign > 0 else -low[joint]
    velocity[joint] = sign * (allowed * (1 + 2 * SPEED_TOLERANCE) + 0.01)  # beyond it
    assert abs(velocity[joint]) < SPEC.velocity[joint]        # the constant limit allows it
    stop = REFLEXES.measure(position, velocity, contact, 3.0)
    assert stop is not None and stop.error == 'joint_velocity_violation'
    assert stop.joint == SPEC.arm_joints[joint] and 'position-based' in stop.message()
    assert not REFLEXES.within(np.stack((position, velocity, contact)))
    velocity[joint] = -velocity[joint]                          # away from the limit
    assert REFLEXES.measure(position, velocity, contact, 3.0) is None


def test_a_command_faster_than_the_position_based_limit_at_its_end_stops_the_arm() -> None:
    """A segment ending 0.05 rad short of fr3_joint7's upper limit at 1 rad/s: under the
    5.26 rad/s constant limit, beyond the position-based 0.85 rad/s there."""
    end = SPEC.home.copy()
    end[6] = SPEC.position_upper[6] - 0.05
    velocity = np.zeros(7)
    velocity[6] = 1.0
    assert allowed_velocity(end)[1][6] < 0.9
    stop = REFLEXES.command(np.abs(velocity), 4.0, (end[None, :], velocity[None, :]))
    assert stop is not None and stop.joint == 'fr3_joint7' and 'position-based' in stop.text
    assert REFLEXES.command(np.abs(velocity), 4.0, (end[None, :], -velocity[None, :])) is None


@given(st.lists(st.tuples(inside(), st.integers(0, 6), st.floats(0.9, 1.1),
                          st.sampled_from([-1.0, 1.0])), min_size=1, max_size=3))
def test_a_command_passes_exactly_the_segments_the_position_based_limits_allow(
        drawn: list[tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int, float, float]]
        ) -> None:
    """Segments ending anywhere, one joint of each about at the position-based limit at its
    end (limits computed here, independently): the command check (and its stopping-distance
    shortcut) refuses them exactly when one is beyond the limits, with the rounding slack."""
    ends, velocities = [], []
    for (position, velocity, _), joint, scale, sign in drawn:
        low, high = allowed_velocity(position)
        velocity = np.clip(velocity, low, high)
        velocity[joint] = scale * (high[joint] if sign > 0 else low[joint])
        ends.append(position)
        velocities.append(velocity)
    end, moving = np.array(ends), np.array(velocities)
    slack = 1.0 + SPEED_TOLERANCE
    bounds = [allowed_velocity(row) for row in end]
    allowed = all(np.all(v <= np.array(high) * slack) and np.all(v >= np.array(low) * slack)
                  for v, (low, high) in zip(moving, bounds, strict=True))
    stop = REFLEXES.command(np.zeros(7), 5.0, (end, moving))
    assert (stop is None) == allowed
    if stop is not None:
        assert stop.error == 'joint_velocity_violation' and 'position-based' in stop.text


def test_set_full_collision_behavior_moves_the_collision_threshold() -> None:
    """franka's set_full_collision_behavior: its upper_torque_thresholds_nominal is the
    contact torque that trips joint_reflex from then on, in both checks."""
    reflexes = Reflexes(SPEC)
    contact = np.zeros(7)
    contact[2] = 20.0                                   # under the default 32 N*m
    state = (SPEC.home, np.zeros(7), contact)
    assert reflexes.measure(*state, 0.0) is None
    reflexes.set_collision_torque(np.full(7, 10.0))
    stop = reflexes.measure(*state, 0.0)
    assert stop is not None and stop.error == 'joint_reflex' and stop.joint == 'fr3_joint3'
    assert not reflexes.within(np.stack(state))


def test_a_position_within_the_joint_limit_softness_does_not_stop_the_arm() -> None:
    position = SPEC.home.copy()
    position[3] = SPEC.position_upper[3] + 0.5e-3
    assert REFLEXES.measure(position, np.zeros(7), np.zeros(7), 0.0) is None


def physics() -> Physics:
    arm = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC, reflexes=True)
    arm.reset_keyframe('home')
    return arm


def arm_position(arm: Physics) -> np.ndarray:
    return arm.state().position[:7]


def move(arm: Physics, target: np.ndarray, duration: float) -> object:
    return arm.follow(TrajectoryPlan(point_goal(target, duration), arm.time, arm.arm_target))


def test_a_step_beyond_the_velocity_limit_stops_and_holds_until_recovery() -> None:
    arm = physics()
    step = SPEC.home.copy()
    step[4] += 0.5                   # 10 rad/s over 50 ms; the limit is 5.26 rad/s
    stop = move(arm, step, 0.05)
    assert stop is not None and stop.error == 'joint_velocity_violation'
    assert stop.joint == 'fr3_joint5' and arm.stop is stop
    arm.step(500)
    assert np.abs(arm_position(arm) - SPEC.home).max() < 1e-3      # held
    slow = SPEC.home + 0.05
    assert move(arm, slow, 1.0) is stop                             # refused while stopped
    arm.step(1500)
    assert np.abs(arm_position(arm) - SPEC.home).max() < 1e-3
    assert arm.clear_stop() is stop and arm.stop is None
    assert move(arm, slow, 1.0) is None                             # moves after recovery
    arm.step(1500)
    assert np.abs(arm_position(arm) - slow).max() < 5e-3


def test_pushing_the_hand_into_the_table_trips_the_collision_reflex() -> None:
    """The hand pressed onto the table: the contact torque on joint 2 passes 35 N*m."""
    arm = physics()
    down = SPEC.home.copy()
    down[1], down[3] = 1.2, -1.2     # reaches far below the table top, within the limits
    assert move(arm, down, 3.0) is None
    for _ in range(4000):
        arm.step()
        if arm.stop is not None:
            break
    assert arm.stop is not None and arm.stop.error == 'joint_reflex', arm.stop
    data = arm.data   # contact rows come last, as contact_torque relies on
    first = data.ne + data.nf + data.nl
    assert data.nefc > first and np.all(data.efc_type[first:data.nefc] >= int(
        mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS))
    assert np.all(data.efc_type[:first] < int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS))
    flange = arm.body_pose(arm.index.flange_body)[0]
    assert flange[2] < 0.15          # the fingers (0.1 m below the flange) touch the table
    held = arm_position(arm)
    arm.step(500)
    assert np.abs(arm_position(arm) - held).max() < 0.02


def test_measured_velocity_and_position_beyond_the_limits_stop_the_arm() -> None:
    arm = physics()
    position = np.append(SPEC.home, [0.04, 0.04])
    velocity = np.zeros(9)
    velocity[0] = 1.2 * SPEC.velocity[0]
    arm.reset_joints(position, velocity)
    arm.step()
    assert arm.stop is not None and arm.stop.error == 'joint_velocity_violation'
    assert arm.stop.joint == 'fr3_joint1' and 'moves at' in arm.stop.text
    position[3] = SPEC.position_upper[3] + 0.05
    arm.reset_joints(position)                 # a reset clears the stop
    assert arm.stop is None
    arm.step()
    assert arm.stop is not None and arm.stop.error == 'joint_position_limits_violation'


def test_without_reflexes_nothing_stops() -> None:
    """sysid's replays run the recorded motion whatever it was."""
    arm = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC)
    arm.reset_keyframe('home')
    step = SPEC.home.copy()
    step[4] += 0.5
    assert move(arm, step, 0.05) is None
    arm.step(300)
    assert arm.stop is None and abs(arm_position(arm)[4] - step[4]) < 0.05


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_stops_the_arm(value: float) -> None:
    peak = np.zeros(7)
    peak[2] = abs(value)
    assert REFLEXES.command(peak, 0.0).joint == 'fr3_joint3'
    for slot in range(3):
        state = [SPEC.home.copy(), np.zeros(7), np.zeros(7)]
        state[slot][5] = value
        stop = REFLEXES.measure(*state, 0.0)
        assert stop is not None and stop.joint == 'fr3_joint6', (slot, stop)


def test_a_chained_trajectory_taken_over_just_before_its_first_point_does_not_stop() -> None:
    """The held-out excitation of a CI run stopped the stand-in: a chained trajectory (the
    previous targets first, 20 ms apart, the first one due when sent) arrived 2 us before
    its first point in sim time, so the plan reached that point from the measured state,
    0.3 mrad away, in 2 us: 150 rad/s as a mean. The controller samples once a 1 ms cycle,
    so the arm is commanded that step within a cycle, 0.3 rad/s; a step that is fast over
    a whole cycle still stops."""
    arm = physics()
    period, ahead, lag = 0.02, 2e-6, 3e-4
    speed = 0.5                                                # rad/s of fr3_joint7
    first = SPEC.home[:7].copy()
    points = np.array([first + speed * period * k * np.eye(7)[6] for k in range(3)])
    goal = TrajectoryGoal(times=np.array([0.0, period, 2 * period]), positions=points,
                          velocities=None, joints=np.arange(7), start=None)
    measured = first - lag * np.eye(7)[6]
    plan = TrajectoryPlan(goal, arm.time + ahead, measured, arm.time)
    assert np.abs(plan.segments()[1]).max() > 100.0            # as a mean over 2 us
    assert np.abs(plan.segments(arm.timestep)[1]).max() == pytest.approx(speed)
    assert arm.follow(plan) is None and arm.stop is None
    fast = np.array([first, first + 0.02 * np.eye(7)[6]])     # 0.02 rad in one cycle
    goal = TrajectoryGoal(times=np.array([0.0, arm.timestep]), positions=fast,
                          velocities=None, joints=np.arange(7), start=None)
    stop = arm.follow(TrajectoryPlan(goal, arm.time, first, arm.time))
    assert stop is not None and stop.error == 'joint_velocity_violation'
