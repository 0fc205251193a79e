"""`fit --mode torque`: friction and torque offsets from efforts alone, and odd bags.

Bags are written from the stand-in's physics (tests/sysid_helpers.py): smooth friction, a
small viscous term, encoder and torque-sensor offsets, and 0.05 N*m of torque noise.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO, installed_executable
from sysid_helpers import HIDDEN, SPEC, StandinData, simulate, write_bag

from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import PayloadParams, SimParams, load_sim_params, merge_sim_params
from simops_core.topics import load_topics
from simops_sim.model_index import load_model
from simops_sim.physics import Physics
from simops_sysid.recording import load_states
from simops_sysid.torque_fit import (
    JointFriction,
    apply_friction,
    fit_friction,
    rigid_body_model,
    torque_data,
)

TORQUE_NOISE = 0.05   # N*m, as config/standin_robot.yaml


def run_fit(*args: object, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed_executable('simops_sysid', 'fit')),
                           *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


@pytest.fixture(scope='module')
def noisy() -> StandinData:
    """60 s of excitation with torque-sensor noise, as the stand-in publishes it."""
    data = simulate(60.0, seed=3)
    rng = np.random.default_rng(1)
    return replace(data, effort=data.effort + rng.normal(0.0, TORQUE_NOISE, data.effort.shape))


def friction_at(fit: JointFriction, speed: float) -> float:
    """The friction torque (N*m) a joint model gives at ``speed`` rad/s, offset left out."""
    return fit.coulomb * float(np.tanh(speed / fit.transition)) + fit.viscous * speed


def truth(joint: str) -> JointFriction:
    entry = load_sim_params(HIDDEN).joints[joint]
    return JointFriction(entry.frictionloss, entry.damping, entry.torque_offset,
                         entry.friction_transition, 0.0, 0.0)


def test_an_efforts_only_bag_is_fitted_in_torque_mode(tmp_path: Path, noisy: StandinData
                                                      ) -> None:
    bag = write_bag(tmp_path / 'efforts', noisy, commands=False)
    result = run_fit('--bag', bag, '--out', tmp_path / 'torque.yaml')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'mode torque' in result.stdout and 'Traceback' not in result.stderr
    fitted = load_sim_params(tmp_path / 'torque.yaml')
    rms = fitted.provenance['torque_rms_nm']['holdout']
    for joint in SPEC.arm_joints:
        entry, expected = fitted.joints[joint], truth(joint)
        # The encoder offsets (up to 2 mrad) tilt the gravity torque the model computes by up
        # to ~0.04 N*m (joint 2): the fitted offset absorbs that as well.
        assert entry.torque_offset == pytest.approx(expected.offset, abs=TORQUE_NOISE), joint
        assert rms['fitted'][joint] < rms['nominal'][joint], joint


def test_held_out_torque_error_is_at_the_noise_floor_and_friction_equivalent(
        noisy: StandinData) -> None:
    """The fit explains held-out torques as well as the stand-in's own friction law does
    (within 1.2x), and gives each joint the same friction torque at its typical speed
    (within 10 %): where tanh does not saturate, Coulomb level and viscous term trade
    against each other, and the torque they give together is what is identified."""
    physics = Physics(load_model('models/fr3/scene.xml'), SPEC)
    rigid = rigid_body_model(physics.model, physics.index)
    cut = int(noisy.t.size * 0.8)
    train = torque_data(rigid, physics.index, noisy.t[:cut], noisy.q[:cut], noisy.qd[:cut],
                        noisy.effort[:cut])
    held = torque_data(rigid, physics.index, noisy.t[cut:], noisy.q[cut:], noisy.qd[cut:],
                       noisy.effort[cut:])
    fits = fit_friction(train)
    oracle = [truth(joint) for joint in SPEC.arm_joints]
    assert np.all(apply_friction(held, fits) <= 1.2 * apply_friction(held, oracle))
    for j, (fit, expected) in enumerate(zip(fits, oracle, strict=True)):
        speed = float(np.sqrt(np.mean(held.qd[:, j] ** 2)))
        assert friction_at(fit, speed) == pytest.approx(friction_at(expected, speed),
                                                        rel=0.10), SPEC.arm_joints[j]


def test_an_arm_without_its_hand_carrying_a_tool_is_fitted_from_torques(tmp_path: Path) -> None:
    """--end-effector none --params payload: the tool's mass and centre of mass from efforts.

    The stand-in carries no hand but a 1.2 kg tool off-centre; a fit that assumes the hand
    and no tool is left with newton-metres of gravity error.
    """
    tool = PayloadParams(mass=1.2, com_x=0.02, com_y=-0.01, com_z=0.08)
    hidden = merge_sim_params(load_sim_params(HIDDEN), SimParams(end_effector='none',
                                                                 payload=tool))
    data = simulate(40.0, seed=5, params=hidden)
    rng = np.random.default_rng(2)
    data = replace(data, effort=data.effort + rng.normal(0.0, TORQUE_NOISE, data.effort.shape))
    bag = write_bag(tmp_path / 'tool', data, commands=False)
    result = run_fit('--bag', bag, '--out', tmp_path / 'tool.yaml', '--end-effector', 'none',
                     '--params', 'payload')
    assert result.returncode == 0, result.stdout + result.stderr
    fitted = load_sim_params(tmp_path / 'tool.yaml')
    assert fitted.end_effector == 'none'
    # Measured: 1.26 kg at 7 mm from the truth. Mass and the centre's distance along the
    # flange axis trade against each other over a workspace where the flange points down,
    # and the friction law's mismatch (tanh transitions on a grid) leans on that direction.
    assert fitted.payload.mass == pytest.approx(tool.mass, rel=0.1)
    com = np.array([fitted.payload.com_x, fitted.payload.com_y, fitted.payload.com_z])
    assert np.linalg.norm(com - [tool.com_x, tool.com_y, tool.com_z]) < 0.01
    def total(path: Path) -> float:   # held-out torque RMS over the arm joints, N*m
        held = load_sim_params(path).provenance['torque_rms_nm_filtered']['holdout']['fitted']
        return float(np.sqrt(np.mean(np.square(list(held.values())))))

    assert total(tmp_path / 'tool.yaml') < TORQUE_NOISE   # the noise, filtered like the efforts
    assumed = run_fit('--bag', bag, '--out', tmp_path / 'hand.yaml')
    assert assumed.returncode == 0, assumed.stdout + assumed.stderr
    assert total(tmp_path / 'hand.yaml') > 2 * TORQUE_NOISE


def test_a_panda_bag_is_recognised_by_its_joint_names(tmp_path: Path, noisy: StandinData
                                                      ) -> None:
    panda = load_robot_spec('panda')
    efforts = write_bag(tmp_path / 'panda', noisy, names=list(panda.joint_names),
                        commands=False)
    result = run_fit('--bag', efforts, '--out', tmp_path / 'panda.yaml')
    assert result.returncode == 0, result.stdout + result.stderr
    fitted = load_sim_params(tmp_path / 'panda.yaml')
    assert set(fitted.joints) == set(panda.arm_joints)
    assert fitted.provenance['robot'] == 'panda'
    # With commands naming the FR3's joints, the Panda's states are no trajectory to replay.
    mixed = write_bag(tmp_path / 'mixed', noisy, names=list(panda.joint_names))
    result = run_fit('--bag', mixed, '--out', tmp_path / 'mixed.yaml', '--mode', 'trajectory')
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('fit: error:'), result.stderr


def test_efforts_are_needed_in_torque_mode(tmp_path: Path, noisy: StandinData) -> None:
    silent = write_bag(tmp_path / 'silent', replace(noisy, effort=np.zeros_like(noisy.effort)),
                       commands=False)
    result = run_fit('--bag', silent, '--out', tmp_path / 'p.yaml')
    assert result.returncode == 3, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert 'no efforts' in result.stderr and 'Traceback' not in result.stderr


def test_states_of_a_bag_without_commands_load(tmp_path: Path, noisy: StandinData) -> None:
    states = load_states(write_bag(tmp_path / 'b', noisy, commands=False), SPEC, load_topics())
    assert states.command_topics == () and states.q.shape == (noisy.t.size, 9)
