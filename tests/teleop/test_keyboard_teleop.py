"""simops-teleop-keyboard in a pseudo-terminal, over real DDS.

The installed executable reads keys from a pty; a probe hears its twists on
``/teleop/delta_twist_cmds`` and answers ``/teleop/enable`` as the teleop node would.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
from pathlib import Path

import pytest
from geometry_msgs.msg import TwistStamped
from recorder_helpers import episodes, metadata, start_recorder
from ros_helpers import REPO, RosProbe, installed_executable, wait_until
from std_srvs.srv import SetBool

TWISTS = '/teleop/delta_twist_cmds'


def latest(probe: RosProbe) -> TwistStamped | None:
    messages = probe.messages(TWISTS)
    return messages[-1] if messages else None


def test_keys_drive_twists_and_enable_and_the_terminal_comes_back(
        ros_probe: RosProbe, ros_env: dict[str, str], tmp_path: Path) -> None:
    ros_probe.subscribe(TWISTS, TwistStamped, 100)
    asked: list[bool] = []

    def on_enable(request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        asked.append(request.data)
        response.success, response.message = True, 'ACTIVE' if request.data else 'DISABLED'
        return response

    hands: list[bool] = []

    def on_gripper(request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        hands.append(request.data)
        response.success, response.message = True, 'closed' if request.data else 'opened'
        return response

    with ros_probe.paused():
        ros_probe.node.create_service(SetBool, '/teleop/enable', on_enable)
        ros_probe.node.create_service(SetBool, '/teleop/gripper', on_gripper)
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(installed_executable('simops_teleop',
                                                      'simops-teleop-keyboard'))],
                            stdin=slave, stdout=slave, stderr=slave, env=ros_env, cwd=REPO)
    os.close(slave)
    output = bytearray()

    def read() -> str:
        while True:
            try:
                chunk = os.read(master, 4096) if _readable(master) else b''
            except OSError:
                chunk = b''
            if not chunk:
                return output.decode(errors='replace')
            output.extend(chunk)

    try:
        assert wait_until(lambda: 'keys: w/s' in read(), 30), read()
        assert wait_until(lambda: latest(ros_probe) is not None, 20)
        assert not any(_values(latest(ros_probe)))               # nothing held: zero
        os.write(master, b'w')
        assert wait_until(lambda: _values(latest(ros_probe))[0] > 0, 5)
        twist = latest(ros_probe)
        assert twist.header.frame_id == 'fr3_link0'
        assert _values(twist) == pytest.approx([0.05, 0, 0, 0, 0, 0])   # 0.25 x 0.2 m/s
        assert wait_until(lambda: not any(_values(latest(ros_probe))), 5)   # released
        os.write(master, b'tj')
        assert wait_until(lambda: _values(latest(ros_probe))[5] > 0, 5)
        assert latest(ros_probe).header.frame_id == 'fr3_hand_tcp'
        assert _values(latest(ros_probe))[5] == pytest.approx(0.2)      # 0.25 x 0.8 rad/s
        os.write(master, b' ')
        assert wait_until(lambda: not any(_values(latest(ros_probe))), 2)   # space: at once
        os.write(master, b'e')
        assert wait_until(lambda: 'enable: ACTIVE' in read(), 10), read()
        os.write(master, b'x')
        assert wait_until(lambda: 'disable: DISABLED' in read(), 10), read()
        assert asked == [True, False]
        os.write(master, b'g')
        assert wait_until(lambda: 'close: closed' in read(), 10), read()
        os.write(master, b'h')
        assert wait_until(lambda: 'open: opened' in read(), 10), read()
        assert hands == [True, False]
        os.write(master, b'q')
        assert proc.wait(20) == 0, read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert 'Traceback' not in output.decode(errors='replace')


def test_without_a_terminal_it_says_so_in_one_line(ros_env: dict[str, str]) -> None:
    result = subprocess.run([str(installed_executable('simops_teleop',
                                                      'simops-teleop-keyboard'))],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60, env=ros_env, cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        'simops-teleop-keyboard: error: stdin is not a terminal; run it in one (the keys are '
        'read from it)']


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0.05)[0])


def _values(twist: TwistStamped | None) -> list[float]:
    if twist is None:
        return [0.0] * 6
    linear, angular = twist.twist.linear, twist.twist.angular
    return [linear.x, linear.y, linear.z, angular.x, angular.y, angular.z]


def test_recording_keys_keep_label_and_discard_demonstrations(
        ros_env: dict[str, str], tmp_path: Path) -> None:
    """With the real recorder (source teleop, task reach): [ ] records an episode that y
    marks a success; [ then backspace moves the next one into .discarded, kept whole."""
    root = tmp_path / 'episodes'
    recorder = start_recorder(tmp_path / 'rec.log', f'root:={root}', 'source:=teleop',
                              'task:=reach')
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(installed_executable('simops_teleop',
                                                      'simops-teleop-keyboard'))],
                            stdin=slave, stdout=slave, stderr=slave, env=ros_env, cwd=REPO)
    os.close(slave)
    output = bytearray()

    def read() -> str:
        while _readable(master):
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            output.extend(chunk)
        return output.decode(errors='replace')

    try:
        assert wait_until(lambda: 'keys: w/s' in read(), 30), read()
        os.write(master, b'[')
        assert wait_until(lambda: 'record: ' in read(), 15), read()
        os.write(master, b'y')
        assert wait_until(lambda: 'marked the episode a success' in read(), 5), read()
        os.write(master, b']')
        assert wait_until(lambda: 'keep: ' in read(), 15), read()
        os.write(master, b'[')
        assert wait_until(lambda: read().count('record: ') == 2, 15), read()
        os.write(master, b'\x7f')
        assert wait_until(lambda: 'discard: ' in read(), 15), read()
        os.write(master, b'q')
        assert proc.wait(20) == 0, read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        assert recorder.stop() == 0, recorder.output
    (kept,) = episodes(root)
    data = metadata(kept)['custom_data']
    assert data['simops.source'] == 'teleop' and data['simops.task'] == 'reach'
    assert data['simops.success'] == 'true' and data['simops.end_reason'] == 'stopped'
    (discarded,) = episodes(root / '.discarded')
    assert metadata(discarded)['custom_data']['simops.end_reason'] == 'discarded'
