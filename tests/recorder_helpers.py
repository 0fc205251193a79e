"""Helpers for recorder tests: start the recorder and the publisher, check recorded streams.

The publisher (tests/procs/trajectory_publisher.py) puts its message counter k into every
message; :func:`check_joint_states` and friends verify a bag holds an unbroken run of k with
exactly the content that was sent.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from ros_helpers import REPO, NodeProcess, RosProbe, installed_executable, wait_until
from std_srvs.srv import Trigger

from simops_core.bag_reader import RawBag, read_bag
from simops_core.robot_spec import load_robot_spec

HASH = re.compile(r'^RIHS01_[0-9a-f]{64}$')
DURATION_KEYS = {'sec', 'nsec'}
QOS_INT_KEYS = ('history', 'depth', 'reliability', 'durability', 'liveliness')


def check_bag_metadata(info: dict, bag: Path | None) -> None:
    """Assert ``info`` decodes as rosbag2 BagMetadata version 8.

    The rules and the rosbag2 sources they come from are listed in
    tests/recorder/test_recorder_metadata.py.
    """
    assert info['version'] == 8
    assert info['storage_identifier'] in ('mcap', 'sqlite3')
    assert isinstance(info['duration']['nanoseconds'], int)
    assert 0 <= info['starting_time']['nanoseconds_since_epoch'] < 2**63
    topics = info['topics_with_message_count']
    assert info['message_count'] == sum(t['message_count'] for t in topics)
    for entry in topics:
        meta = entry['topic_metadata']
        assert set(meta) == {'name', 'type', 'serialization_format', 'offered_qos_profiles',
                             'type_description_hash'}
        assert meta['name'].startswith('/') and meta['type'].count('/') == 2
        assert meta['serialization_format'] == 'cdr'
        assert isinstance(meta['offered_qos_profiles'], str)  # a YAML string up to v8
        assert HASH.match(meta['type_description_hash'])
        profiles = yaml.safe_load(meta['offered_qos_profiles'])
        assert isinstance(profiles, list) and profiles, meta['name']
        for qos in profiles:
            for key in QOS_INT_KEYS:
                assert type(qos[key]) is int, (meta['name'], key, qos[key])
            for key in ('deadline', 'lifespan', 'liveliness_lease_duration'):
                assert set(qos[key]) == DURATION_KEYS
                assert all(type(v) is int and v >= 0 for v in qos[key].values())
            assert type(qos['avoid_ros_namespace_conventions']) is bool
    assert info['compression_format'] == '' and info['compression_mode'] == ''
    files = info['files']
    assert info['relative_file_paths'] == [f['path'] for f in files]
    assert sum(f['message_count'] for f in files) == info['message_count']
    for entry in files:
        assert set(entry) == {'path', 'starting_time', 'duration', 'message_count'}
        assert isinstance(entry['starting_time']['nanoseconds_since_epoch'], int)
        assert isinstance(entry['duration']['nanoseconds'], int)
        if bag is not None:
            assert (bag / entry['path']).is_file()
    assert all(isinstance(k, str) and isinstance(v, str)
               for k, v in info['custom_data'].items())
    assert isinstance(info['ros_distro'], str)


PUBLISHER = REPO / 'tests' / 'procs' / 'trajectory_publisher.py'
JOINTS = load_robot_spec('fr3').joint_names
JOINT_OFFSETS = np.arange(len(JOINTS)) / 16


def start_recorder(log: Path, *params: str, prefix: tuple[str, ...] = ()) -> NodeProcess:
    """``ros2 run simops_recorder record --ros-args -p a:=b ...``; wait until it is up.

    ``prefix`` runs the installed executable under a wrapper such as ``prlimit``.
    """
    args: list[str] = []
    for param in params:
        args += ['-p', param]
    executable = installed_executable('simops_recorder', 'record')
    proc = NodeProcess([*prefix, str(executable), '--ros-args', *args], log)
    assert wait_until(lambda: 'recording' in proc.output or proc.proc.poll() is not None,
                      timeout=30), proc.output
    return proc


def start_publisher(log: Path, *args: str) -> NodeProcess:
    """Start the deterministic publisher; see tests/procs/trajectory_publisher.py."""
    return NodeProcess.python(PUBLISHER, *args, log_path=log)


def published_counts(output: str) -> dict[str, int]:
    """``published <topic> <count>`` lines of the publisher's output."""
    return {m[1]: int(m[2]) for m in re.finditer(r'^published (\S+) (\d+)$', output, re.M)}


def trigger(probe: RosProbe, service: str, timeout: float = 10.0) -> Trigger.Response:
    """Call a std_srvs/Trigger service and return its response."""
    client = probe.node.create_client(Trigger, service)
    assert client.wait_for_service(timeout_sec=timeout), f'{service} not available'
    future = client.call_async(Trigger.Request())
    assert wait_until(future.done, timeout), f'{service} did not answer'
    return future.result()


def episodes(root: Path) -> list[Path]:
    """Episode bag directories under ``root``, oldest first."""
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith('.'))


def metadata(bag: Path) -> dict:
    """The parsed rosbag2_bagfile_information of ``bag``."""
    return yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']


def check_joint_states(bag: RawBag, topic: str = '/joint_states') -> np.ndarray:
    """Assert every JointState is exactly what the publisher sent for an unbroken run of k.

    Returns the counters k (consecutive integers) and the header stamps in s, shape (N, 2).
    """
    ks, stamps = [], []
    for msg in bag.decode(topic):
        k = msg.position[0]
        assert list(msg.name) == list(JOINTS)
        np.testing.assert_array_equal(msg.position, k + JOINT_OFFSETS)
        np.testing.assert_array_equal(msg.velocity, -k - JOINT_OFFSETS)
        np.testing.assert_array_equal(msg.effort, np.arange(len(JOINTS)) - k)
        ks.append(k)
        stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
    ks_array = np.asarray(ks)
    assert ks_array.size, f'no messages on {topic}'
    missing = np.flatnonzero(np.diff(ks_array) != 1)
    assert not missing.size, f'{topic}: k jumps at {[(ks[i], ks[i + 1]) for i in missing[:5]]}'
    return np.column_stack([ks_array, stamps])


def check_streams(bag: RawBag) -> dict[str, np.ndarray]:
    """Check joint states, commands and poses (unbroken k, exact content); return the ks."""
    out = {'/joint_states': check_joint_states(bag)[:, 0]}
    if '/joint_commands' in bag.topics:
        ks = [m.data[0] for m in bag.decode('/joint_commands')]
        for k, msg in zip(ks, bag.decode('/joint_commands'), strict=True):
            np.testing.assert_array_equal(msg.data, k + np.arange(8) / 16)
        out['/joint_commands'] = np.asarray(ks)
    for topic in ('/object_pose', '/ee_pose'):
        if topic in bag.topics:
            ks = []
            for msg in bag.decode(topic):
                k = msg.pose.position.x
                assert (msg.pose.position.y, msg.pose.position.z) == (k / 2, k / 4)
                assert msg.header.frame_id == 'fr3_link0'
                ks.append(k)
            out[topic] = np.asarray(ks)
    for topic, ks in out.items():
        assert np.all(np.diff(ks) == 1), f'{topic}: not an unbroken run of k'
    return out


def foxglove_counts(bag: Path) -> dict[str, list]:
    """Decode every MCAP file of ``bag`` with Foxglove's mcap + mcap-ros2-support reader.

    Returns per topic the decoded messages' key values (JointState position[0], pose x,
    command data[0], or the string data), in log-time order per file.
    """
    out: dict[str, list] = {}
    for name in metadata(bag)['relative_file_paths']:
        with (bag / name).open('rb') as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _, channel, _, msg in reader.iter_decoded_messages():
                if hasattr(msg, 'position') and hasattr(msg, 'velocity'):
                    value = msg.position[0]
                elif hasattr(msg, 'pose'):
                    value = msg.pose.position.x
                elif hasattr(msg, 'layout'):
                    value = msg.data[0]
                else:
                    value = getattr(msg, 'data', None)
                out.setdefault(channel.topic, []).append(value)
    return out


def read(bag: Path) -> RawBag:
    """The bag through SimOps' reader (counts checked against metadata.yaml)."""
    return read_bag(bag)


def output(proc: NodeProcess) -> str:
    """Everything ``proc`` printed, also after it was stopped."""
    return proc.log_path.read_text(errors='replace')
