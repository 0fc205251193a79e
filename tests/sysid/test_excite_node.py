"""`excite`: its command line, configuration errors (exit 2, one line) and its motion safety:
DISABLED until ~/enable, the e-stop latch and the braking stop, over real DDS."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from policy_helpers import call_enable
from rclpy.qos import QoSProfile
from ros_helpers import REPO, NodeProcess, RosProbe, installed_executable, wait_until
from std_msgs.msg import Bool, Float64MultiArray, String

from simops_core.robot_spec import load_robot_spec
from simops_core.safety import SafetyLimits
from simops_core.topics import load_topics
from simops_sysid.excite_node import SETTLE

TOPICS = load_topics()


@pytest.mark.parametrize(('params', 'words'), [
    (['command_interface:=position'], ('command_interface', 'position')),
    (['robot:=config/robot/nope.yaml'], ('nope.yaml',)),
    (['duration:=4.0'], ('duration',)),
    (['amplitude_fraction:=2.0'], ('amplitude_fraction',)),
])
def test_bad_configuration_exits_2_with_one_line(params: list[str], words: tuple[str, ...],
                                                 ros_env: dict[str, str]) -> None:
    args = [arg for p in params for arg in ('-p', p)]
    result = subprocess.run([str(installed_executable('simops_sysid', 'excite')),
                             '--ros-args', *args], capture_output=True, text=True, timeout=60,
                            cwd=REPO, env=ros_env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('excite: error: '), result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def excite_command(*args: str) -> list[str]:
    return [str(installed_executable('simops_sysid', 'excite')), *args]


def test_help_prints_usage_and_moves_nothing(ros_probe: RosProbe, tmp_path: Path) -> None:
    commands = TOPICS['joint_commands'].name
    ros_probe.subscribe(commands, Float64MultiArray, 200)
    with NodeProcess.python(REPO / 'tests/procs/policy_fake_arm.py',
                            log_path=tmp_path / 'arm.log'):
        result = subprocess.run(excite_command('--help'), capture_output=True, text=True,
                                timeout=60, cwd=REPO)
        time.sleep(1.0)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('usage: excite') and '~/enable' in result.stdout
    assert 'exit codes' in result.stdout
    assert ros_probe.messages(commands) == []


@pytest.mark.parametrize('args', [['--bogus'], ['extra'], ['--hel']])
def test_stray_arguments_exit_2_with_one_line(args: list[str]) -> None:
    result = subprocess.run(excite_command(*args), capture_output=True, text=True, timeout=60,
                            cwd=REPO)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('excite: error: '), result.stderr


def test_disabled_until_enable_estop_latches_and_disable_brakes(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """The policy node's contract, on excite: nothing moves unasked (issue #12)."""
    commands, state = TOPICS['joint_commands'].name, '/excite/state'
    ros_probe.subscribe(commands, Float64MultiArray, 500)
    ros_probe.subscribe(state, String, QoSProfile(**TOPICS['policy_state'].qos
                                                  .as_profile_kwargs()))
    estop = ros_probe.publisher(TOPICS['estop'].name, Bool, QoSProfile(
        **TOPICS['estop'].qos.as_profile_kwargs()))

    def states() -> list[str]:
        return [m.data for m in ros_probe.messages(state)]

    def wait_state(name: str) -> None:
        assert wait_until(lambda: states()[-1:] == [name], 20), (states(), node.output)

    def targets(since: int = 0) -> np.ndarray:
        return np.array([list(m.data) for m in ros_probe.messages(commands)[since:]])

    with NodeProcess.python(REPO / 'tests/procs/policy_fake_arm.py',
                            log_path=tmp_path / 'arm.log'), \
            NodeProcess(excite_command('--ros-args', '-p', 'duration:=60.0'),
                        tmp_path / 'excite.log') as node:
        wait_state('DISABLED')
        time.sleep(1.5)
        assert ros_probe.messages(commands) == [], 'excite moved the arm before ~/enable'
        assert call_enable(ros_probe, True, '/excite').success
        wait_state('RUNNING')     # after the 3 s blend-in
        time.sleep(0.5)
        moving = targets()
        still = next(k for k, row in enumerate(moving) if np.any(row != moving[0]))
        estop.publish(Bool(data=True))
        wait_state('ESTOP')
        refused = call_enable(ros_probe, True, '/excite')
        held_from = len(ros_probe.messages(commands)) + 1   # one may be in flight
        time.sleep(0.5)
        estop.publish(Bool(data=False))
        wait_state('HOLD')
        time.sleep(0.5)                                     # released, still latched
        held = targets(held_from)
        assert call_enable(ros_probe, True, '/excite').success
        wait_state('RUNNING')
        time.sleep(0.5)
        braking_from = len(ros_probe.messages(commands)) - 1
        assert call_enable(ros_probe, False, '/excite').success
        wait_state('DISABLED')
        stopped_at = len(ros_probe.messages(commands))
        time.sleep(0.5)
        assert len(ros_probe.messages(commands)) == stopped_at, 'commands after DISABLED'
        braking = targets(braking_from)
        assert node.stop() == 0, node.output
    spec = load_robot_spec('fr3')
    limits = SafetyLimits.from_spec(spec, 1 / 50.0, 0.25, 0.05)
    assert np.ptp(moving, axis=0).max() > 1e-3, 'excite did not move once enabled'
    # it held until every subscriber had its commands, then for SETTLE s (50 periods) more
    assert still >= 1 + round(SETTLE * 50), still
    assert 'every subscriber has the commands' in node.output
    assert not refused.success and 'e-stop' in refused.message
    assert len(held) >= 20 and np.all(held == held[0]), 'the arm moved during the e-stop'
    assert states()[-6:] == ['ESTOP', 'HOLD', 'RAMPING', 'RUNNING', 'STOPPING', 'DISABLED']
    steps = np.abs(np.diff(braking, axis=0))
    assert np.all(steps[-1] == 0.0)
    assert np.all(np.diff(steps, axis=0) <= limits.max_step_change + 1e-9)
    for sequence in (moving, braking):
        assert np.all(sequence >= limits.lower) and np.all(sequence <= limits.upper)
        assert np.all(np.abs(np.diff(sequence, axis=0)) <= limits.max_step + 1e-9)


def test_it_holds_until_the_process_publishing_the_joint_states_subscribes(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """A recorder's subscription (``ros_probe``) matched and acknowledging is not enough: the
    arm's controller, a subscriber in the process (DDS participant) that publishes the joint
    states, must have the commands too before the excitation starts."""
    import threading

    from sensor_msgs.msg import JointState

    spec = load_robot_spec('fr3')
    commands = TOPICS['joint_commands'].name
    ros_probe.subscribe(commands, Float64MultiArray, 500)   # the recorder
    arm = RosProbe('arm_without_controller')                # another participant
    states = arm.publisher(TOPICS['joint_states'].name, JointState, QoSProfile(
        **TOPICS['joint_states'].qos.as_profile_kwargs()))
    running = threading.Event()
    running.set()

    def publish() -> None:   # the broadcaster at 100 Hz, the arm at home
        while running.is_set():
            msg = JointState(name=list(spec.arm_joints), position=[float(q) for q in spec.home])
            msg.header.stamp = arm.node.get_clock().now().to_msg()
            states.publish(msg)
            time.sleep(0.01)

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    lacking = f'no subscriber of {commands} in the process that publishes'
    try:
        with NodeProcess(excite_command('--ros-args', '-p', 'duration:=60.0'),
                         tmp_path / 'excite.log') as node:
            assert call_enable(ros_probe, True, '/excite', timeout=20.0).success
            assert wait_until(lambda: lacking in node.output, 20.0), node.output
            time.sleep(2.0)
            held = [list(m.data) for m in ros_probe.messages(commands)]
            assert 'every subscriber has the commands' not in node.output, node.output
            arm.subscribe(commands, Float64MultiArray, 500)   # the controller appears
            assert wait_until(lambda: 'every subscriber has the commands' in node.output,
                              20.0), node.output
            assert node.stop() == 0, node.output
    finally:
        running.clear()
        thread.join()
        arm.close()
    assert len(held) >= 50 and all(row == held[0] for row in held), 'it moved while holding'
    np.testing.assert_allclose(held[0][:7], spec.home, atol=1e-12)


def test_segment_chain_stamps_on_a_grid_with_its_points_from_the_last_one_due() -> None:
    """Each segment starts half a period after it was computed, on the grid; each message
    begins with the chain's last point due half a period before it was computed (the target
    before held for a period when the chain starts or restarts), so it never starts from
    the arm, even on a controller whose clock runs a little behind."""
    from simops_ros.point_commands import SegmentChain

    chain = SegmentChain(20_000_000)   # 50 Hz
    zeros, ones, twos, threes = (np.full(7, v) for v in (0.0, 1.0, 2.0, 3.0))

    def sent(now: int, target: np.ndarray) -> tuple[int, list[np.ndarray]]:
        stamp, earlier = chain.next(now, target)
        assert stamp <= now - 10_000_000   # the first point is due half a period before
        return stamp, earlier

    stamp, earlier = sent(1_000_000_000, zeros)   # starts: zeros held, then zeros
    assert stamp == 990_000_000 and np.array_equal(earlier, [zeros, zeros])
    stamp, earlier = sent(1_017_000_000, ones)   # a timer 3 ms early: one point earlier
    assert stamp == 990_000_000 and np.array_equal(earlier, [zeros, zeros, zeros])
    stamp, earlier = sent(1_043_000_000, twos)   # 3 ms late
    assert stamp == 1_030_000_000 and np.array_equal(earlier, [zeros, ones])
    stamp, earlier = sent(1_075_000_000, threes)   # 15 ms late: a restart from twos, held
    assert stamp == 1_065_000_000 and np.array_equal(earlier, [twos, twos])
    stamp, earlier = sent(1_080_000_000, zeros)   # back on the timer's schedule: one point more
    assert stamp == 1_065_000_000 and np.array_equal(earlier, [twos, twos, threes])
    stamp, earlier = sent(1_100_000_000, ones)
    assert stamp == 1_085_000_000 and np.array_equal(earlier, [twos, threes, zeros])
    stamp, earlier = sent(1_125_500_000, twos)   # 0.5 ms after a point fell due: not from it
    assert stamp == 1_105_000_000 and np.array_equal(earlier, [threes, zeros, ones])
    stamp, earlier = sent(500_000_000, ones)   # the clock went back: a restart
    assert stamp == 490_000_000 and np.array_equal(earlier, [twos, twos])
