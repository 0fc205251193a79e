"""Safety pipeline: hypothesis drives adversarial actions and states; the invariants must hold.

Every bound below is computed here from config/robot/fr3.yaml's raw numbers, in plain floats,
never by the code under test (``SafetyLimits.from_spec``):

I1: every target lies within the spec's position limits minus the margin.
I2: consecutive targets differ by at most velocity limit × velocity_scale × period.
I3: no target asks for a velocity the arm refuses at its position: Franka's position-based
velocity limits, computed here from config/robot/fr3.yaml's raw numbers with the formula of
Franka's documentation, independently of the code under test.
Plus: the gripper stays in range and within its speed, and with the acceleration limit the
step changes by at most the scaled acceleration × period² between non-hold targets.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from limit_helpers import ARM, GRIPPER, allowed_velocity

from simops_core import safety
from simops_core.robot_spec import load_robot_spec

SPEC = load_robot_spec('fr3')
RATE = 20.0
TOL = 1e-9  # rad: float rounding of target ± max_step

ADVERSARIAL = st.sampled_from([math.nan, math.inf, -math.inf, 1e9, -1e9, 1e308, -1e308, 0.0])
VALUE = st.one_of(st.floats(-5, 5), ADVERSARIAL, st.floats(allow_nan=True, allow_infinity=True))


def mapping(reference: str, alpha: float = 0.79, gripper: bool = True) -> safety.ActionMapping:
    return safety.ActionMapping(arm_index=np.array([6, 5, 4, 3, 2, 1, 0]),
                                gripper_index=7 if gripper else None, clip=1.0, scale=0.05,
                                reference=reference, lpf_alpha=alpha)


@st.composite
def actions(draw: st.DrawFn) -> np.ndarray:
    kind = draw(st.sampled_from(['random', 'adversarial', 'oscillate', 'saturate']))
    if kind == 'oscillate':
        sign = draw(st.sampled_from([-1.0, 1.0]))
        return np.full(8, sign * draw(st.sampled_from([1.0, 1e9, math.inf])))
    if kind == 'saturate':
        return np.full(8, draw(st.sampled_from([1.0, -1.0, 1e9])))
    element = VALUE if kind == 'adversarial' else st.floats(-3, 3)
    return np.array(draw(st.lists(element, min_size=8, max_size=8)))


@st.composite
def measured_states(draw: st.DrawFn) -> np.ndarray:
    """Inside, at, or far outside the limits; occasionally non-finite."""
    low, high = SPEC.position_lower, SPEC.position_upper
    kind = draw(st.sampled_from(['inside', 'outside', 'far', 'edge', 'garbage']))
    u = np.array(draw(st.lists(st.floats(0, 1), min_size=7, max_size=7)))
    if kind == 'inside':
        return low + u * (high - low)
    if kind == 'outside':
        return low - 0.5 + u * (high - low + 1.0)
    if kind == 'far':
        return (u - 0.5) * 200.0
    if kind == 'edge':
        return np.where(u > 0.5, high, low)
    return np.array(draw(st.lists(VALUE, min_size=7, max_size=7)))


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    return {
        'velocity_scale': draw(st.floats(0.05, 1.0)),
        'margin': draw(st.floats(0.0, 0.1)),
        'acceleration': draw(st.booleans()),
        'reference': draw(st.sampled_from(['measured', 'last_command'])),
        'alpha': draw(st.floats(0.05, 1.0)),
        'start': draw(st.lists(st.floats(0, 1), min_size=7, max_size=7)),
        'start_width': draw(st.floats(-1.0, 1.0)),
        # (action, measured, hold?, blend)
        'steps': draw(st.lists(st.tuples(actions(), measured_states(),
                                         st.sampled_from([False] * 9 + [True]),
                                         st.one_of(st.just(1.0), st.floats(0, 1))),
                               min_size=1, max_size=60)),
    }


class Bounds:
    """A scenario's limits from the YAML's numbers: rad, rad per step, rad per step², m."""

    def __init__(self, scenario: dict) -> None:
        scale, margin, period = scenario['velocity_scale'], scenario['margin'], 1.0 / RATE
        self.lower = [q + margin for q in ARM['position_lower']]
        self.upper = [q - margin for q in ARM['position_upper']]
        self.step = [v * scale * period for v in ARM['velocity']]
        self.change = [a * scale * period * period for a in ARM['acceleration']]
        self.width = (GRIPPER['width_min'], GRIPPER['width_max'])
        self.width_step = GRIPPER['speed_max'] * period

    def check_target(self, target: np.ndarray, width: float) -> None:
        """I1 and the gripper's range."""
        for i, q in enumerate(target):
            assert self.lower[i] <= q <= self.upper[i], (i, q, self.lower[i], self.upper[i])
        assert self.width[0] <= width <= self.width[1], width

    def check_move(self, before: safety.SafetyState, after: safety.SafetyState) -> None:
        """I2, I3 and the gripper's speed from one target to the next."""
        for i, (a, b) in enumerate(zip(before.target, after.target, strict=True)):
            assert abs(b - a) <= self.step[i] + TOL, (i, b - a, self.step[i])
        assert_position_based(before.target, after.target)
        assert abs(after.gripper - before.gripper) <= self.width_step + TOL


def assert_position_based(before: np.ndarray, after: np.ndarray) -> None:
    """I3: the velocity from ``before`` to ``after`` (one period) is allowed at ``after``."""
    lower, upper = allowed_velocity(after)
    velocity = (after - before) * RATE
    for i, v in enumerate(velocity):
        assert lower[i] - 1e-7 <= v <= upper[i] + 1e-7, (i, after[i], v, lower[i], upper[i])


def run(scenario: dict) -> tuple[safety.SafetyLimits, list[tuple[safety.SafetyState, bool]]]:
    limits = safety.SafetyLimits.from_spec(SPEC, 1.0 / RATE, scenario['velocity_scale'],
                                           scenario['margin'], scenario['acceleration'])
    u = np.array(scenario['start'])
    # Start inside the limits, or up to one step outside them (start() accepts that).
    reach = limits.max_step * (1 - 1e-6)
    first = limits.lower - reach + u * (limits.upper - limits.lower + 2 * reach)
    state = safety.start(first, scenario['start_width'], limits)
    assert np.all(np.abs(state.target - first) <= limits.max_step + TOL)
    outputs = [(state, True)]
    rules = mapping(scenario['reference'], scenario['alpha'])
    for action, measured, held, blend in scenario['steps']:
        if held:
            state = safety.hold(state)
        else:
            out = safety.step(state, action, measured, blend, limits, rules)
            assert out.fault == (not (np.all(np.isfinite(action))
                                      and np.all(np.isfinite(measured))))
            assert np.all(np.abs(out.action) <= rules.clip)
            held = out.fault
            state = out.state
        outputs.append((state, held))
    return limits, outputs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_target_inside_limits_and_rate(scenario: dict) -> None:
    _, outputs = run(scenario)
    bounds = Bounds(scenario)
    previous = None
    for state, _held in outputs:
        assert np.all(np.isfinite(state.target))
        bounds.check_target(state.target, state.gripper)   # I1
        if previous is not None:
            bounds.check_move(previous, state)   # I2, I3
        previous = state


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_acceleration_limit_between_non_hold_targets(scenario: dict) -> None:
    scenario['acceleration'] = True
    _, outputs = run(scenario)
    change = Bounds(scenario).change
    for (before, _), (after, held) in itertools.pairwise(outputs):
        if not held:
            for i, (a, b) in enumerate(zip(before.step, after.step, strict=True)):
                assert abs(b - a) <= change[i] + TOL, (i, b - a, change[i])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_braking_stop_stays_inside_decelerates_and_comes_to_rest(scenario: dict) -> None:
    """~/enable off mid-motion: from any reachable state the stop keeps I1, I2 and the
    acceleration limit, and reaches rest within max_step / max_step_change steps."""
    limits, outputs = run(scenario)
    bounds = Bounds(scenario)
    state = outputs[-1][0]
    bound = (1 if not scenario['acceleration']
             else math.ceil(max(s / c for s, c in zip(bounds.step, bounds.change,
                                                      strict=True))) + 1)
    for _ in range(bound):
        after, rest = safety.brake(state, limits)
        bounds.check_target(after.target, after.gripper)
        bounds.check_move(state, after)
        if scenario['acceleration']:
            assert np.all(np.abs(after.step) <= np.abs(state.step) + TOL)   # never speeds up
            for i, (a, b) in enumerate(zip(state.step, after.step, strict=True)):
                assert abs(b - a) <= bounds.change[i] + TOL, (i, b - a, bounds.change[i])
        state = after
        if rest:
            break
    assert rest, 'the braking stop did not come to rest in time'
    assert np.array_equal(safety.brake(state, limits)[0].target, state.target)


def test_start_refuses_a_state_more_than_one_step_outside() -> None:
    limits = safety.SafetyLimits.from_spec(SPEC, 1 / RATE, 0.5, 0.05)
    far = SPEC.home.copy()
    far[3] = limits.upper[3] + 2 * limits.max_step[3]
    with pytest.raises(safety.OutsideLimitsError, match='joint 3'):
        safety.start(far, 0.04, limits)
    with pytest.raises(ValueError, match='not finite'):
        safety.start(np.full(7, math.nan), 0.04, limits)


def test_policy_reaches_a_far_goal_at_the_velocity_limit() -> None:
    """Saturated actions move each joint by exactly max_step per step once accelerated."""
    limits = safety.SafetyLimits.from_spec(SPEC, 1 / RATE, 0.5, 0.05, limit_acceleration=False)
    state = safety.start(SPEC.home, 0.04, limits)
    rules = mapping('last_command', alpha=1.0)
    for _ in range(3):
        state = safety.step(state, np.full(8, 1.0), SPEC.home, 1.0, limits, rules).state
    expected = np.minimum(SPEC.home + 3 * np.minimum(limits.max_step, 0.05), limits.upper)
    np.testing.assert_allclose(state.target, expected)


def test_nan_holds_and_faults() -> None:
    limits = safety.SafetyLimits.from_spec(SPEC, 1 / RATE, 0.5, 0.05)
    state = safety.start(SPEC.home, 0.04, limits)
    out = safety.step(state, np.full(8, math.nan), SPEC.home, 1.0, limits, mapping('measured'))
    assert out.fault
    np.testing.assert_array_equal(out.state.target, state.target)
    np.testing.assert_array_equal(out.action, np.zeros(8))


def test_ramp_blends_from_the_anchor() -> None:
    limits = safety.SafetyLimits.from_spec(SPEC, 1 / RATE, 1.0, 0.05, limit_acceleration=False)
    state = safety.start(SPEC.home, 0.04, limits)
    action = np.full(8, 0.2)  # 0.01 rad per step: well below every max_step
    out = safety.step(state, action, SPEC.home, 0.0, limits, mapping('measured', alpha=1.0))
    np.testing.assert_allclose(out.state.target, SPEC.home)  # blend 0: stays at the anchor
    out = safety.step(state, action, SPEC.home, 0.5, limits, mapping('measured', alpha=1.0))
    np.testing.assert_allclose(out.state.target, SPEC.home + 0.005)


@pytest.mark.parametrize(('kwargs', 'match'), [
    ({'period': 0.0}, 'period'), ({'velocity_scale': 1.5}, 'velocity_scale'),
    ({'margin': 2.0}, 'margin'), ({'margin': -0.1}, 'margin')])
def test_limits_reject_bad_settings(kwargs: dict, match: str) -> None:
    args = {'period': 0.05, 'velocity_scale': 0.5, 'margin': 0.05} | kwargs
    with pytest.raises(safety.SafetyConfigError, match=match):
        safety.SafetyLimits.from_spec(SPEC, **args)


def test_lowpass_alpha() -> None:
    assert safety.lowpass_alpha(5.0, 20.0) == pytest.approx(1 - math.exp(-math.pi / 2))
    with pytest.raises(safety.SafetyConfigError):
        safety.lowpass_alpha(0.0, 20.0)
