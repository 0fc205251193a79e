"""DDS smoke test: the PyPI rclpy wheels exchange JointState between real processes."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

from ros_helpers import REPO, NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import JointState

from simops_core.dds_isolation import (
    PROFILE_VARIABLES,
    claim_domain_id,
    fast_dds_major,
    isolated_env,
)


def test_session_is_isolated(ros_env: dict[str, str]) -> None:
    assert ros_env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert 1 <= int(ros_env['ROS_DOMAIN_ID']) <= 100
    assert Path(ros_env[PROFILE_VARIABLES[fast_dds_major(ros_env)]]).is_file()


def udp_sockets(pid: int) -> list[tuple[str, int]]:
    """The IPv4 UDP sockets process ``pid`` holds: (address, port), from proc(5)'s
    /proc/<pid>/fd links and /proc/net/udp (local_address is hex, the address little-endian)."""
    fds = Path(f'/proc/{pid}/fd')
    inodes = set()
    for fd in fds.iterdir():
        try:
            link = os.readlink(fd)
        except OSError:   # closed meanwhile
            continue
        if link.startswith('socket:['):
            inodes.add(link[8:-1])
    found = []
    for line in Path(f'/proc/{pid}/net/udp').read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            address, port = fields[1].split(':')
            found.append((socket.inet_ntoa(struct.pack('<I', int(address, 16))), int(port, 16)))
    return found


def test_fast_dds_binds_the_domains_ports_to_loopback_only(ros_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    """The loopback profile is loaded, under the variable this distro's Fast DDS reads: a
    node's sockets on its domain's ports (RTPS: 7400 + 250 * domain, 250 of them) listen on
    127.0.0.1 only (without the profile they listen on 0.0.0.0)."""
    first = 7400 + 250 * int(ros_env['ROS_DOMAIN_ID'])
    with NodeProcess.python(REPO / 'tests/procs/joint_state_echo.py',
                            log_path=tmp_path / 'echo.log') as echo:
        def domain_sockets() -> list[tuple[str, int]]:
            return [(a, p) for a, p in udp_sockets(echo.proc.pid) if first <= p < first + 250]

        assert wait_until(lambda: len(domain_sockets()) >= 2, 20), echo.output
        assert {address for address, _ in domain_sockets()} == {'127.0.0.1'}, domain_sockets()


def test_domain_claims_are_exclusive(tmp_path: Path) -> None:
    first = claim_domain_id(lock_dir=tmp_path, seed=1)
    second = claim_domain_id(lock_dir=tmp_path, seed=1)  # same order: must skip the first
    try:
        assert first.domain_id != second.domain_id
    finally:
        first.release()
        second.release()
    again = claim_domain_id(lock_dir=tmp_path, seed=1)
    assert again.domain_id == first.domain_id
    again.release()


def test_isolated_env_overrides_caller() -> None:
    env = isolated_env(42, {'ROS_DOMAIN_ID': '0', 'ROS_LOCALHOST_ONLY': '1',
                            'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'})
    assert env['ROS_DOMAIN_ID'] == '42'
    assert env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert 'ROS_LOCALHOST_ONLY' not in env


def test_joint_state_round_trip_between_processes(ros_probe: RosProbe, tmp_path: Path) -> None:
    ros_probe.subscribe('/test/joint_states_out', JointState)
    pub = ros_probe.publisher('/test/joint_states_in', JointState)
    sent = JointState(name=[f'fr3_joint{i}' for i in range(1, 8)],
                      position=[0.1 * i for i in range(7)],
                      velocity=[0.01 * i for i in range(7)], effort=[1.0] * 7)
    sent.header.frame_id = 'fr3_link0'
    with NodeProcess.python(REPO / 'tests/procs/joint_state_echo.py',
                            log_path=tmp_path / 'echo.log') as echo:
        # Publish until the echo process has discovered us and answered.
        def answered() -> bool:
            pub.publish(sent)
            return bool(ros_probe.messages('/test/joint_states_out'))

        assert wait_until(answered, timeout=20, interval=0.1), echo.output
        got = ros_probe.messages('/test/joint_states_out')[0]
        assert echo.proc.pid != os.getpid()
        assert list(got.name) == list(sent.name)
        assert list(got.position) == [p + 1.0 for p in sent.position]
        assert list(got.velocity) == list(sent.velocity)
        assert got.header.frame_id == 'fr3_link0'
        time.sleep(0.1)
        assert echo.stop() == 0, echo.output


def test_timed_events_thread_is_batch(ros_probe: RosProbe) -> None:
    """The loopback profile's ``timed_events_thread``: every participant's ``dds.ev.*``
    thread runs SCHED_BATCH, on Kilted's Fast DDS 3 and Jazzy's 2.14 alike."""
    threads = {int(task.name): (task / 'comm').read_text().strip()
               for task in Path(f'/proc/{os.getpid()}/task').iterdir()}
    events = [tid for tid, name in threads.items() if name.startswith('dds.ev')]
    assert events, f'no Fast DDS timed-events thread among {sorted(set(threads.values()))}'
    assert {os.sched_getscheduler(tid) for tid in events} == {os.SCHED_BATCH}
