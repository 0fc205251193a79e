"""The excitation trajectory: inside the limits, at rest at home at both ends, safe to pass
through the policy's safety pipeline unchanged, clear of the table, reproducible by seed."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from ros_helpers import REPO

from simops_core import safety
from simops_core.robot_spec import load_robot_spec
from simops_sim.physics import Physics
from simops_sysid.excitation import ExcitationError, fourier_excitation

SPEC = load_robot_spec('fr3')
RATE = 50.0


@pytest.mark.parametrize('fraction', [0.1, 0.25, 0.5])
def test_within_the_fraction_of_every_limit(fraction: float) -> None:
    ex = fourier_excitation(SPEC, 30.0, 3, fraction, RATE)
    room = np.minimum(SPEC.home - SPEC.position_lower, SPEC.position_upper - SPEC.home) - 0.05
    assert np.all(np.abs(ex.q - SPEC.home).max(axis=0) <= fraction * room)
    assert np.all(np.abs(ex.qd).max(axis=0) <= fraction * SPEC.velocity)
    assert np.all(np.abs(ex.qdd).max(axis=0) <= fraction * SPEC.acceleration)
    # Each joint uses most of its budget on at least one of the three limits.
    used = np.max([np.abs(ex.q - SPEC.home).max(axis=0) / (fraction * room),
                   np.abs(ex.qd).max(axis=0) / (fraction * SPEC.velocity),
                   np.abs(ex.qdd).max(axis=0) / (fraction * SPEC.acceleration)], axis=0)
    assert np.all(used > 0.85)


def test_ramps_from_and_to_home_at_rest_and_derivatives_agree() -> None:
    ex = fourier_excitation(SPEC, 20.0, 0, 0.25, 1000.0)
    for row in (0, -1):
        np.testing.assert_allclose(ex.q[row], SPEC.home, atol=1e-12)
        np.testing.assert_allclose(ex.qd[row], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.gradient(ex.q, ex.t, axis=0)[1:-1], ex.qd[1:-1], atol=1e-4)
    np.testing.assert_allclose(np.gradient(ex.qd, ex.t, axis=0)[1:-1], ex.qdd[1:-1], atol=1e-3)


def test_seed_decides_the_trajectory() -> None:
    a, b = fourier_excitation(SPEC, 10.0, 1, 0.25, RATE), fourier_excitation(SPEC, 10.0, 1,
                                                                             0.25, RATE)
    np.testing.assert_array_equal(a.q, b.q)
    assert np.abs(a.q - fourier_excitation(SPEC, 10.0, 2, 0.25, RATE).q).max() > 0.01


def test_the_safety_pipeline_passes_it_unchanged() -> None:
    fraction = 0.25
    ex = fourier_excitation(SPEC, 30.0, 0, fraction, RATE)
    limits = safety.SafetyLimits.from_spec(SPEC, 1.0 / RATE, fraction, 0.05)
    mapping = safety.ActionMapping(np.arange(7), None, 2 * np.pi, 1.0, 'last_command', 1.0)
    state = safety.start(SPEC.home, 0.0, limits)
    for wanted in ex.q:
        state = safety.step(state, wanted - state.target, wanted, 1.0, limits, mapping).state
        np.testing.assert_allclose(state.target, wanted, atol=1e-12)


def test_flange_stays_well_above_the_table() -> None:
    physics = Physics(mujoco.MjModel.from_xml_path(str(REPO / 'models/fr3/scene.xml')), SPEC)
    lowest = np.inf
    for q in fourier_excitation(SPEC, 60.0, 0, 0.5, 10.0).q:
        physics.reset_joints(np.concatenate((q, [0.04, 0.04])))
        lowest = min(lowest, physics.state().flange_pos[2])
    assert lowest > 0.3


def test_impossible_settings_are_refused() -> None:
    with pytest.raises(ExcitationError, match='amplitude_fraction'):
        fourier_excitation(SPEC, 30.0, 0, 1.5, RATE)
    with pytest.raises(ExcitationError, match='duration'):
        fourier_excitation(SPEC, 4.0, 0, 0.25, RATE)
