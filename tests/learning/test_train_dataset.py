"""simops-train --dataset: behaviour cloning from LeRobot datasets, read by LeRobot's loader.

Episodes come from rosbags' own writer (tests/dataset_helpers.py) through simops-dataset
export with the pick-and-place card; the labels are compared to what was written.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from dataset_helpers import TWIST_TICKS, gripper_command, operator_twist, write_episode
from ros_helpers import REPO, installed_executable

from simops_core.robot_spec import gripper_width, load_robot_spec
from simops_learning.dataset_train import (
    CheckpointChoice,
    DatasetTrainConfig,
    expert_frames,
    fit_decisions,
    selects_checkpoint,
    step_error,
)
from simops_learning.demonstrations import (
    Demonstrations,
    commanded_deltas,
    gripper_commands,
    read_demonstrations,
)
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_network import MOVE_UNIT
from simops_learning.pick_train import PickTrainConfig, Rollouts, new_policy
from simops_learning.seeding import seeded_torch

CARD = REPO / 'models/policy/fr3_pick_place.yaml'
PERIOD = 0.05   # s, the policies' control period


def run(exe: str, *args: object, cache: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({'HF_HOME': str(cache)} if cache else {})}
    return subprocess.run([str(installed_executable('simops_learning', exe)), *map(str, args)],
                          capture_output=True, text=True, timeout=600, check=False, env=env)


def exported(tmp_path: Path, name: str, **episode: object) -> Path:
    write_episode(tmp_path / f'{name}.bag', **episode)
    result = run('simops-dataset', 'export', tmp_path / f'{name}.bag', '--card', CARD,
                 '--out', tmp_path / name)
    assert result.returncode == 0, result.stderr
    return tmp_path / name


def tree_sha256(root: Path) -> str:
    """The documented dataset hash, written out here: relative path, NUL, bytes, in order."""
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob('*') if p.is_file()):
        digest.update(file.relative_to(root).as_posix().encode() + b'\0' + file.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope='module')
def law() -> object:
    env = FR3PickPlaceEnv()
    return new_policy(env, PickTrainConfig()).law


def test_a_demonstration_is_labelled_by_its_operator_twist(tmp_path: Path, law: object) -> None:
    root = exported(tmp_path, 'teleop', teleop=True)
    demo = read_demonstrations(root, load_robot_spec('fr3'), law, PERIOD, tmp_path / 'hf')
    frame_t = np.arange(len(demo.raw)) * PERIOD   # frames on the 20 fps grid from t = 0
    # each frame's twist is the one in force before the next frame (the export's rule)
    ticks = TWIST_TICKS[np.searchsorted(TWIST_TICKS, frame_t + PERIOD) - 1]
    truth = np.array([operator_twist(t)[:3] for t in ticks]) * PERIOD / MOVE_UNIT
    assert np.allclose(demo.decisions[:, :3], truth, rtol=1e-6, atol=1e-7)
    assert np.all(np.isnan(demo.arm[np.isfinite(demo.decisions[:, 0])]))
    # the hand's width sent to franka_gripper (not the fingers, which never move): at rest
    # open on the first frame, closing from the second, then shut
    widths = np.array([gripper_command(t) for t in ticks])
    assert widths[0] > 0.04 and np.all(np.diff(widths[:9]) < 0) and widths[-1] == 0.0
    assert demo.decisions[0, 3] == 1.0 and np.all(demo.decisions[1:, 3] == -1.0)
    assert demo.entry['episodes'] == 1 and demo.entry['frames'] == len(demo.raw)
    assert demo.entry['frames_from_twist'] == np.isfinite(demo.decisions[:, 0]).sum() > 50
    assert np.array_equal(demo.twist, np.isfinite(demo.decisions[:, 0]))
    assert demo.entry['sha256'] == tree_sha256(root)


def test_a_policy_episode_is_labelled_by_the_policy_output(tmp_path: Path, law: object) -> None:
    root = exported(tmp_path, 'policy')
    failed = exported(tmp_path, 'failed', success='false')
    demo = read_demonstrations(root, load_robot_spec('fr3'), law, PERIOD, tmp_path / 'hf')
    table = pq.read_table(sorted((root / 'data').glob('chunk-*/file-*.parquet')))
    policy = np.array(table.column('policy.action').to_pylist())
    assert np.array_equal(demo.arm, policy[:, :7].astype(np.float32))
    assert np.array_equal(demo.decisions[:, 3], policy[:, 7].astype(np.float32))
    assert np.all(np.isnan(demo.decisions[:, :3]))   # no twist: the move is learnt as deltas
    assert not demo.twist.any()
    left = read_demonstrations(failed, load_robot_spec('fr3'), law, PERIOD, tmp_path / 'hf')
    assert left.entry['episodes'] == 0 and left.entry['episodes_failed_left_out'] == 1


def test_commanded_targets_label_the_delta_since_the_last_command() -> None:
    q = np.zeros((4, 18))
    q[:, :7] = 0.1
    targets = np.full((4, 8), np.nan)
    targets[0, :7], targets[1, :7], targets[3, :7] = 0.12, 0.15, 0.3
    episode = np.array([0, 0, 0, 1])
    out = commanded_deltas(q, targets, None, episode, scale=0.05, period=0.05, fps=20.0)
    assert np.allclose(out[0], (0.12 - 0.1) / 0.05)    # first frame: from the measured q
    assert np.allclose(out[1], (0.15 - 0.12) / 0.05)   # then from the previous targets
    assert np.all(np.isnan(out[2]))                   # no targets: no label
    assert np.allclose(out[3], (0.3 - 0.1) / 0.05)     # a new episode starts from its q
    at_40 = commanded_deltas(q, targets, None, episode, scale=0.05, period=0.05, fps=40.0)
    assert np.allclose(at_40[1], 2 * out[1])          # per control period, not per frame


def test_the_fingers_reveal_a_gripper_command_held_while_they_rest() -> None:
    spec = load_robot_spec('fr3')
    opening = np.array([0.08, 0.08, 0.08, 0.07, 0.05, 0.03, 0.03, 0.03, 0.03, 0.05, 0.08,
                        0.08])
    episode = np.zeros(opening.size, dtype=int)
    none = np.full((opening.size, 0), np.nan)
    out = gripper_commands(opening, none, None, episode, spec, fps=20.0)   # 4 frames ahead
    assert list(out) == [-1.0] * 5 + [1.0] * 7   # closing seen 4 frames ahead, then opening
    width = np.full((opening.size, 8), np.nan)
    width[:, 7] = spec.gripper.width_max
    assert np.all(gripper_commands(opening, width, None, episode, spec, fps=20.0) == 1.0)


def test_a_twist_at_the_cap_is_learnt_as_a_lower_bound() -> None:
    """Beyond the cap along the label's direction costs nothing; short of it or across it
    costs the shortfall or the sideways part, squared; other rows keep the squared error."""
    target = torch.tensor([[0.3, 0.0, 0.0], [0.3, 0.0, 0.0], [0.0, 0.4, 0.0], [0.1, 0.0, 0.0]])
    decision = torch.tensor([[0.5, 0.0, 0.0], [0.1, 0.0, 0.0], [0.05, 0.5, 0.0],
                             [0.5, 0.0, 0.0]])
    bounded = torch.tensor([True, True, True, False])
    error = step_error(decision, target, bounded, 0.2)
    assert torch.allclose(error.sum(dim=1), torch.tensor([0.0, 0.1 ** 2, 0.05 ** 2, 0.4 ** 2]))
    plain = step_error(decision, target, torch.zeros(4, dtype=torch.bool), 0.2)
    assert torch.equal(plain, (decision - target) ** 2)


def test_a_commanded_width_labels_the_gripper_by_the_way_it_moves() -> None:
    """A width ramped by the safety pipeline says the command from its first step, not
    once it crosses the middle of the range; at rest, open above the middle."""
    spec = load_robot_spec('fr3')
    grip = spec.gripper
    top, step = grip.width_max, grip.speed_max * 0.05   # one 20 Hz period of the hand
    widths = [top, top, top - step, top - 2 * step, top - 3 * step, top - 3 * step,
              top - 2 * step, top, top, 0.01, 0.01]
    episode = np.array([0] * 9 + [1] * 2)   # a new episode starts at rest, closed
    action = np.full((len(widths), 8), np.nan)
    action[:, 7] = widths
    opening = np.full(len(widths), top)
    out = gripper_commands(opening, action, None, episode, spec, fps=20.0)
    assert list(out) == [1.0, 1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0]
    # the width at rest mid-range after closing (above the middle): open, as before
    assert top - 3 * step > 0.5 * (grip.width_min + grip.width_max)


def test_only_an_operator_twist_at_the_cap_is_a_lower_bound() -> None:
    """The same long step label is a lower bound from a twist and exact from anything else
    (the expert's states in co-training): a network that overshoots it costs nothing in
    the first case only."""
    env = FR3PickPlaceEnv()
    config = PickTrainConfig(updates=1, batch=64, learning_rate=0.0)
    policy = new_policy(env, config)
    frames = np.tile(np.r_[env.spec_robot.home, 0.5, 0.0, 0.025, 0, 0, 0, 1, 0.5, 0.3, 0.1,
                           0.08].astype(np.float32), (4, 1))
    with torch.no_grad():
        decision = policy.head(policy.features(torch.as_tensor(frames))[0])[0]
    label = decision.numpy().copy()
    label[:3] *= 0.5   # half what the network outputs, in its direction: it overshoots
    decisions = np.tile(label.astype(np.float32), (4, 1))
    arm = np.full((4, 7), np.nan, np.float32)
    cap = float(np.linalg.norm(label[:3]))
    losses = [fit_decisions(policy, [Demonstrations(frames, decisions, arm, {}, twist)], [1.0],
                            config, seeded_torch(0), normalize=False, turn=False,
                            at_least=cap)
              for twist in (np.ones(4, dtype=bool), np.zeros(4, dtype=bool), None)]
    assert losses[0] == pytest.approx(0.0, abs=1e-10)
    assert losses[1] == losses[2] > 1e-6


def test_a_policy_reads_the_quantities_the_env_observed() -> None:
    """PickPolicy.quantities: what co-training reads from the expert's states, compared
    with the env's own raw observation of the same step."""
    env = FR3PickPlaceEnv()
    policy = new_policy(env, PickTrainConfig())
    obs, _ = env.reset(seed=3, options={'level': 1.0})
    for _ in range(5):
        obs, *_ = env.step(np.zeros(8))
    raw = env.policy_step.raw
    truth = np.r_[raw.joint_position[:7], raw.object_position, raw.object_quaternion,
                  raw.goal_position, gripper_width(raw.joint_position[7:])]
    read = policy.quantities(torch.as_tensor(obs)[None])[0].numpy()
    assert np.allclose(read, truth, atol=1e-5), np.abs(read - truth).max()
    label = np.float32([[0.1, 0.0, -0.2, 1.0]])
    frames = expert_frames(policy, [Rollouts(obs[None].astype(np.float32), label, [True])] * 2)
    assert np.array_equal(frames.raw, np.stack([read, read]).astype(np.float32))
    assert np.array_equal(frames.decisions, np.concatenate([label, label]))
    assert np.all(np.isnan(frames.arm)) and frames.twist is None   # exact, never bounds


@pytest.mark.parametrize('updates, selection, rounds, selects', [
    (20000, 20, 0, True), (20000, 20, 3, False), (20000, 0, 0, False), (5000, 20, 0, False)])
def test_only_a_fit_on_datasets_alone_keeps_its_best_checkpoint(
        updates: int, selection: int, rounds: int, selects: bool) -> None:
    """The docs' rule: co-training keeps its last round's network, as DAgger does."""
    config = DatasetTrainConfig((Path('d'),), (1.0,), selection_episodes=selection,
                                expert_rounds=rounds, pick=PickTrainConfig(updates=updates))
    assert selects_checkpoint(config) is selects


def test_the_checkpoint_that_scores_best_is_kept_the_later_on_a_tie() -> None:
    net = torch.nn.Linear(2, 1)
    scores = iter([0.5, 0.8, 0.8, 0.6])
    choice = CheckpointChoice(net, lambda: next(scores), log=lambda line: None)
    for updates in (5, 10, 15, 20):
        with torch.no_grad():
            net.weight.fill_(updates)
        choice(updates)
    choice.restore()
    assert choice.kept == 15 and net.weight[0, 0].item() == 15.0
    assert choice.scores == {5: 0.5, 10: 0.8, 15: 0.8, 20: 0.6}


def test_the_fit_offers_a_checkpoint_every_so_many_updates_and_its_last() -> None:
    env = FR3PickPlaceEnv()
    config = PickTrainConfig(updates=25, batch=8)
    policy = new_policy(env, config)
    frames = np.tile(np.r_[env.spec_robot.home, 0.5, 0.0, 0.025, 0, 0, 0, 1, 0.5, 0.3, 0.1,
                           0.08].astype(np.float32), (4, 1))
    decisions = np.tile(np.float32([0.1, 0.0, -0.1, 1.0]), (4, 1))
    demos = Demonstrations(frames, decisions, np.full((4, 7), np.nan, np.float32), {})
    offered: list[int] = []
    fit_decisions(policy, [demos], [1.0], config, seeded_torch(0), normalize=True,
                  checkpoint=offered.append, every=10)
    assert offered == [10, 20, 25]


def test_simops_train_clones_a_dataset_and_its_card_names_it(tmp_path: Path) -> None:
    root = exported(tmp_path, 'teleop', teleop=True)
    result = run('simops-train', '--task', 'pick_place', '--dataset', root, '--updates', 50,
                 '--eval-episodes', 1, '--workers', 1, '--out', tmp_path / 'bc',
                 cache=tmp_path / 'hf')
    assert result.returncode == 0, result.stderr
    card = yaml.safe_load((tmp_path / 'bc.yaml').read_text())
    entry, = card['training']['datasets']
    assert entry['sha256'] == tree_sha256(root) and entry['path'] == str(root)
    assert entry['episodes'] == 1 and entry['weight'] == 1.0
    assert card['training']['init_policy'] is None
    assert card['training']['augmentation'] == 'scene turned about the vertical'
    assert card['training']['checkpoint_selection'] is None   # 50 updates: one checkpoint
    assert card['task'] == 'pick_place'
    assert card['training']['expert_rounds'] is None


def test_simops_train_co_trains_with_the_expert_and_its_card_says_so(tmp_path: Path) -> None:
    root = exported(tmp_path, 'teleop', teleop=True)
    result = run('simops-train', '--task', 'pick_place', '--dataset', root, '--weight', 0.25,
                 '--expert-rounds', 2, '--expert-weight', 0.75, '--episodes', 1, '--updates',
                 20, '--eval-episodes', 1, '--workers', 1, '--out', tmp_path / 'co',
                 cache=tmp_path / 'hf')
    assert result.returncode == 0, result.stderr
    assert result.stdout.count('expert round ') == 2, result.stdout
    training = yaml.safe_load((tmp_path / 'co.yaml').read_text())['training']
    assert training['datasets'][0]['weight'] == 0.25 and training['updates'] == 20
    rounds = training['expert_rounds']
    assert rounds['rounds'] == 2 and rounds['episodes_per_round'] == 1
    assert rounds['weight'] == 0.75 and [r['round'] for r in rounds['rounds_log']] == [1, 2]
    # every round adds the states of its episode to the ones before
    assert 0 < rounds['rounds_log'][0]['states'] < rounds['rounds_log'][1]['states']
    assert 'co-trained with the grasp expert' in training['algorithm']


@pytest.mark.parametrize('args, message', [
    (('--task', 'reach', '--dataset', '{root}'), 'add --task pick_place'),
    (('--task', 'pick_place', '--dataset', '{root}', '--weight', '1', '--weight', '2'),
     'one positive --weight per --dataset'),
    (('--task', 'pick_place', '--weight', '2'), 'goes with --dataset'),
    (('--task', 'pick_place', '--dataset', '{root}', '--select-episodes', '-1'),
     '--select-episodes is a count'),
    (('--task', 'reach', '--init-policy', '{card}'), 'add --task pick_place'),
    (('--task', 'pick_place', '--init-policy', '{card}'), 'not a TorchScript policy'),
    (('--task', 'pick_place', '--expert-rounds', '2'), '--expert-rounds goes with --dataset'),
    (('--task', 'pick_place', '--dataset', '{root}', '--expert-rounds', '1', '--expert-weight',
      '0'), '--expert-weight positive'),
    (('--task', 'pick_place', '--dataset', '{tmp}/absent'), 'no such dataset'),
    (('--task', 'pick_place', '--dataset', '{tmp}'), 'not a LeRobot dataset'),
    (('--task', 'pick_place', '--dataset', '{root}', '--init-policy', '{card}'),
     'not a TorchScript policy'),
    (('--task', 'pick_place', '--dataset', '{root}', '--rounds', '2'),
     'with --dataset the expert\'s rounds are --expert-rounds'),
    (('--task', 'pick_place', '--dataset', '{root}', '--ppo-iterations', '2'),
     'a --dataset is cloned'),
    (('--task', 'pick_place', '--dataset', '{root}', '--scenarios', 'estop'),
     'a --dataset is cloned as recorded'),
])
def test_bad_datasets_get_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...],
                                              message: str) -> None:
    root = tmp_path / 'ds'
    if '{root}' in args:
        root = exported(tmp_path, 'ds', teleop=True)
    filled = [a.format(root=root, tmp=tmp_path, card=CARD) for a in args]
    result = run('simops-train', *filled, '--updates', 5, '--eval-episodes', 1, '--workers',
                 1, '--out', tmp_path / 'out', cache=tmp_path / 'hf')
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('simops-train: error: '), result.stderr
    assert message in lines[0] and 'Traceback' not in result.stderr
    assert not (tmp_path / 'out.pt').exists()
