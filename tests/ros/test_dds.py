"""DDS smoke test: the PyPI rclpy wheels exchange JointState between real processes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ros_helpers import REPO, NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import JointState

from simops_core.dds_isolation import claim_domain_id, isolated_env
from simops_ros.rclpy_compat import DISTRO


def test_session_is_isolated(ros_env: dict[str, str]) -> None:
    assert ros_env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'
    assert 1 <= int(ros_env['ROS_DOMAIN_ID']) <= 100
    assert Path(ros_env['FASTDDS_DEFAULT_PROFILES_FILE']).is_file()


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
    """The loopback profile's ``timed_events_thread``: SCHED_BATCH where Fast DDS applies it.

    Kilted's Fast DDS 3 applies it to every participant's ``dds.ev.*`` thread; Jazzy's 2.14
    parses the profile (the session above still uses it) and leaves the thread as it was.
    """
    threads = {int(task.name): (task / 'comm').read_text().strip()
               for task in Path(f'/proc/{os.getpid()}/task').iterdir()}
    events = [tid for tid, name in threads.items() if name.startswith('dds.ev')]
    assert events, f'no Fast DDS timed-events thread among {sorted(set(threads.values()))}'
    expected = os.SCHED_BATCH if DISTRO == 'kilted' else os.SCHED_OTHER
    assert {os.sched_getscheduler(tid) for tid in events} == {expected}
