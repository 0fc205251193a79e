"""simops-dataset export and simops-rollout: LeRobot v3.0 datasets in the card's schema.

Bags come from rosbags' own writer (tests/dataset_helpers.py), read back through LeRobot's
own LeRobotDataset (tests/lerobot_loader.py) and pyarrow, and compared to what was written.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from dataset_helpers import (
    HOME,
    JOINTS,
    T0,
    TWIST_TICKS,
    gripper_command,
    joint_position,
    operator_twist,
    write_episode,
)
from lerobot_loader import lerobot_dataset
from ros_helpers import REPO, installed_executable

from simops_core.tasks import TASKS
from simops_learning.dataset_cli import load_card
from simops_learning.episode_schema import card_schema
from simops_learning.sim_episodes import sim_episode

CARD = REPO / 'models/policy/fr3_reach.yaml'
POLICY = REPO / 'models/policy/fr3_reach.pt'


def export(*args: object) -> subprocess.CompletedProcess[str]:
    exe = installed_executable('simops_learning', 'simops-dataset')
    return subprocess.run([str(exe), 'export', *map(str, args)], capture_output=True,
                          text=True, timeout=300, check=False)


def frames(root: Path) -> dict[str, np.ndarray]:
    table = pq.read_table(sorted((root / 'data').glob('chunk-*/file-*.parquet')))
    return {name: np.array(table.column(name).to_pylist()) for name in table.column_names}


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stderr
    assert 'Traceback' not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('simops-dataset: error: ')
    return lines[0]


def test_exported_frames_match_the_bag_at_the_frame_times(tmp_path: Path) -> None:
    written = write_episode(tmp_path / 'bag')
    result = export(tmp_path / 'bag', '--card', CARD, '--out', tmp_path / 'ds', '--task',
                    'reach')
    assert result.returncode == 0, result.stderr
    assert '0 dropped' in result.stdout and 'worst input age' in result.stdout
    data = frames(tmp_path / 'ds')
    t = data['source.joint_states.stamp'] - T0   # the sample before each frame
    frame_t = data['timestamp'].astype(float)
    assert np.allclose(np.diff(frame_t), 0.05, atol=1e-6)
    state = data['observation.state']
    truth = joint_position(frame_t)     # the grid starts at the first joint state (t = 0)
    # linear interpolation of 1 kHz samples of a sine: error below 0.2 * w^2 * dt^2 / 8
    assert np.max(np.abs(state[:, :7] - truth)) < 1e-6
    assert np.allclose(state[:, 7], 0.08)
    # float64 resolves 0.24 us at 1.7e9 s
    assert np.all(frame_t - t >= -1e-6) and np.all(frame_t - t < 0.001 + 1e-6)
    # each frame's action is the command sent right after it, exactly
    index = np.searchsorted(written.ticks, frame_t)
    assert np.array_equal(data['action'][:, :7], written.targets[index])
    assert np.all(np.isnan(data['action'][:, 7]))   # no gripper command on a topic
    assert np.array_equal(data['policy.action'][:, :7], written.targets[index] - HOME)
    assert np.allclose(data['source.command.effective'] - T0, written.ticks[index], atol=1e-6)
    assert np.allclose(data['source.command.received'] - T0, written.ticks[index] + 0.002,
                       atol=1e-6)
    assert np.allclose(data['observation.goal_position'], written.goal)
    # poses are stamped every 10 ms on the frames' own grid: the one stamped at a frame's
    # time is that frame's (a tie of float roundings is a tie), never the one 10 ms older
    assert np.allclose(data['source.object_pose.stamp'] - T0, frame_t, atol=1e-6)
    assert np.allclose(data['observation.object_position'][:, 0], 0.5 + frame_t, atol=1e-6)
    info = json.loads((tmp_path / 'ds/meta/info.json').read_text())
    assert info['codebase_version'] == 'v3.0' and info['fps'] == 20
    assert info['features']['action']['names'] == [*JOINTS, 'gripper']
    assert info['features']['observation.state']['names'] == [*JOINTS, 'gripper']
    stats = json.loads((tmp_path / 'ds/meta/stats.json').read_text())
    assert set(stats['observation.state']) >= {'mean', 'std', 'min', 'max', 'q01', 'q99'}
    assert stats['observation.state']['min'][7] == pytest.approx(0.08)
    episodes = pq.read_table(tmp_path / 'ds/meta/episodes/chunk-000/file-000.parquet')
    row = episodes.to_pylist()[0]
    assert row['success'] is True and row['outcome'] == 'operator'
    assert row['label'] == 'synthetic' and row['robot'] == 'fr3'
    assert len(row['bag_sha256']) == 64 and row['tasks'] == ['reach']
    assert np.all(np.isnan(data['operator.twist']))   # a policy's episode: no operator
    assert info['features']['operator.twist']['names'] == ['vx', 'vy', 'vz', 'wx', 'wy', 'wz']


def test_a_demonstration_exports_with_its_label_and_the_operators_twist(
        tmp_path: Path) -> None:
    """Each frame's operator.twist is the twist in force before the next frame, exactly, and
    its action's gripper entry the hand's width sent to franka_gripper (not on the
    trajectory), likewise."""
    write_episode(tmp_path / 'bag', teleop=True, success='false')
    result = export(tmp_path / 'bag', '--card', CARD, '--out', tmp_path / 'ds')
    assert result.returncode == 0, result.stderr
    data = frames(tmp_path / 'ds')
    frame_t = data['timestamp'].astype(float)
    ticks = TWIST_TICKS[np.searchsorted(TWIST_TICKS, frame_t + 0.05) - 1]
    assert np.array_equal(data['operator.twist'], np.array([operator_twist(t) for t in ticks]))
    assert np.allclose(data['source.operator_twist.stamp'] - T0, ticks, atol=1e-6)
    assert np.array_equal(data['action'][:, 7], [gripper_command(t) for t in ticks])
    assert np.all(np.isnan(data['source.gripper_command.stamp']))   # it has no header
    assert np.all(np.isnan(data['policy.action']))
    row = pq.read_table(tmp_path / 'ds/meta/episodes/chunk-000/file-000.parquet').to_pylist()[0]
    assert row['success'] is False and row['tasks'] == ['put the cube on the goal']


def test_a_pause_in_the_commands_drops_frames_and_counts_them(tmp_path: Path) -> None:
    write_episode(tmp_path / 'bag', duration=4.0, pause=(1.0, 2.0))
    result = export(tmp_path / 'bag', '--card', CARD, '--out', tmp_path / 'ds')
    assert result.returncode == 0, result.stderr
    episodes = pq.read_table(tmp_path / 'ds/meta/episodes/chunk-000/file-000.parquet')
    row = episodes.to_pylist()[0]
    report = json.loads(row['alignment'])
    # the last command before the pause took effect at 0.9505 s: a frame's action is older
    # than 0.25 s from the frame at 1.2 s on, until the one at 2.0 s has a new one: 16 dropped
    assert row['frames_dropped'] == report['dropped_by_input']['command'] == 16
    assert row['length'] == 80 - 16
    data = frames(tmp_path / 'ds')
    assert np.max(np.diff(data['timestamp'].astype(float))) == pytest.approx(0.85, abs=1e-6)
    assert np.array_equal(data['frame_index'], np.arange(row['length']))


def test_lerobot_loads_it_and_append_continues_the_indices(tmp_path: Path) -> None:
    for name in ('a', 'b', 'c'):
        write_episode(tmp_path / name, duration=2.0, success='false' if name == 'b' else 'true')
    assert export(tmp_path / 'a', tmp_path / 'b', '--card', CARD, '--out',
                  tmp_path / 'ds').returncode == 0
    result = export(tmp_path / 'c', '--card', CARD, '--out', tmp_path / 'ds', '--append',
                    '--task', 'other task')
    assert result.returncode == 0, result.stderr
    dataset = lerobot_dataset(tmp_path / 'ds', tmp_path / 'hf')
    assert dataset.num_episodes == 3 and len(dataset) == 120 and dataset.fps == 20
    assert [dataset.meta.episodes[i]['dataset_from_index'] for i in range(3)] == [0, 40, 80]
    assert [dataset.meta.episodes[i]['success'] for i in range(3)] == [True, False, True]
    item = dataset[85]
    assert int(item['episode_index']) == 2 and int(item['frame_index']) == 5
    # --task names the task of episodes whose metadata has none (else their label)
    assert item['task'] == 'other task' and tuple(item['action'].shape) == (8,)
    assert dataset[5]['task'] == 'synthetic'
    assert list(dataset.meta.tasks.index) == ['synthetic', 'other task']


@pytest.mark.parametrize(('case', 'code', 'words'), [
    ('no_joint_states', 3, 'no sensor_msgs/msg/JointState topic'),
    ('panda_joints', 3, 'joint names do not match the card'),
    ('other_robot', 3, "recorded on robot 'panda'"),
    ('too_short', 3, 'too short'),
    ('no_goal', 3, 'no messages on /goal_pose'),
    ('not_a_bag', 3, 'is not a rosbag2 directory'),
    ('bad_card', 2, "field 'sha256' is missing"),   # EXIT_CONFIG
    ('output_exists', 5, '--append'),
])
def test_bad_input_gets_one_line_and_leaves_the_output_as_it_was(
        tmp_path: Path, case: str, code: int, words: str) -> None:
    good = tmp_path / 'good'
    write_episode(good, duration=1.0)
    out = tmp_path / 'ds'
    assert export(good, '--card', CARD, '--out', out).returncode == 0
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob('*'))
    bag, card, args = tmp_path / 'bad', CARD, ['--append']
    if case == 'no_joint_states':
        bag = REPO.parent / 'shared/testdata/rosbag2/talker_mcap'
        if not bag.is_dir():
            pytest.skip('shared/testdata is not beside the checkout')
    elif case == 'panda_joints':
        write_episode(bag, joints=tuple(f'panda_joint{i}' for i in range(1, 8)), robot='')
    elif case == 'other_robot':
        write_episode(bag, robot='panda')
    elif case == 'too_short':
        write_episode(bag, duration=0.03)
    elif case == 'no_goal':
        bag = tmp_path / 'nogoal'
        _without_topic(tmp_path, bag, '/goal_pose')
    elif case == 'not_a_bag':
        bag = tmp_path / 'missing'
    elif case == 'bad_card':
        card = tmp_path / 'card.yaml'
        card.write_text('version: 1\nrobot: fr3\n')
    elif case == 'output_exists':
        bag, args = good, []
    result = export(good, bag, '--card', card, '--out', out, *args)
    assert words in one_line_error(result, code)
    after = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob('*'))
    assert after == before
    assert not list(tmp_path.glob('.ds.*'))


def _without_topic(tmp_path: Path, bag: Path, topic: str) -> None:
    """An episode bag written again without ``topic``."""
    from rosbags.rosbag2 import Reader, Writer
    source = tmp_path / 'full'
    write_episode(source, duration=1.0)
    with Reader(source) as reader, Writer(bag, version=8) as writer:
        conns = {c.id: writer.add_connection(c.topic, c.msgtype, typestore=None,
                                             msgdef=c.msgdef.data, rihs01=c.digest)
                 for c in reader.connections if c.topic != topic}
        for conn, stamp, data in reader.messages():
            if conn.id in conns:
                writer.write(conns[conn.id], stamp, data)


@pytest.mark.ros_free
def test_rollouts_round_trip_bit_for_bit_through_lerobot(tmp_path: Path) -> None:
    exe = installed_executable('simops_learning', 'simops-rollout')
    result = subprocess.run([str(exe), '--policy', str(POLICY), '--out', str(tmp_path / 'ds'),
                             '--episodes', '20', '--seed', '3', '--workers', '2'],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    assert 'episodes/s' in result.stdout
    dataset = lerobot_dataset(tmp_path / 'ds', tmp_path / 'hf')
    assert dataset.num_episodes == 20
    from simops_learning.reach_env import FR3ReachEnv
    from simops_policy.model import load_policy
    from simops_sim.randomization import default_randomization
    card, _ = load_card(CARD)
    schema = card_schema(card)
    env = FR3ReachEnv(card_path=CARD, randomization=default_randomization('randomization'))
    model = load_policy(POLICY, env.card)
    table = frames(tmp_path / 'ds')
    episodes = pq.read_table(sorted((tmp_path / 'ds/meta/episodes').rglob('*.parquet')))
    rows = sorted(episodes.to_pylist(), key=lambda r: r['episode_index'])
    for episode in (0, 7, 19):
        truth = sim_episode(env, model.infer, schema, 3, episode, {})
        mine = table['episode_index'] == episode
        for key in ('observation.state', 'observation.velocity', 'action', 'policy.action',
                    'observation.goal_position'):
            assert np.array_equal(table[key][mine], truth.columns[key]), key
        assert rows[episode]['success'] == truth.meta['success']
        assert rows[episode]['conditions'] == truth.meta['conditions']
        item = dataset[int(np.flatnonzero(mine)[3])]   # LeRobot hands out float32 tensors
        assert np.array_equal(item['action'].numpy(),
                              truth.columns['action'][3].astype(np.float32))
        assert item['task'] == TASKS['reach'].summary


@pytest.mark.ros_free
def test_the_command_lines_refuse_bad_arguments_in_one_line() -> None:
    for exe, args in (('simops-dataset', ['export', '--card', str(CARD)]),
                      ('simops-rollout', ['--out', '/tmp/x'])):
        path = installed_executable('simops_learning', exe)
        result = subprocess.run([str(path), *args], capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert sys.executable


def decoded_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a video file as (H, W, 3) uint8 RGB, decoded by PyAV."""
    import av
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format='rgb24') for frame in container.decode(video=0)]


@pytest.mark.ros_free
def test_rollouts_with_cameras_write_one_video_frame_per_row_as_rendered(
        tmp_path: Path) -> None:
    exe = installed_executable('simops_learning', 'simops-rollout')
    result = subprocess.run([str(exe), '--policy', str(POLICY), '--out', str(tmp_path / 'ds'),
                             '--episodes', '3', '--seed', '1', '--workers', '1',
                             '--cameras', 'scene,wrist'],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    root = tmp_path / 'ds'
    info = json.loads((root / 'meta/info.json').read_text())
    keys = ['observation.images.scene', 'observation.images.wrist']
    assert [k for k, f in info['features'].items() if f['dtype'] == 'video'] == keys
    dataset = lerobot_dataset(root, tmp_path / 'hf')   # LeRobot reads the video metadata
    assert list(dataset.meta.video_keys) == keys and dataset.num_episodes == 3
    table = frames(root)
    episodes = sorted(pq.read_table(sorted((root / 'meta/episodes').rglob('*.parquet')))
                      .to_pylist(), key=lambda r: r['episode_index'])
    from simops_core.camera_rig import load_cameras
    from simops_learning.reach_env import FR3ReachEnv
    from simops_policy.model import load_policy
    from simops_sim.appearance import load_appearance
    from simops_sim.randomization import default_randomization
    card, _ = load_card(CARD)
    specs = load_cameras().select(['scene', 'wrist'])
    schema = card_schema(card, tuple((s.name, s.width, s.height) for s in specs))
    env = FR3ReachEnv(card_path=CARD, randomization=default_randomization('randomization'))
    truth = sim_episode(env, load_policy(POLICY, env.card).infer, schema, 1, 2, {}, specs,
                        load_appearance())
    for row in episodes:
        length = int(np.sum(table['episode_index'] == row['episode_index']))
        for key in keys:
            video = root / info['video_path'].format(
                video_key=key, chunk_index=row[f'videos/{key}/chunk_index'],
                file_index=row[f'videos/{key}/file_index'])
            decoded = decoded_frames(video)
            assert len(decoded) == length
            if row['episode_index'] == 2:   # lossy AV1, but the same pictures
                rendered = list(truth.videos[key]())
                assert len(rendered) == length
                for k in (0, length // 2, length - 1):
                    error = np.abs(decoded[k].astype(int) - rendered[k]).mean()
                    assert error < 4.0, (key, k, error)
                assert np.abs(decoded[0].astype(int) - rendered[-1]).mean() > error
