"""Training: reproducible per seed, the module applies the expert's law, and simops-train
exports what the node loads.

Training runs on a tiny budget here (seconds); the shipped policy is tested as an artefact.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from learning_helpers import CARD, EXPORTED, EXPORTED_CARD, POLICY
from ros_helpers import REPO

from simops_core.policy_card import file_sha256, load_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_learning.network import PosturePolicy
from simops_learning.reach_card import reach_card
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.train import EvalJob, TrainConfig, evaluate, train
from simops_policy.model import load_policy
from simops_sim.scenarios import drawn

SPEC = load_robot_spec('fr3')
TINY = TrainConfig(seed=3, goals=20, hidden=(16,), updates=30, eval_episodes=1, workers=1,
                   gain_candidates=(0.2,))


def test_same_seed_same_weights() -> None:
    first, meta = train(TINY, log=lambda line: None)
    second, _ = train(TINY, log=lambda line: None)
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name
    assert meta['goals'] == 20 and meta['gain'] == 0.2


def test_policy_module_applies_the_expert_law() -> None:
    """Goal and joint positions decoded from the observation; vector-saturated P law."""
    env = FR3ReachEnv()
    policy = PosturePolicy(env.card, SPEC, (8,), gain=0.2).eval()
    for seed, goal in ((0, [0.5, 0.1, 0.3]), (1, [0.35, -0.2, 0.1])):
        obs, _ = env.reset(seed=seed, options={'goal': goal, 'ramp_time': 0.0})
        for _ in range(3):
            obs, *_ = env.step(np.full(8, 0.5, np.float32))
        with torch.no_grad():
            action = policy(torch.as_tensor(obs)[None])[0].numpy()
            posture = policy.posture(torch.tensor([goal], dtype=torch.float32))[0].numpy()
        q = env.policy_step.raw.joint_position[:7]
        dq = 0.2 * (posture - q) / env.card.action.scale
        dq /= max(1.0, np.abs(dq).max())
        np.testing.assert_allclose(action, [*dq, 1.0], atol=1e-4)


@pytest.mark.ros_free
def test_cli_exports_both_formats_with_cards(tmp_path: Path) -> None:
    stem = tmp_path / 'tiny'
    calibration = REPO / 'config/sim_params/standin_hidden.yaml'   # a fit's, say
    run = subprocess.run([str(REPO / '.venv/bin/simops-train'), '--out', str(stem),
                          '--goals', '20', '--updates', '5', '--eval-episodes', '1',
                          '--workers', '1', '--sim-params', str(calibration)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert 'labelled 20 goals' in run.stdout and 'chose gain' in run.stdout
    pt_card = load_policy_card(stem.with_suffix('.yaml'), SPEC.joint_names, SPEC.arm_joints)
    pt2_card = load_policy_card(tmp_path / 'tiny.pt2.yaml', SPEC.joint_names, SPEC.arm_joints)
    assert pt_card.sha256 == file_sha256(stem.with_suffix('.pt'))
    assert pt2_card.sha256 == file_sha256(stem.with_suffix('.pt2'))
    assert pt_card.training['seed'] == 0 and pt_card.training['goals'] == 20
    assert pt_card.training['sim_params'] == {'path': str(calibration),
                                              'sha256': file_sha256(calibration)}
    scripted = load_policy(stem.with_suffix('.pt'), pt_card)
    exported = load_policy(stem.with_suffix('.pt2'), pt2_card)
    obs = np.random.default_rng(0).normal(size=pt_card.observation_size).astype(np.float32)
    np.testing.assert_allclose(scripted.infer(obs), exported.infer(obs), atol=1e-6)


@pytest.mark.ros_free
def test_cli_rejects_bad_arguments(tmp_path: Path) -> None:
    bad = tmp_path / 'dr.yaml'
    bad.write_text('randomization: {mass: [2.0, 1.0]}\n')
    run = subprocess.run([str(REPO / '.venv/bin/simops-train'), '--randomization', str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr.startswith('simops-train: error:'), run.stderr
    assert 'randomization.mass' in run.stderr
    physics = tmp_path / 'fit.yaml'
    physics.write_text('version: 1\ncommand_delay: -1\n')
    run = subprocess.run([str(REPO / '.venv/bin/simops-train'), '--sim-params', str(physics)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and 'command_delay' in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_shipped_policy_and_cards() -> None:
    """The default policy the sim launch runs: both formats load as the node loads them."""
    card = load_policy_card(CARD, SPEC.joint_names, SPEC.arm_joints)
    assert card.sha256 == file_sha256(POLICY)
    expected = reach_card(SPEC, card.sha256, card.training)
    assert card.observation_size == 66 and card.action.reference == 'last_command'
    assert expected['observation']['history'] == card.history
    assert card.training['seed'] == 0 and card.training['randomized_success_by_gain']
    assert POLICY.stat().st_size < 500_000 and EXPORTED.stat().st_size < 1_000_000
    scripted = load_policy(POLICY, card)
    exported = load_policy(EXPORTED, load_policy_card(EXPORTED_CARD, SPEC.joint_names,
                                                     SPEC.arm_joints))
    obs = np.random.default_rng(1).normal(size=66).astype(np.float32)
    np.testing.assert_allclose(scripted.infer(obs), exported.infer(obs), atol=1e-6)


def test_the_gain_rollouts_play_the_scenarios_drawn_from_their_seeds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rollout that chooses the reach gain plays the scenario its seed draws, as pick
    and place's DAgger rounds do (one rule: :func:`simops_sim.scenarios.drawn`)."""
    played: dict[int, Any] = {}
    reset = FR3ReachEnv.reset

    def recording(env: FR3ReachEnv, *, seed: int, options: dict[str, Any]) -> Any:
        played[seed] = options['scenario']
        return reset(env, seed=seed, options=options)

    monkeypatch.setattr(FR3ReachEnv, 'reset', recording)
    policy = PosturePolicy(FR3ReachEnv().card, SPEC, (8,), gain=0.2).eval()
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(policy), buffer)
    names, seeds = ('estop', 'push_arm'), tuple(range(6))
    job = EvalJob(buffer.getvalue(), seeds, TINY.randomization, 'fr3', scenarios=names,
                  scenario_share=0.5)
    assert len(evaluate(job)) == len(seeds)
    assert played == {seed: drawn(names, 0.5, seed, 'reach') for seed in seeds}
    assert {s.name for s in played.values() if s is not None} == set(names)
    assert None in played.values()


@pytest.mark.ros_free
def test_the_cli_trains_reach_through_scenarios_and_the_card_names_them(tmp_path: Path
                                                                        ) -> None:
    stem = tmp_path / 'reach'
    run = subprocess.run([str(REPO / '.venv/bin/simops-train'), '--out', str(stem),
                          '--goals', '20', '--updates', '5', '--eval-episodes', '2',
                          '--workers', '1', '--scenarios', 'estop', 'goal_moved',
                          '--scenario-share', '1'],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    training = yaml.safe_load(stem.with_suffix('.yaml').read_text())['training']
    assert training['scenarios'] == {'names': ['estop', 'goal_moved'], 'share': 1.0,
                                     'in': 'the gain rollouts'}
