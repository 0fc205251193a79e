"""The recorder node end to end: real recorder and publisher processes over DDS."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from bag_helpers import load_trajectory
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy
from recorder_helpers import (
    check_bag_metadata,
    check_joint_states,
    check_streams,
    episodes,
    foxglove_counts,
    metadata,
    output,
    published_counts,
    read,
    start_publisher,
    start_recorder,
    trigger,
)
from ros_helpers import NodeProcess, RosProbe, installed_executable, wait_until
from std_msgs.msg import String

from simops_core.robot_spec import load_robot_spec


def test_episode_services_labels_and_metadata(ros_probe: RosProbe, tmp_path: Path) -> None:
    root = tmp_path / 'episodes'
    params = (tmp_path / 'sim_params.yaml')
    params.write_text('friction: [0.1]\n')
    info = ros_probe.publisher('/recorder/episode_info', String)
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'compression:=zstd',
                        'robot_mode:=real', 'policy_sha256:=abc123',
                        f'sim_params_file:={params}', 'allow_unvalidated:=true') as rec, \
         start_publisher(tmp_path / 'pub.log', '--duration', '6') as pub:
        assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
        assert wait_until(lambda: output(rec).count('subscribed to') >= 5, 30), output(rec)
        # A label published before discovery matched the recorder would be lost (volatile).
        assert wait_until(lambda: info.get_subscription_count() > 0, 30)
        info.publish(String(data=json.dumps({'label': 'pick cube'})))
        time.sleep(0.3)
        started = trigger(ros_probe, '/recorder/start')
        assert started.success, started.message
        assert not trigger(ros_probe, '/recorder/start').success  # one episode at a time
        time.sleep(1.5)
        info.publish(String(data='{"success": true, "notes": "clean grasp"}'))
        info.publish(String(data='not json'))  # ignored with a warning
        time.sleep(0.3)
        stopped = trigger(ros_probe, '/recorder/stop')
        assert stopped.success and stopped.message == started.message
        assert not trigger(ros_probe, '/recorder/stop').success
        info.publish(String(data='{"label": "place"}'))
        time.sleep(0.3)
        assert trigger(ros_probe, '/recorder/start').success
        time.sleep(1.0)
        assert trigger(ros_probe, '/recorder/stop').success
        assert pub.wait(30) == 0, output(pub)
        assert rec.stop() == 0, output(rec)
    assert 'ignored episode_info' in output(rec)

    first, second = episodes(root)
    assert first.name.endswith('_pick-cube') and second.name.endswith('_place')
    assert Path(started.message) == first
    data = metadata(first)['custom_data']
    assert data['simops.label'] == 'pick cube'
    assert data['simops.success'] == 'true' and data['simops.notes'] == 'clean grasp'
    assert data['simops.robot'] == 'fr3' and data['simops.mode'] == 'real'
    assert data['simops.policy_sha256'] == 'abc123'
    assert data['simops.allow_unvalidated'] == 'true'   # the override, in every bag
    assert len(data['simops.sim_params_sha256']) == 64
    assert data['simops.start_time'] < data['simops.stop_time']
    assert data['simops.end_reason'] == 'stopped'
    assert data['simops.messages_lost'] == '0'
    assert metadata(second)['custom_data']['simops.success'] == ''

    for bag_dir in (first, second):
        bag = read(bag_dir)  # counts equal metadata.yaml, or read raises
        counts = json.loads(metadata(bag_dir)['custom_data']['simops.message_counts'])
        assert counts == {name: info.count for name, info in bag.info().items()}
        ks = check_streams(bag)  # exactly what was sent, no gap inside the episode
        custom = metadata(bag_dir)['custom_data']
        duration = (datetime.fromisoformat(custom['simops.stop_time'])
                    - datetime.fromisoformat(custom['simops.start_time'])).total_seconds()
        assert 0.5 * duration * 1000 < ks['/joint_states'].size < 1.5 * duration * 1000 + 100
        fox = foxglove_counts(bag_dir)  # independent decoder, same messages
        for topic, values in ks.items():
            assert fox[topic] == list(values)
        assert not (bag_dir / 'episode.journal.json').exists()
    # The latched goal, published before the episode, starts both episodes.
    assert read(first).info()['/goal_pose'].count == read(second).info()['/goal_pose'].count == 1


def test_stop_keeps_every_message_delivered_before_it(ros_probe: RosProbe,
                                                      tmp_path: Path) -> None:
    """A burst published just before /recorder/stop is in the bag, up to the last message.

    The recorder takes queued messages every 10 ms; a stop between two takes must take what
    DDS has delivered before it closes the bag (the probe's data reach the recorder's
    participant before its later service request).
    """
    root = tmp_path / 'episodes'
    burst = 500
    poses = ros_probe.publisher('/ee_pose', PoseStamped,
                                QoSProfile(depth=burst, reliability=ReliabilityPolicy.RELIABLE))
    with start_recorder(tmp_path / 'rec.log', f'root:={root}') as rec:
        assert wait_until(lambda: 'subscribed to /ee_pose' in output(rec), 30), output(rec)
        assert trigger(ros_probe, '/recorder/start').success
        time.sleep(0.5)
        for k in range(burst):
            msg = PoseStamped()
            msg.pose.position.x = float(k)
            poses.publish(msg)
        assert trigger(ros_probe, '/recorder/stop').success
        assert rec.stop() == 0, output(rec)
    (bag_dir,) = episodes(root)
    xs = [msg.pose.position.x for msg in read(bag_dir).decode('/ee_pose')]
    np.testing.assert_array_equal(xs, np.arange(burst))


def test_sqlite3_split_sigterm_and_trajectory(tmp_path: Path) -> None:
    root = tmp_path / 'episodes'
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=continuous',
                        'storage:=sqlite3', 'split_duration:=1.0') as rec:
        with start_publisher(tmp_path / 'pub.log', '--duration', '3.5') as pub:
            assert pub.wait(60) == 0, output(pub)
        rec.proc.send_signal(signal.SIGTERM)
        assert rec.wait(20) == 0, output(rec)
    (bag_dir,) = episodes(root)
    meta = metadata(bag_dir)
    check_bag_metadata(meta, bag_dir)  # rosbag2's format, field by field
    assert meta['storage_identifier'] == 'sqlite3'
    assert len(meta['relative_file_paths']) >= 3
    assert sorted(meta['relative_file_paths']) == sorted(p.name for p in bag_dir.glob('*.db3'))
    bag = read(bag_dir)
    sent = published_counts(output(pub))
    for topic, count in sent.items():  # continuous mode: every published message
        assert bag.info()[topic].count == count, (topic, bag.info()[topic], count)
    ks = check_streams(bag)
    assert ks['/joint_states'][0] == 0
    assert meta['custom_data']['simops.end_reason'] == 'shutdown'

    spec = load_robot_spec('fr3')
    traj = load_trajectory(bag_dir, spec.joint_names)
    assert traj.joint_states.position.shape == (sent['/joint_states'], 9)
    np.testing.assert_array_equal(traj.joint_states.position[:, 0], np.arange(3500))
    assert np.all(np.diff(traj.joint_states.t) > 0)
    assert traj.commands is not None and traj.commands.position.shape == (70, 9)
    assert np.isnan(traj.commands.position[:, 8]).all()  # 8 values: 7 arm + gripper
    assert set(traj.poses) == {'/object_pose', '/ee_pose', '/goal_pose'}
    assert traj.poses['/ee_pose'].position.shape == (350, 3)
    aligned = traj.on_joint_state_times()
    assert aligned['command'].shape == aligned['q'].shape == (3500, 9)
    # The command in force at joint sample k is the latest one sent before it (20 vs 1000 Hz).
    sample = 2000
    held = aligned['command'][sample, 0]
    assert held <= sample / 50 and sample / 50 - held <= 2
    ee_x = aligned['/ee_pose/position'][sample, 0]
    assert abs(ee_x - sample / 10) <= 2  # 100 Hz pose k at joint sample 10 k


@pytest.mark.parametrize('split', [True, False], ids=['split', 'unsplit'])
@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_sigkill_loses_at_most_the_last_second(tmp_path: Path, storage: str,
                                               split: bool) -> None:
    root = tmp_path / 'episodes'
    splitting = ('split_duration:=2.0',) if split else ()
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=continuous',
                        f'storage:={storage}', *splitting) as rec, \
         start_publisher(tmp_path / 'pub.log', '--duration', '8') as pub:
        assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
        time.sleep(4.3)
        killed_at = time.time()
        os.killpg(rec.proc.pid, signal.SIGKILL)
        rec.wait(10)
        pub.stop()
    (bag_dir,) = episodes(root)
    assert not (bag_dir / 'metadata.yaml').exists()
    with NodeProcess.ros2_run('simops_recorder', 'repair', str(bag_dir),
                              log_path=tmp_path / 'repair.log') as repair:
        assert repair.wait(60) == 0, output(repair)
    assert 'repaired' in output(repair)
    bag = read(bag_dir)
    js = check_joint_states(bag)
    assert js[0, 0] == 0
    if storage == 'mcap':   # each publisher's send time, as rosbag2 Jazzy keeps it, repaired
        for raw in bag.topics.values():
            delivery = np.subtract(raw.log_time, raw.publish_time)
            assert np.all(delivery >= 0) and np.any(delivery > 0), raw.name
            assert np.median(delivery) < 5e7, (raw.name, np.median(delivery))   # ns
    lost = killed_at - js[-1, 1]
    assert 0 <= lost <= 1.0, f'last message {lost:.3f} s before the kill'
    meta = metadata(bag_dir)
    check_bag_metadata(meta, bag_dir)
    assert meta['storage_identifier'] == storage
    assert len(meta['files']) >= 2 if split else len(meta['files']) == 1   # splits kept
    data = meta['custom_data']
    assert data['simops.repaired'] == 'true' and data['simops.end_reason'] == 'crashed'
    assert data['simops.label'] == 'episode'
    assert (root / f'.{bag_dir.name}.damaged').is_dir()
    # A second run finds nothing to do.
    with NodeProcess.ros2_run('simops_recorder', 'repair', str(bag_dir),
                              log_path=tmp_path / 'repair2.log') as again:
        assert again.wait(60) == 0 and 'nothing to repair' in output(again)


def test_unwritable_root_is_a_clean_error(tmp_path: Path) -> None:
    blocker = tmp_path / 'file'
    blocker.write_text('')
    for root in (blocker / 'episodes', Path('/proc/simops_episodes')):
        with start_recorder(tmp_path / 'rec.log', f'root:={root}') as rec:
            assert rec.wait(30) == 2
        lines = output(rec).strip().splitlines()
        assert lines[-1].startswith(f"record: error: root '{root}' cannot be created")
        assert 'root:=' in lines[-1] and 'Traceback' not in output(rec)


def test_full_disk_closes_the_episode_and_keeps_earlier_ones(ros_probe: RosProbe,
                                                             tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes writes past 2 MB fail with EFBIG, as a full disk fails them."""
    root = tmp_path / 'episodes'
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'flush_period:=0.2',
                        prefix=('prlimit', '--fsize=2000000')) as rec, \
         start_publisher(tmp_path / 'pub.log', '--duration', '14', '--joint-states-only') as pub:
        assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
        assert trigger(ros_probe, '/recorder/start').success
        time.sleep(1.0)
        assert trigger(ros_probe, '/recorder/stop').success
        assert trigger(ros_probe, '/recorder/start').success
        assert wait_until(lambda: 'stopped: writing' in output(rec), 20), output(rec)
        assert not trigger(ros_probe, '/recorder/stop').success  # already closed
        assert rec.proc.poll() is None  # still running, ready for the next episode
        assert rec.stop() == 0
        pub.stop()
    first, second = episodes(root)
    check_joint_states(read(first))
    assert metadata(first)['custom_data']['simops.end_reason'] == 'stopped'
    assert 'File too large' in output(rec) and 'repair' in output(rec)
    assert not (second / 'metadata.yaml').exists()


def test_auto_mode_records_while_running_and_late_topics(ros_probe: RosProbe,
                                                          tmp_path: Path) -> None:
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    root = tmp_path / 'episodes'
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    state = ros_probe.publisher('/policy/state', String, latched)
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=auto',
                        'auto_stop_grace:=0.3', 'auto_min_duration:=0.5') as rec:
        state.publish(String(data='DISABLED'))
        # Joint states start after the recorder: it subscribes late, best effort as offered.
        with start_publisher(tmp_path / 'pub.log', '--duration', '4', '--best-effort',
                             '--joint-states-only') as pub:
            assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
            # The late topic is recorded from when the recorder discovers it, and RUNNING
            # reaches it once it has discovered this probe: on Jazzy either can take about 3 s
            # after the recorder starts (DDS discovery), so RUNNING starts once both have.
            assert wait_until(lambda: all(f'subscribed to {topic}' in output(rec)
                                          for topic in ('/joint_states', '/policy/state')),
                              30), output(rec)
            time.sleep(0.5)
            state.publish(String(data='RUNNING'))
            time.sleep(1.5)
            state.publish(String(data='HOLD'))
            assert pub.wait(30) == 0
        assert wait_until(lambda: 'episode stopped' in output(rec), 10), output(rec)
        assert rec.stop() == 0
    assert 'subscribed to /joint_states (sensor_msgs/msg/JointState, best_effort' in output(rec)
    (bag_dir,) = episodes(root)
    bag = read(bag_dir)
    assert bag.info()['/policy/state'].count >= 1
    # ~1.5 s of RUNNING at 1 kHz, then 0.3 s of grace
    assert 700 < bag.info()['/joint_states'].count < 2300
    assert metadata(bag_dir)['custom_data']['simops.end_reason'] == 'policy HOLD'
    qos = metadata(bag_dir)['topics_with_message_count']
    offered = {t['topic_metadata']['name']: t['topic_metadata']['offered_qos_profiles']
               for t in qos}
    assert 'reliability: 2' in offered['/joint_states']  # best effort, as published


@pytest.mark.parametrize(('param', 'value'), [('storage', 'rosbag'), ('mode', 'sometimes'),
                                              ('flush_period', '5.0'),
                                              ('robot_mode', 'hardware'),
                                              ('auto_stop_grace', '-1.0'),
                                              ('root', '5'), ('flush_period', 'soon'),
                                              ('topics', 'true'), ('split_size', '0.5')])
def test_bad_parameters_exit_2(tmp_path: Path, param: str, value: str) -> None:
    with start_recorder(tmp_path / 'rec.log', f'root:={tmp_path}', f'{param}:={value}') as rec:
        assert rec.wait(30) == 2
    lines = output(rec).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'record: error: parameter {param} is ')
    assert 'Traceback' not in output(rec)


@pytest.mark.parametrize(('files', 'code', 'words'), [
    ({'garbage.mcap': 'random'}, 3, 'not a mcap bag'),
    ({'garbage.db3': 'random'}, 3, 'unreadable'),
    ({'notes.txt': 'hello'}, 3, 'no .mcap or .db3'),
    ({'a.mcap': 'random', 'b.db3': 'random'}, 3, 'mixes storage formats'),
])
@pytest.mark.ros_free
def test_repair_refuses_what_is_not_a_bag_and_leaves_it_untouched(
        tmp_path: Path, files: dict[str, str], code: int, words: str) -> None:
    bag = tmp_path / 'garbage'
    bag.mkdir()
    rng = np.random.default_rng(7)
    for name, kind in files.items():
        (bag / name).write_bytes(rng.bytes(4096) if kind == 'random' else kind.encode())
    before = {p.name: p.read_bytes() for p in bag.iterdir()}
    result = subprocess.run([str(installed_executable('simops_recorder', 'repair')), str(bag)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('repair: error: ') and words in lines[0]
    assert {p.name: p.read_bytes() for p in bag.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ['garbage']   # nothing staged


@pytest.mark.ros_free
def test_repair_help_and_usage() -> None:
    executable = str(installed_executable('simops_recorder', 'repair'))
    shown = subprocess.run([executable, '--help'], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and 'exit codes' in shown.stdout
    missing = subprocess.run([executable, '/nonexistent/bag'], capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 2 and missing.stderr.count('\n') == 1
