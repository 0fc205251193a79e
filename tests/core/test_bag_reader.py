"""The bag reader reads bags that real rosbag2 wrote, and bags that rosbags writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from bag_helpers import align, load_trajectory
from ros_helpers import REPO
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from simops_core.bag_reader import BagError, MissingTopicsError, read_bag
from simops_core.robot_spec import load_robot_spec

TESTDATA = REPO.parent / 'shared' / 'testdata' / 'rosbag2'
BAGS = ['talker_mcap', 'talker_sqlite3', 'cdr_test_mcap', 'cdr_test_sqlite3', 'split_mcap',
        'empty_sqlite3']
STORE = get_typestore(Stores.ROS2_JAZZY)


def metadata_counts(bag: Path) -> dict[str, int]:
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    return {e['topic_metadata']['name']: e['message_count']
            for e in info['topics_with_message_count']}


def test_testdata_is_present() -> None:
    assert sorted(p.name for p in TESTDATA.iterdir() if p.is_dir()) == sorted(BAGS)


@pytest.mark.parametrize('name', BAGS)
def test_reads_every_rosbag2_bag_with_metadata_counts(name: str) -> None:
    bag = read_bag(TESTDATA / name)
    assert {t: info.count for t, info in bag.info().items()} == metadata_counts(TESTDATA / name)
    for topic in bag.topics:  # every payload decodes (types from the bag where not in Jazzy)
        assert len(list(bag.decode(topic))) == bag.info()[topic].count


@pytest.mark.parametrize('name', BAGS)
def test_a_listing_counts_as_a_full_read(name: str) -> None:
    """``topics=()``: every topic listed with its count and type, no message loaded (MCAP
    files with statistics are counted from their summary, without reading the chunks)."""
    listing, full = read_bag(TESTDATA / name, topics=()), read_bag(TESTDATA / name)
    assert listing.info() == full.info()
    assert all(not t.data for t in listing.topics.values())


@pytest.mark.parametrize('name', ['talker_mcap', 'talker_sqlite3'])
def test_qos_mismatch_does_not_hide_messages(name: str) -> None:
    """rosbags' AnyReader yields nothing for these; ours yields all 20 messages."""
    with AnyReader([TESTDATA / name], default_typestore=STORE) as reader:
        assert sum(1 for _ in reader.messages()) == 0  # the trap this reader avoids
    bag = read_bag(TESTDATA / name)
    assert [m.data for m in bag.decode('/topic')][:2] == ['Hello, world! 0', 'Hello, world! 1']
    assert sum(i.count for i in bag.info().values()) == 20


def test_split_bag_reads_all_files_in_order() -> None:
    bag = read_bag(TESTDATA / 'split_mcap')
    assert sum(i.count for i in bag.info().values()) == 6074
    assert bag.storage == 'mcap'


@pytest.mark.parametrize('name', BAGS)
def test_joint_state_request_names_what_the_bag_has(name: str) -> None:
    spec = load_robot_spec('fr3')
    with pytest.raises(MissingTopicsError) as err:
        load_trajectory(TESTDATA / name, spec.joint_names)
    text = str(err.value)
    assert '/joint_states' in text
    assert str(TESTDATA / name) in text
    for topic, count in metadata_counts(TESTDATA / name).items():
        assert f'{topic} (' in text and f', {count})' in text
    assert '\n' not in text


def test_missing_metadata_and_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BagError, match='not a directory'):
        read_bag(tmp_path / 'nope')
    shutil.copytree(TESTDATA / 'talker_mcap', tmp_path / 'bag')
    (tmp_path / 'bag' / 'talker.mcap').chmod(0o644)
    (tmp_path / 'bag' / 'metadata.yaml').chmod(0o644)
    (tmp_path / 'bag' / 'talker.mcap').rename(tmp_path / 'bag' / 'other.mcap')
    with pytest.raises(BagError, match=r"\['talker.mcap'\] .* missing"):
        read_bag(tmp_path / 'bag')
    (tmp_path / 'bag' / 'metadata.yaml').unlink()
    with pytest.raises(BagError, match=r'no metadata\.yaml.*repair'):
        read_bag(tmp_path / 'bag')


def test_stale_metadata_counts_raise(tmp_path: Path) -> None:
    shutil.copytree(TESTDATA / 'talker_sqlite3', tmp_path / 'bag')
    meta = tmp_path / 'bag' / 'metadata.yaml'
    meta.chmod(0o644)
    meta.write_text(meta.read_text().replace('message_count: 10', 'message_count: 11', 1))
    with pytest.raises(BagError, match='/topic: metadata 11, storage 10'):
        read_bag(tmp_path / 'bag')


def test_each_topic_comes_in_receive_order_as_the_mcap_reader_orders_it(tmp_path: Path) -> None:
    """Messages stored out of receive order, some at the same time, over several chunks:
    each topic is the MCAP library's own time order (ties in file order) restricted to it."""
    from mcap.reader import make_reader

    rng = np.random.default_rng(3)
    times = rng.integers(0, 400, size=3000) * 1_000_000 + 1_700_000_000 * 10**9
    strings = STORE.types['std_msgs/msg/String']
    with Writer(tmp_path / 'bag', version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        topics = [writer.add_connection(f'/t{i}', 'std_msgs/msg/String', typestore=STORE)
                  for i in range(2)]
        for n, stamp in enumerate(times):
            msg = strings(data=f'{n:05d}' + 'x' * 1000)   # 3 MB: several 1 MiB chunks
            writer.write(topics[n % 2], int(stamp), STORE.serialize_cdr(msg, msg.__msgtype__))
    expected: dict[str, list[tuple[int, bytes]]] = {'/t0': [], '/t1': []}
    with next((tmp_path / 'bag').glob('*.mcap')).open('rb') as stream:
        reader = make_reader(stream)
        assert len(reader.get_summary().chunk_indexes) > 1
        for _, channel, message in reader.iter_messages(log_time_order=True):
            expected[channel.topic].append((message.log_time, bytes(message.data)))
    bag = read_bag(tmp_path / 'bag')
    for name, messages in expected.items():
        assert list(zip(bag.topics[name].log_time, map(bytes, bag.topics[name].data),
                        strict=True)) == messages
        assert bag.topics[name].publish_time == bag.topics[name].log_time


def test_joint_series_places_each_value_by_its_name_whatever_each_message_holds(
        tmp_path: Path) -> None:
    """Messages that differ in joint order, unknown names, and missing or short fields: each
    value lands in its joint's column, the rest stay NaN, rows sorted by stamp."""
    from simops_core.bag_series import joint_series

    joints = ('a', 'b', 'c')
    messages = [   # stamp ns, names, position, velocity, effort
        (3, ['a', 'b', 'c'], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], []),
        (1, ['c', 'x', 'a'], [7.0, 8.0, 9.0], [1.5], [2.5, 3.5, 4.5]),
        (2, ['a', 'b', 'c'], [10.0, 11.0, 12.0], [13.0, 14.0, 15.0], []),
        (4, ['b'], [16.0], [], [17.0]),
    ]
    nan = np.nan
    expected = {   # by stamp: 1, 2, 3, 4
        'position': [[9.0, nan, 7.0], [10.0, 11.0, 12.0], [1.0, 2.0, 3.0], [nan, 16.0, nan]],
        'velocity': [[nan, nan, 1.5], [13.0, 14.0, 15.0], [4.0, 5.0, 6.0], [nan, nan, nan]],
        'effort': [[4.5, nan, 2.5], [nan, nan, nan], [nan, nan, nan], [nan, 17.0, nan]]}
    JointState = STORE.types['sensor_msgs/msg/JointState']  # noqa: N806
    Header = STORE.types['std_msgs/msg/Header']  # noqa: N806
    Time = STORE.types['builtin_interfaces/msg/Time']  # noqa: N806
    with Writer(tmp_path / 'bag', version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        topic = writer.add_connection('/joint_states', 'sensor_msgs/msg/JointState',
                                      typestore=STORE)
        for n, (stamp, names, *fields) in enumerate(messages):
            msg = JointState(header=Header(stamp=Time(sec=10, nanosec=stamp), frame_id=''),
                             name=names, position=np.array(fields[0]),
                             velocity=np.array(fields[1]), effort=np.array(fields[2]))
            writer.write(topic, 10**10 + n, STORE.serialize_cdr(msg, msg.__msgtype__))
    series = joint_series(read_bag(tmp_path / 'bag'), '/joint_states', joints)
    assert np.allclose(series.t, 10.0 + 1e-9 * np.arange(1, 5), rtol=0, atol=1e-12)
    for key, values in expected.items():
        np.testing.assert_array_equal(getattr(series, key), np.array(values), err_msg=key)


def write_robot_bag(path: Path, storage: StoragePlugin, trajectory: bool) -> dict[str, object]:
    """A bag as `ros2 bag record` would store it: JointState in shuffled joint order."""
    spec = load_robot_spec('fr3')
    names = list(spec.joint_names)
    rng = np.random.default_rng(0)
    q = rng.normal(size=(50, 9))
    JointState = STORE.types['sensor_msgs/msg/JointState']  # noqa: N806
    Header = STORE.types['std_msgs/msg/Header']  # noqa: N806
    Time = STORE.types['builtin_interfaces/msg/Time']  # noqa: N806
    t0 = 1_700_000_000
    with Writer(path, version=8, storage_plugin=storage) as writer:
        js = writer.add_connection('/joint_states', 'sensor_msgs/msg/JointState', typestore=STORE)
        cmd_type = ('trajectory_msgs/msg/JointTrajectory' if trajectory
                    else 'std_msgs/msg/Float64MultiArray')
        cmd_topic = '/fr3_arm_controller/joint_trajectory' if trajectory else '/joint_commands'
        cmd = writer.add_connection(cmd_topic, cmd_type, typestore=STORE)
        for i in range(50):
            perm = rng.permutation(9)
            stamp = Time(sec=t0, nanosec=i * 1_000_000)
            msg = JointState(header=Header(stamp=stamp, frame_id=''),
                             name=[names[j] for j in perm], position=q[i, perm],
                             velocity=q[i, perm] * 2, effort=q[i, perm] * 3)
            writer.write(js, (t0 * 10**9) + i * 1_000_000 + 500,
                         STORE.serialize_cdr(msg, msg.__msgtype__))
            if i % 10 == 0:
                if trajectory:
                    jt = STORE.types['trajectory_msgs/msg/JointTrajectory']
                    pt = STORE.types['trajectory_msgs/msg/JointTrajectoryPoint']
                    dur = STORE.types['builtin_interfaces/msg/Duration'](sec=0, nanosec=0)
                    out = jt(header=Header(stamp=stamp, frame_id=''),
                             joint_names=names[:7][::-1],
                             points=[pt(positions=q[i, :7][::-1].copy(), velocities=np.zeros(0),
                                        accelerations=np.zeros(0), effort=np.zeros(0),
                                        time_from_start=dur)])
                else:
                    out = STORE.types['std_msgs/msg/Float64MultiArray'](
                        layout=STORE.types['std_msgs/msg/MultiArrayLayout'](dim=[],
                                                                           data_offset=0),
                        data=q[i, :7].copy())
                writer.write(cmd, (t0 * 10**9) + i * 1_000_000 + 700,
                             STORE.serialize_cdr(out, out.__msgtype__))
    return {'q': q, 't0': t0, 'names': names}


@pytest.mark.parametrize(('storage', 'trajectory'), [(StoragePlugin.MCAP, False),
                                                     (StoragePlugin.SQLITE3, True)])
def test_trajectory_arrays_by_joint_name(tmp_path: Path, storage: StoragePlugin,
                                         trajectory: bool) -> None:
    sent = write_robot_bag(tmp_path / 'bag', storage, trajectory)
    spec = load_robot_spec('fr3')
    traj = load_trajectory(tmp_path / 'bag', spec.joint_names)
    js = traj.joint_states
    assert js.joints == spec.joint_names
    np.testing.assert_array_equal(js.position, sent['q'])
    np.testing.assert_array_equal(js.velocity, sent['q'] * 2)
    np.testing.assert_array_equal(js.effort, sent['q'] * 3)
    np.testing.assert_allclose(js.t - sent['t0'], np.arange(50) * 1e-3, atol=1e-6)
    assert traj.commands is not None
    np.testing.assert_array_equal(traj.commands.position[:, :7], sent['q'][::10, :7])
    assert np.isnan(traj.commands.position[:, 7:]).all()
    # Commands with a header use its stamp; Float64MultiArray uses the receive time.
    offset = 0.0 if trajectory else 700e-9
    np.testing.assert_allclose(traj.commands.t - sent['t0'],
                               np.arange(0, 50, 10) * 1e-3 + offset, atol=1e-6)
    held = align(traj.commands.t, traj.commands.position, js.t, method='hold')
    np.testing.assert_array_equal(held[15, :7], sent['q'][10, :7])
    assert traj.poses == {}


def test_align_linear_and_hold() -> None:
    t = np.array([0.0, 1.0, 2.0])
    v = np.array([[0.0, 10.0], [1.0, 20.0], [2.0, 30.0]])
    np.testing.assert_allclose(align(t, v, np.array([0.5, 1.5])), [[0.5, 15.0], [1.5, 25.0]])
    out = align(t, v, np.array([-1.0, 0.9, 5.0]), method='hold')
    assert np.isnan(out[0]).all()
    np.testing.assert_array_equal(out[1:], [[0.0, 10.0], [2.0, 30.0]])
    assert np.isnan(align(t, v, np.array([5.0]))).all()
    with pytest.raises(ValueError, match='method'):
        align(t, v, t, method='cubic')
