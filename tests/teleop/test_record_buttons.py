"""Joystick buttons drive the recorder: the rule, and a gamepad over DDS recording a
labelled demonstration, then discarding one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from ros_helpers import NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import Joy
from sim_helpers import start_sim

from simops_bringup.arguments import TELEOP_DEVICES
from simops_core.command_line import ConfigError
from simops_teleop.record_buttons import parse_record_buttons, presses

PAD = TELEOP_DEVICES['gamepad']
RESERVED = {'deadman_button': 4, 'gripper_button': 0}


def test_the_pads_buttons_parse_and_fire_once_per_press() -> None:
    mapping = parse_record_buttons(PAD['record_buttons'], RESERVED)
    assert mapping == {7: 'record', 6: 'keep', 1: 'discard', 3: 'success', 2: 'failure'}
    held = [0, 0, 0, 0, 0, 0, 0, 1]
    assert presses(mapping, [], held) == ['record']
    assert presses(mapping, held, held) == []          # held: no second start
    assert presses(mapping, held, [0, 1, 0, 1]) == ['discard', 'success']
    assert presses(mapping, [], [1, 0]) == []          # a short message: nothing beyond it


@pytest.mark.parametrize(('pairs', 'message'), [
    (['start=7'], "'start=7' must be ACTION=BUTTON"),
    (['record=x'], "'record=x' must be ACTION=BUTTON"),
    (['record=7', 'record=8'], 'record is given twice'),
    (['keep=7', 'discard=7'], "button 7 of discard is keep's already"),
    (['success=4'], "button 4 of success is deadman_button's already"),
])
def test_a_bad_pair_is_one_line(pairs: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_record_buttons(pairs, RESERVED)
    assert '\n' not in str(caught.value)


def test_a_gamepad_records_labels_keeps_and_discards(ros_probe: RosProbe,
                                                     tmp_path: Path) -> None:
    root = tmp_path / 'episodes'
    joys = ros_probe.publisher('/joy', Joy, 10)

    def press(button: int) -> None:
        buttons = [0] * 11
        for pressed in (1, 0):
            buttons[button] = pressed
            joys.publish(Joy(axes=[0.0] * 8, buttons=buttons))
            time.sleep(0.1)

    def kept() -> list[Path]:
        return [p for p in root.iterdir() if (p / 'metadata.yaml').is_file()]

    pairs = ','.join(PAD['record_buttons'])
    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_teleop', 'teleop', '--ros-args', '-p', 'joy_layout:=gamepad',
            '-p', 'deadman_button:=4', '-p', 'gripper_button:=0',
            '-p', f'record_buttons:=[{pairs}]', log_path=tmp_path / 'teleop.log') as teleop, \
            NodeProcess.ros2_run('simops_recorder', 'record', '--ros-args', '-p',
                                 f'root:={root}', '-p', 'source:=teleop', '-p',
                                 'task:=put the cube on the goal',
                                 log_path=tmp_path / 'recorder.log') as recorder:
        assert wait_until(lambda: joys.get_subscription_count()
                          and 'recording' in recorder.output, 60), (teleop.output,
                                                                    recorder.output)
        assert wait_until(lambda: ros_probe.node.count_subscribers('/recorder/episode_info')
                          and 'servoing' in teleop.output, 30)
        time.sleep(1.0)   # the teleop node's clients find the recorder's services
        press(7)          # Start: an episode
        assert wait_until(lambda: root.is_dir() and any(root.iterdir()), 10), teleop.output
        time.sleep(1.0)
        press(3)          # Y: a success
        time.sleep(0.3)
        press(6)          # Back: keep it
        assert wait_until(lambda: len(kept()) == 1, 10), (teleop.output, recorder.output)
        press(7)
        assert wait_until(lambda: len([p for p in root.iterdir()
                                       if not p.name.startswith('.')]) == 2, 10)
        time.sleep(0.5)
        press(1)          # B: discard it
        assert wait_until(lambda: (root / '.discarded').is_dir()
                          and len(list((root / '.discarded').iterdir())) == 1, 10), \
            recorder.output
        assert teleop.stop() == 0, teleop.output
        assert recorder.stop() == 0, recorder.output
        assert sim.stop() == 0, sim.output
    (bag,) = kept()
    data = yaml.safe_load((bag / 'metadata.yaml').read_text())[
        'rosbag2_bagfile_information']['custom_data']
    assert data['simops.success'] == 'true' and data['simops.source'] == 'teleop'
    assert data['simops.task'] == 'put the cube on the goal'
    assert 'marked the episode a success' in teleop.output
