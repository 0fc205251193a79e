"""The one policy step the policy node and the envs share: out-of-domain check, restart."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ros_helpers import check_parameters_once

from simops_core.paths import resolve_resource
from simops_core.policy_card import load_policy_card
from simops_core.policy_step import PolicyStep, StepSettings
from simops_core.robot_spec import load_robot_spec

SPEC = load_robot_spec('fr3')
CARD = load_policy_card(resolve_resource('models/policy/fr3_reach.yaml'), SPEC.joint_names,
                        SPEC.arm_joints)


def make_step() -> PolicyStep:
    step = PolicyStep(CARD, SPEC, StepSettings())
    step.raw.joint_position[:7] = SPEC.home
    step.raw.joint_position[7:] = 0.04
    return step


@settings(max_examples=200, deadline=None)
@given(joint=st.integers(0, 6), factor=st.floats(-3.0, 3.0), sign=st.sampled_from([-1, 1]))
def test_out_of_domain_names_the_first_joint_beyond_its_velocity_limit(
        joint: int, factor: float, sign: int) -> None:
    step = make_step()
    step.raw.joint_velocity[:7] = 0.5 * SPEC.velocity      # everything else inside
    step.raw.joint_velocity[joint] = sign * factor * SPEC.velocity[joint]
    problem = step.out_of_domain()
    if abs(factor) * SPEC.velocity[joint] > SPEC.velocity[joint]:
        assert problem is not None and SPEC.arm_joints[joint] in problem
        assert f'{SPEC.velocity[joint]:.2f} rad/s limit' in problem
    else:
        assert problem is None


def test_fingers_do_not_count_and_the_limit_itself_is_inside() -> None:
    step = make_step()
    step.raw.joint_velocity[:7] = SPEC.velocity
    step.raw.joint_velocity[7:] = 100.0                    # finger slides (m/s)
    assert step.out_of_domain() is None


def test_restart_starts_from_the_measurement_then_reanchors_without_a_jump() -> None:
    step = make_step()
    with pytest.raises(RuntimeError):
        step.command(np.zeros(CARD.action.size), 1.0)
    step.restart(0.08)
    np.testing.assert_array_equal(step.state.target, SPEC.home)
    moved = step.command(np.ones(CARD.action.size), 1.0).state.target
    step.raw.joint_position[:7] = SPEC.home + 0.3           # the arm drifted during a hold
    step.restart(0.08)                                      # after a hold: the held target
    np.testing.assert_array_equal(step.state.target, moved)
    assert not np.any(step.last_action)
    step.forget()                                           # DISABLED / env reset: measure
    step.restart(0.08)
    np.testing.assert_allclose(step.state.target, SPEC.home + 0.3)


def test_settings_become_node_parameters() -> None:
    assert StepSettings(ramp_time=0.0).ros_args() == [
        '-p', 'lpf_cutoff_hz:=5.0', '-p', 'velocity_scale:=0.5', '-p',
        'joint_limit_margin:=0.05', '-p', 'ramp_time:=0.0', '-p', 'stale_state_timeout:=0.1']


def test_a_setting_given_twice_to_a_node_is_refused() -> None:
    """The settings spliced into a node's arguments must not silently override a test's own
    value of the same parameter (ROS takes the last ``-p``)."""
    settings = StepSettings().ros_args()
    check_parameters_once(['--ros-args', '-p', 'model_path:=p.pt', *settings])
    with pytest.raises(ValueError, match=r"\['ramp_time'\]"):
        check_parameters_once(['--ros-args', '-p', 'ramp_time:=0.0', *settings])
    check_parameters_once(['-p', 'x:=1', '-p', 'x:=2'])   # not ROS arguments: the node's own
