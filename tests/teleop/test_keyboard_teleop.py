"""simops-teleop-keyboard in a pseudo-terminal, over real DDS.

The installed executable reads keys from a pty; a probe hears its twists on
``/teleop/delta_twist_cmds`` and answers ``/teleop/enable`` and ``/teleop/gripper`` as the
teleop node would; the real recorder takes the recording keys.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from geometry_msgs.msg import TwistStamped
from recorder_helpers import episodes, metadata, start_recorder
from ros_helpers import REPO, RosProbe, installed_executable, wait_until
from std_srvs.srv import SetBool

TWISTS = '/teleop/delta_twist_cmds'


class Terminal:
    """The keyboard front end running in a pseudo-terminal: type keys, read its screen."""

    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            [str(installed_executable('simops_teleop', 'simops-teleop-keyboard'))],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO)
        os.close(slave)
        self._output = bytearray()

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def read(self) -> str:
        """Everything it printed so far."""
        while select.select([self.master], [], [], 0.05)[0]:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self._output.extend(chunk)
        return self._output.decode(errors='replace')

    def shows(self, text: str, timeout: float = 10.0) -> bool:
        return wait_until(lambda: text in self.read(), timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@contextmanager
def terminal(env: dict[str, str]) -> Iterator[Terminal]:
    term = Terminal(env)
    try:
        assert term.shows('keys: w/s', 30), term.read()
        yield term
    finally:
        screen = term.read()
        term.close()
    assert 'Traceback' not in screen


def latest(probe: RosProbe) -> TwistStamped | None:
    messages = probe.messages(TWISTS)
    return messages[-1] if messages else None


def answering(calls: list[bool], yes: str, no: str) -> object:
    """A SetBool server callback that records each request and answers ``yes`` or ``no``."""
    def on_call(request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        calls.append(request.data)
        response.success, response.message = True, yes if request.data else no
        return response
    return on_call


def test_keys_drive_twists_enable_and_the_hand(ros_probe: RosProbe,
                                               ros_env: dict[str, str]) -> None:
    ros_probe.subscribe(TWISTS, TwistStamped, 100)
    asked: list[bool] = []
    hands: list[bool] = []
    with ros_probe.paused():
        ros_probe.node.create_service(SetBool, '/teleop/enable',
                                      answering(asked, 'ACTIVE', 'DISABLED'))
        ros_probe.node.create_service(SetBool, '/teleop/gripper',
                                      answering(hands, 'closed', 'opened'))
    with terminal(ros_env) as term:
        assert wait_until(lambda: latest(ros_probe) is not None, 20)
        assert not any(_values(latest(ros_probe)))               # nothing held: zero
        term.type(b'w')
        assert wait_until(lambda: _values(latest(ros_probe))[0] > 0, 5)
        twist = latest(ros_probe)
        assert twist.header.frame_id == 'fr3_link0'
        assert _values(twist) == pytest.approx([0.05, 0, 0, 0, 0, 0])   # 0.25 x 0.2 m/s
        assert wait_until(lambda: not any(_values(latest(ros_probe))), 5)   # released
        term.type(b'tj')
        assert wait_until(lambda: _values(latest(ros_probe))[5] > 0, 5)
        assert latest(ros_probe).header.frame_id == 'fr3_hand_tcp'
        assert _values(latest(ros_probe))[5] == pytest.approx(0.2)      # 0.25 x 0.8 rad/s
        term.type(b' ')
        assert wait_until(lambda: not any(_values(latest(ros_probe))), 2)   # space: at once
        for key, line in ((b'e', 'enable: ACTIVE'), (b'x', 'disable: DISABLED'),
                          (b'g', 'close: closed'), (b'h', 'open: opened')):
            term.type(key)
            assert term.shows(line), term.read()
        assert asked == [True, False] and hands == [True, False]
        term.type(b'q')
        assert term.proc.wait(20) == 0, term.read()


def test_without_a_terminal_it_says_so_in_one_line(ros_env: dict[str, str]) -> None:
    result = subprocess.run([str(installed_executable('simops_teleop',
                                                      'simops-teleop-keyboard'))],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60, env=ros_env, cwd=REPO)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        'simops-teleop-keyboard: error: stdin is not a terminal; run it in one (the keys are '
        'read from it)']


def test_recording_keys_keep_label_and_discard_demonstrations(
        ros_env: dict[str, str], tmp_path: Path) -> None:
    """With the real recorder (source teleop, task reach): [ ] records an episode that y
    marks a success; [ then backspace moves the next one into .discarded, kept whole."""
    root = tmp_path / 'episodes'
    recorder = start_recorder(tmp_path / 'rec.log', f'root:={root}', 'source:=teleop',
                              'task:=reach')
    try:
        with terminal(ros_env) as term:
            for key, line in ((b'[', 'record: '), (b'y', 'marked the episode a success'),
                              (b']', 'keep: ')):
                term.type(key)
                assert term.shows(line, 15), term.read()
            term.type(b'[')
            assert wait_until(lambda: term.read().count('record: ') == 2, 15), term.read()
            term.type(b'\x7f')
            assert term.shows('discard: ', 15), term.read()
            term.type(b'q')
            assert term.proc.wait(20) == 0, term.read()
    finally:
        assert recorder.stop() == 0, recorder.output
    (kept,) = episodes(root)
    data = metadata(kept)['custom_data']
    assert data['simops.source'] == 'teleop' and data['simops.task'] == 'reach'
    assert data['simops.success'] == 'true' and data['simops.end_reason'] == 'stopped'
    (discarded,) = episodes(root / '.discarded')
    assert metadata(discarded)['custom_data']['simops.end_reason'] == 'discarded'


def _values(twist: TwistStamped | None) -> list[float]:
    if twist is None:
        return [0.0] * 6
    linear, angular = twist.twist.linear, twist.twist.angular
    return [linear.x, linear.y, linear.z, angular.x, angular.y, angular.z]
