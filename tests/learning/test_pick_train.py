"""Pick-and-place training (DAgger from the grasp expert) and the shipped policy, in the env."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from ros_helpers import REPO

from simops_core.policy_card import file_sha256
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_expert import PickExpert
from simops_learning.pick_network import InFlightPolicy
from simops_learning.pick_ppo import DecisionEnv, PPOConfig, fine_tune
from simops_learning.pick_train import (
    InitPolicyError,
    PickTrainConfig,
    episode_scenario,
    expert_action,
    new_policy,
    start_policy,
    train_pick,
)
from simops_policy.model import load_policy
from simops_sim.randomization import Conditions, default_randomization
from simops_sim.scenarios import scenario

SHIPPED = REPO / 'models/policy/fr3_pick_place.pt'
TINY = PickTrainConfig(rounds=1, episodes=2, updates=30, eval_episodes=2, workers=1)


def test_training_is_seeded_and_reproducible() -> None:
    first, meta = train_pick(TINY, log=lambda _: None)
    second, _ = train_pick(TINY, log=lambda _: None)
    other, _ = train_pick(replace(TINY, seed=1), log=lambda _: None)
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    assert not all(torch.equal(a, c) for a, c in zip(
        first.body.state_dict().values(), other.body.state_dict().values(), strict=True))
    assert meta['algorithm'].startswith('DAgger') and meta['rounds_log'][0]['level'] == 0.0


def test_dagger_fine_tunes_a_policy_from_its_weights_at_the_full_ranges() -> None:
    """With ``init_policy`` DAgger starts from that policy's weights and input
    standardisation, at full curriculum level, and the card names it by sha256."""
    tuned, meta = train_pick(replace(TINY, init_policy=str(SHIPPED), updates=1),
                             log=lambda _: None)
    shipped = torch.jit.load(str(SHIPPED)).state_dict()
    assert torch.equal(tuned.state_dict()['input_mean'], shipped['input_mean'])
    assert not torch.equal(tuned.state_dict()['body.0.weight'], shipped['body.0.weight'])
    assert meta['rounds_log'][0]['level'] == 1.0 and meta['algorithm'].endswith('fine-tuned')
    assert meta['init_policy']['sha256'] == file_sha256(SHIPPED)


@pytest.mark.ros_free
@pytest.mark.parametrize(('options', 'history'), [((), 3), (('--in-flight',), 7)])
def test_the_cli_exports_policies_and_cards_the_node_loads(
        tmp_path: Path, options: tuple[str, ...], history: int) -> None:
    """An in-flight policy's card observes 7 frames (its last actions), the others 3."""
    stem = tmp_path / 'pick'
    result = subprocess.run(
        [str(REPO / '.venv/bin/simops-train'), '--task', 'pick_place', '--rounds', '1',
         '--episodes', '2', '--updates', '30', '--eval-episodes', '2', '--workers', '1',
         '--out', str(stem), *options], capture_output=True, text=True, timeout=600,
        cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    card = yaml.safe_load(stem.with_suffix('.yaml').read_text())
    assert card['observation']['history'] == history and card['action']['gripper'] is True
    assert (card['training']['in_flight'] is None) == (history == 3)
    env = FR3PickPlaceEnv(card_path=stem.with_suffix('.yaml'))
    script = load_policy(stem.with_suffix('.pt'), env.card)
    exported = load_policy(stem.with_suffix('.pt2'), FR3PickPlaceEnv(
        card_path=stem.with_name('pick.pt2.yaml')).card)
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(script.infer(obs), exported.infer(obs), atol=1e-5)


def test_an_in_flight_policy_is_fine_tuned_as_one_and_a_plain_one_as_plain(
        tmp_path: Path) -> None:
    """A fine-tune keeps its init policy's inputs (and card); the dataset path, which
    cannot label the last actions, refuses an in-flight policy in one line."""
    first, _ = train_pick(replace(TINY, in_flight=True), log=lambda _: None)
    assert isinstance(first, InFlightPolicy) and first.history == 7
    path = tmp_path / 'in_flight.pt'
    torch.jit.save(torch.jit.script(first.eval()), str(path))
    tuned, meta = train_pick(replace(TINY, init_policy=str(path), updates=1),
                             log=lambda _: None)
    assert isinstance(tuned, InFlightPolicy) and meta['in_flight']['history'] == 7
    with pytest.raises(InitPolicyError, match='reads its last actions'):
        start_policy(FR3PickPlaceEnv(), TINY, path)
    plain, meta = train_pick(replace(TINY, init_policy=str(SHIPPED), updates=1),
                             log=lambda _: None)
    assert not isinstance(plain, InFlightPolicy) and plain.history == 3
    assert meta['in_flight'] is None


@pytest.mark.parametrize(('in_flight', 'placed'), [(False, 0), (True, 3)])
def test_the_expert_places_the_cube_under_6_periods_of_delay_only_acting_for_its_commands(
        in_flight: bool, placed: int) -> None:
    """At 6 control periods (300 ms) of command delay, the grasp expert stepping from the
    measured joints rings and fails every episode; stepping from where the commands in
    flight take the arm (the label of an in-flight policy) it places every cube."""
    env = FR3PickPlaceEnv(conditions=Conditions(delay=6), history=7)
    expert = PickExpert(new_policy(env, TINY).law, TINY.gains)
    successes = 0
    for seed in range(3):
        env.reset(seed=seed)
        while True:
            action, _ = expert_action(expert, env, in_flight=in_flight)
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes += bool(info['is_success'])
    assert successes == placed


def test_the_shipped_policy_places_the_cube_on_a_hard_cell() -> None:
    """Slippery, heavy, three periods of delay: one of the gate's extreme cells."""
    env = FR3PickPlaceEnv(card_path=SHIPPED.with_suffix('.yaml'),
                          conditions=Conditions(friction=0.3, object_mass=2.0, delay=3))
    model = load_policy(SHIPPED, env.card)
    placed = []
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        while True:
            obs, _, terminated, truncated, info = env.step(model.infer(obs))
            if terminated or truncated:
                break
        placed.append(info['is_success'] and not info['unsafe'])
    assert sum(placed) >= 4, placed


def shipped_policy() -> torch.nn.Module:
    policy = new_policy(FR3PickPlaceEnv(), PickTrainConfig())
    policy.load_state_dict(torch.jit.load(str(SHIPPED)).state_dict())
    return policy


def test_ppo_fine_tunes_the_shipped_network_with_rsl_rl_reproducibly() -> None:
    """RSL-RL's runner trains the policy's own network (weights in and out), seeded."""
    small = PPOConfig(num_envs=2, num_steps_per_env=16, num_mini_batches=2, critic_warmup=1)
    ranges = default_randomization('pick_place')
    before = shipped_policy()
    tuned = [shipped_policy(), shipped_policy()]
    for policy in tuned:
        fine_tune(policy, 2, ranges, (256, 256), seed=3, config=small, log=lambda _: None)
    changed = [not torch.equal(a, b) for a, b in zip(
        before.body.state_dict().values(), tuned[0].body.state_dict().values(), strict=True)]
    assert any(changed)
    for a, b in zip(tuned[0].state_dict().values(), tuned[1].state_dict().values(),
                    strict=True):
        assert torch.equal(a, b)


def test_the_decision_env_applies_the_policys_law_and_resets_episodes() -> None:
    policy = shipped_policy()
    env = DecisionEnv(policy, 2, default_randomization('pick_place'), seed=0)
    obs = env.get_observations()['policy']
    assert obs.shape == (2, 15)
    dones = 0
    for _ in range(210):                       # past the 200-step limit: every env resets
        with torch.no_grad():
            decision = policy.head(obs * policy.input_std + policy.input_mean)
        out, rewards, done, extras = env.step(decision)
        obs = out['policy']
        dones += int(done.sum())
        assert rewards.shape == (2,) and set(extras) == {'time_outs', 'log'}
    assert dones >= 2 and len(env.successes) == dones
    assert np.mean(env.successes) >= 0.5, env.successes


def test_scenario_episodes_are_labelled_on_the_true_cube_pose() -> None:
    """With ``scenarios``, a share of a round's episodes play one (drawn from the seed
    alone); in them the expert labels on the cube's true pose: through an object-pose
    dropout it keeps carrying the cube the observation shows frozen on the table."""
    config = replace(TINY, scenarios=('object_pose_dropout',), scenario_share=0.5)
    drawn = [episode_scenario(config, seed) is not None for seed in range(400)]
    assert abs(np.mean(drawn) - 0.5) < 0.07
    assert drawn == [episode_scenario(config, seed) is not None for seed in range(400)]
    assert episode_scenario(TINY, 0) is None
    env = FR3PickPlaceEnv()
    expert = PickExpert(new_policy(env, TINY).law, TINY.gains)
    env.reset(seed=0, options={'scenario': scenario('object_pose_dropout', 'pick_place')})
    seen, true, steps = [], [], 0
    while steps < 115:   # the dropout runs from 4 s (tick 80) for 2 s; the grasp near 100
        action, _ = expert_action(expert, env, privileged=True)
        seen.append(env.policy_step.raw.object_position.copy())
        true.append(env.object_position())
        _, _, terminated, truncated, _ = env.step(action)
        steps += 1
        assert not (terminated or truncated), steps
    assert np.array_equal(seen[112], seen[85])          # frozen in the observation
    assert true[112][2] > true[85][2] + 0.05            # lifted in truth: the expert carries it
    blind, _ = expert_action(expert, env)
    assert not np.array_equal(blind, expert_action(expert, env, privileged=True)[0])


@pytest.mark.ros_free
def test_the_cli_trains_through_scenarios_and_the_card_names_them(tmp_path: Path) -> None:
    simops_train = str(REPO / '.venv/bin/simops-train')
    stem = tmp_path / 'pick'
    result = subprocess.run(
        [simops_train, '--task', 'pick_place', '--rounds', '1', '--episodes', '2',
         '--updates', '5', '--eval-episodes', '1', '--workers', '1', '--scenarios',
         'object_pose_dropout', 'push_cube', '--scenario-share', '1', '--out', str(stem)],
        capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    card = yaml.safe_load(stem.with_suffix('.yaml').read_text())
    assert card['training']['scenarios']['names'] == ['object_pose_dropout', 'push_cube']
    assert card['training']['scenarios']['share'] == 1.0
    for args, message in ((['--scenarios', 'push_cube'], "scenario 'push_cube' is not for "
                                                         'the reach task'),
                          (['--task', 'pick_place', '--dataset', str(tmp_path), '--scenarios',
                            'push_arm'], '--scenarios plays events in the expert'),
                          (['--task', 'pick_place', '--scenarios', 'nope'],
                           "has no scenario 'nope'"),
                          (['--task', 'pick_place', '--scenarios', 'push_arm',
                            '--scenario-share', '0'], '--scenario-share is a fraction')):
        refused = subprocess.run([simops_train, *args], capture_output=True, text=True,
                                 timeout=120, cwd=REPO)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_ppo_pays_the_reward_terms_and_the_card_names_them() -> None:
    small = PPOConfig(num_envs=2, num_steps_per_env=8, num_mini_batches=2, critic_warmup=1)
    terms = {'protective_stop': 10.0, 'dropped': 5.0}
    _, metadata = train_pick(replace(TINY, ppo_iterations=1, ppo=small, reward_terms=terms),
                             log=lambda _: None)
    assert metadata['ppo']['reward_terms'] == terms
    assert metadata['ppo']['num_envs'] == 2 and metadata['ppo']['iterations'] == 1


@pytest.mark.ros_free
def test_the_cli_refuses_reward_terms_without_ppo_or_with_a_bad_term(tmp_path: Path) -> None:
    simops_train = str(REPO / '.venv/bin/simops-train')
    for args, message in ((['--task', 'pick_place', '--reward-terms', 'dropped=5'],
                           '--reward-terms shape the reward PPO fine-tunes on'),
                          (['--reward-terms', 'dropped=5', '--ppo-iterations', '2'],
                           '--reward-terms shape the reward PPO fine-tunes on'),
                          (['--task', 'pick_place', '--ppo-iterations', '2', '--reward-terms',
                            'fault=5'], "reward term 'fault' is not one of")):
        refused = subprocess.run([simops_train, *args, '--out', str(tmp_path / 'p')],
                                 capture_output=True, text=True, timeout=120, cwd=REPO)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


@pytest.mark.ros_free
def test_the_cli_refuses_in_flight_where_it_cannot_train_one(tmp_path: Path) -> None:
    """--in-flight: a new pick-and-place policy, from the expert (not a fine-tune, nor a
    dataset's frames, which hold no last actions); one line, exit 2."""
    simops_train = str(REPO / '.venv/bin/simops-train')
    for args, message in ((['--in-flight'], '--in-flight trains a pick_place policy'),
                          (['--task', 'pick_place', '--in-flight', '--init-policy',
                            str(SHIPPED)], '--in-flight trains a new policy'),
                          (['--task', 'pick_place', '--in-flight', '--dataset',
                            str(tmp_path)], 'which a --dataset\'s frames do not hold')):
        refused = subprocess.run([simops_train, *args, '--out', str(tmp_path / 'p')],
                                 capture_output=True, text=True, timeout=120, cwd=REPO)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


@pytest.mark.ros_free
def test_simops_train_imports_rsl_rl_only_to_run_ppo() -> None:
    """Reading simops-train's options and configuration leaves RSL-RL unimported."""
    code = ('import sys, simops_learning.train; '
            'print(sorted(m for m in sys.modules if m.split(".")[0] in {"rsl_rl", "tensordict"}))')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '[]', result.stdout
