"""The SpaceMouse front end: spacenav's Joy layout, its missing-device lines, and a device
lost mid-motion braking the arm through the real teleop node."""

from __future__ import annotations

import ctypes.util
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from easyhid import HIDException
from geometry_msgs.msg import PoseStamped, TwistStamped
from policy_helpers import call_enable
from ros_helpers import NodeProcess, RosProbe, installed_executable, wait_until
from sensor_msgs.msg import Joy
from sim_helpers import braked, hand, hand_at_rest, qos, servoed, start_sim, topic, until_refused

from simops_teleop.spacemouse_axes import BUTTONS, joy_fields
from simops_teleop.spacemouse_teleop import stream

PERIOD = 0.02   # s: the front end's default 50 Hz


@dataclass
class State:
    """pyspacemouse's SpaceMouseState, the fields the front end reads."""

    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    roll: float = 0.0
    pitch: float = 0.0
    yaw: float = 0.0
    buttons: list[int] = field(default_factory=lambda: [0, 0])


class Device:
    """A SpaceMouse held at ``state`` for ``reads`` reads, then unplugged (its read fails).

    Counted in reads, not on the wall clock: the stream paces them, so however late its
    thread starts, or stalls, the device is held for ``reads`` periods.
    """

    def __init__(self, state: State, reads: int) -> None:
        self.state, self.left = state, reads

    def read(self) -> State:
        if self.left == 0:
            raise HIDException('Failed to read from HID device: -1')
        self.left -= 1
        return self.state


def test_joy_fields_are_spacenavs_layout() -> None:
    axes, buttons = joy_fields(State(0.5, -0.25, 1.7, 0.1, -3.0, 0.0, [1]))
    assert axes == [0.5, -0.25, 1.0, 0.1, -1.0, 0.0]   # within [-1, 1], spacenav's order
    assert buttons == [1, 0] and len(buttons) == BUTTONS   # a missing button is released
    assert joy_fields(State(buttons=[0, 1, 1]))[1] == [0, 1, 1]


def test_a_lost_device_sends_released_axes_once_and_says_why() -> None:
    """Five reads, then the device is gone: five held samples, one period apart at least
    (a sleep only ever runs long), then released axes once, and why."""
    held = State(x=0.5, buttons=[1, 0])
    reads = iter([held] * 5)

    def read() -> State:
        state = next(reads, None)
        if state is None:
            raise HIDException('Failed to read from HID device: -1')
        return state

    sent: list[tuple[list[float], list[int]]] = []
    began = time.monotonic()
    why = stream(read, lambda a, b: sent.append((a, b)), PERIOD, (HIDException,))
    assert time.monotonic() - began >= 5 * PERIOD
    assert why == 'Failed to read from HID device: -1'
    assert sent == [([0.5] + [0.0] * 5, [1, 0])] * 5 + [([0.0] * 6, [0, 0])]


def test_without_a_device_it_says_so_in_one_line() -> None:
    """No hidapi on the machine: exit 2 naming the package; hidapi but no device: exit 3."""
    run = subprocess.run([str(installed_executable('simops_teleop',
                                                   'simops-teleop-spacemouse'))],
                         capture_output=True, text=True, timeout=60)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('simops-teleop-spacemouse: error:'), run
    if ctypes.util.find_library('hidapi-hidraw') is None:
        assert run.returncode == 2 and 'libhidapi-hidraw0' in lines[0]
    else:
        assert run.returncode == 3 and 'no SpaceMouse found' in lines[0]


@pytest.mark.parametrize('rate', ['5', '2000'])
def test_a_rate_the_teleop_node_cannot_use_is_refused(rate: str) -> None:
    run = subprocess.run([str(installed_executable('simops_teleop',
                                                   'simops-teleop-spacemouse')), '--rate', rate],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run


def test_the_spacemouse_drives_the_arm_and_unplugging_it_brakes(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """The front end's stream, over DDS, into the teleop node set up as teleop:=spacemouse.

    Nothing here is timed against the wall clock: the node's side of the stream is up when
    it refuses a malformed Joy (its publisher matching the node's reader says nothing of the
    reader matching it), the push is measured between two rests, and how long the node
    servoed it on the node's own stamps.
    """
    ee = topic('ee_pose').name
    ros_probe.subscribe(ee, PoseStamped, qos('ee_pose'))
    ros_probe.subscribe(topic('operator_twist').name, TwistStamped, qos('operator_twist'))
    joys = ros_probe.publisher('/spacenav/joy', Joy, 10)

    sent: list[float] = []   # when each push left the test (s, the clock the node stamps on)

    def publish(axes: list[float], buttons: list[int]) -> None:
        joys.publish(Joy(axes=axes, buttons=buttons))
        if axes[0] > 0.0:
            sent.append(time.time())

    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_teleop', 'teleop', '--ros-args', '-p', 'joy_layout:=spacenav',
            '-p', 'deadman_button:=0', '-p', 'gripper_button:=1',
            '-r', '/joy:=/spacenav/joy', log_path=tmp_path / 'teleop.log') as teleop:
        assert wait_until(lambda: ros_probe.messages(ee) and joys.get_subscription_count(),
                          60), teleop.output + sim.output
        until_refused(joys, Joy(), teleop, 'does not fit joy_layout')
        assert call_enable(ros_probe, True, node='/teleop').success
        assert wait_until(lambda: 'RUNNING' in teleop.output and hand_at_rest(ros_probe), 30), \
            teleop.output
        start = hand(ros_probe)
        # the cap pushed forward by half, the left button (the dead-man) held, for 1 s
        device = Device(State(x=0.5, buttons=[1, 0]), round(1.0 / PERIOD))
        worker = threading.Thread(target=stream, args=(device.read, publish, PERIOD,
                                                       (HIDException,)))
        worker.start()
        worker.join(10.0)
        held = sent[-1] - sent[0]   # s the stream sent the push
        # the node braked on the released axes (or its input timeout), and the hand stopped
        assert wait_until(lambda: braked(ros_probe, 0), 30), teleop.output + sim.output
        push = [t for t, twist in servoed(ros_probe) if twist[0] > 0.0]
        # the released axes end it at once; 0.1 s more either way for delivery under load
        assert held - 0.1 < push[-1] - push[0] < held + 0.1, (
            f'the node servoed the push for {push[-1] - push[0]:.3f} s of the {held:.3f} s the '
            f'stream sent it ({len(push)} ticks from {push[0]:.3f}; {len(sent)} pushes sent '
            f'from {sent[0]:.3f})\n{teleop.output}')
        rest = hand(ros_probe)
        moved = rest - start
        assert moved[0] > 0.02 and np.abs(moved[1:]).max() < 0.2 * moved[0], (
            f'the hand moved {moved} m\n{teleop.output}{sim.output}')
        time.sleep(0.5)
        assert np.linalg.norm(hand(ros_probe) - rest) < 1e-3, teleop.output
        assert teleop.stop() == 0, teleop.output
        assert sim.stop() == 0, sim.output
