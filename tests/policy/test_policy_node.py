"""The policy node as a real process against a stand-in arm (tests/procs/policy_fake_arm.py).

Each test makes a small constant policy and its card, starts the fake arm and the installed
`policy` executable, and watches the node's topics from a real rclpy probe.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from franka_msgs.msg import FrankaRobotState
from policy_helpers import (
    COMMANDS,
    MUTE_QOS,
    SPEC,
    TOPICS,
    call_enable,
    diagnostics,
    qos,
    states,
    targets,
    wait_state,
    watch,
    write_policy,
)
from ros_helpers import REPO, NodeProcess, RosProbe, wait_until
from std_msgs.msg import Bool, Float64MultiArray

from simops_core.safety import SafetyLimits

RATE = 20.0
LIMITS = SafetyLimits.from_spec(SPEC, 1 / RATE, velocity_scale=0.5, margin=0.05)


@contextmanager
def running(tmp_path: Path, model: Path, *params: str, arm: bool = True,
            arm_rate: float = 250.0) -> Iterator[NodeProcess]:
    """The fake arm (if ``arm``, joint states at ``arm_rate`` Hz) and the policy node with
    ``params`` (name:=value)."""
    given = {'model_path': str(model), 'ramp_time': '0.5', 'start_enabled': 'true'}
    given |= dict(param.split(':=', 1) for param in params)   # ``params`` override those
    args = ['--ros-args', *(arg for name, value in given.items()
                            for arg in ('-p', f'{name}:={value}'))]
    fake = (NodeProcess.python(REPO / 'tests/procs/policy_fake_arm.py', '--rate', str(arm_rate),
                               log_path=tmp_path / 'arm.log') if arm else None)
    try:
        with NodeProcess.ros2_run('simops_policy', 'policy', *args,
                                  log_path=tmp_path / 'policy.log') as node:
            yield node
            assert node.stop() == 0, node.output
    finally:
        if fake is not None:
            fake.stop()


def assert_safe(commands: np.ndarray) -> None:
    """Both safety invariants on a published command sequence (7 arm targets each)."""
    arm = commands[:, :7]
    assert np.all(arm >= LIMITS.lower) and np.all(arm <= LIMITS.upper)
    assert np.all(np.abs(np.diff(arm, axis=0)) <= LIMITS.max_step + 1e-9)


def test_commands_at_20_hz_inside_the_limits(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [1.0] * 7 + [-1.0])   # saturated: full speed up
    watch(ros_probe)
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        first = len(ros_probe.messages(COMMANDS))
        time.sleep(4.0)
        stamps = ros_probe.messages(COMMANDS)[first:]
        commands = targets(ros_probe)
        diag = diagnostics(ros_probe)
    assert states(ros_probe)[-2:] == ['RAMPING', 'RUNNING'], states(ros_probe)
    # The ramp starts at the measured position: joints were matched by name even though
    # the fake arm publishes them reversed, with an extra joint.
    np.testing.assert_allclose(commands[0, :7], SPEC.home, atol=1e-9)
    assert commands.shape[1] == 8 and commands[-1, 7] < SPEC.gripper.home_width
    assert_safe(commands)
    assert np.any(commands[:, :7] >= LIMITS.upper - 1e-12), 'never reached a limit'
    # 20 Hz within 2 % on average, counted at the receiver.
    count = len(stamps)
    assert count >= 75, count
    actions = ros_probe.messages(TOPICS['policy_action'].name)
    assert list(actions[-1].data) == [1.0] * 7 + [-1.0]
    assert diag['state'] == 'RUNNING' and float(diag['period_p50_ms']) == pytest.approx(50, 0.02)
    assert 'latency_p99_ms' in diag and 'inference_p99_ms' in diag


def test_mean_command_rate_within_2_percent(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [0.0] * 8)
    arrivals: list[float] = []
    ros_probe.node.create_subscription(Float64MultiArray, COMMANDS,
                                       lambda _msg: arrivals.append(time.monotonic()), 200)
    watch(ros_probe)
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        start = len(arrivals)
        time.sleep(5.0)
        window = arrivals[start:]
    mean_period = (window[-1] - window[0]) / (len(window) - 1)
    assert mean_period == pytest.approx(1 / RATE, rel=0.02), (mean_period, len(window))


def test_one_command_per_measured_state(ros_probe: RosProbe, tmp_path: Path) -> None:
    """Joint states slower than the control rate (12.5 Hz against 20 Hz, still fresh): a tick
    that finds no new state sends nothing, so no target is computed twice from one
    measurement (in lockstep, stale ticks ran the target away from the arm)."""
    model, _ = write_policy(tmp_path, [0.3] * 7 + [0.0])
    watch(ros_probe)
    with running(tmp_path, model, arm_rate=12.5) as node:
        wait_state(ros_probe, node, 'RUNNING')
        first = len(ros_probe.messages(COMMANDS))
        time.sleep(4.0)
        sent = len(ros_probe.messages(COMMANDS)) - first
        assert wait_until(lambda: int(diagnostics(ros_probe).get('repeated_states', 0)) >= 20,
                          3.0), diagnostics(ros_probe)
    assert 40 <= sent <= 55, sent      # 12.5 states/s for 4 s, not 80 commands
    assert states(ros_probe)[-1] == 'RUNNING'
    assert_safe(targets(ros_probe))


def test_without_a_hand_the_gripper_output_is_dropped(ros_probe: RosProbe,
                                                       tmp_path: Path) -> None:
    """``gripper:=false`` (franka_bringup's load_gripper:=false): 7 arm targets only."""
    model, _ = write_policy(tmp_path, [0.0] * 7 + [-1.0])
    watch(ros_probe)
    with running(tmp_path, model, 'gripper:=false') as node:
        wait_state(ros_probe, node, 'RUNNING')
        time.sleep(0.5)
        commands = targets(ros_probe)
    assert commands.shape[1] == 7, commands.shape
    assert list(ros_probe.messages(TOPICS['policy_action'].name)[-1].data) == [0.0] * 7 + [-1.0]


def test_estop_latches_hold_until_enable(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [0.3] * 7 + [0.0])
    watch(ros_probe)
    estop = ros_probe.publisher(TOPICS['estop'].name, Bool, qos('estop'))
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        estop.publish(Bool(data=True))
        wait_state(ros_probe, node, 'ESTOP')
        refused = call_enable(ros_probe, True)
        held_from = len(ros_probe.messages(COMMANDS))
        time.sleep(0.5)
        estop.publish(Bool(data=False))
        wait_state(ros_probe, node, 'HOLD')
        time.sleep(0.5)                      # released, but still latched
        held = targets(ros_probe)[held_from:]
        accepted = call_enable(ros_probe, True)
        wait_state(ros_probe, node, 'RUNNING')
        time.sleep(0.3)
        moving = targets(ros_probe)
    assert not refused.success and 'e-stop' in refused.message
    assert accepted.success
    assert len(held) >= 15, len(held)             # the hold target keeps coming at 20 Hz
    assert np.all(held == held[0]), 'the arm moved during e-stop / latched hold'
    assert states(ros_probe)[-4:] == ['ESTOP', 'HOLD', 'RAMPING', 'RUNNING']
    assert np.any(moving[-1, :7] != held[0, :7])
    assert_safe(moving)


def test_the_arms_user_stop_faults_until_released_and_enabled(ros_probe: RosProbe,
                                                               tmp_path: Path) -> None:
    """The arm's user stop pressed (robot mode USER_STOPPED, no error set): the node latches
    FAULT and holds; ``~/enable`` while it is pressed, or released but idle, faults again;
    once the arm moves again (MOVE, after recovery) and is enabled, the node runs again."""
    model, _ = write_policy(tmp_path, [0.3] * 7 + [0.0])
    watch(ros_probe)
    robot = ros_probe.publisher(TOPICS['robot_state'].name, FrankaRobotState,
                                qos('robot_state'))

    def mode(value: int, duration: float) -> None:   # the broadcaster's stream, at 100 Hz
        for _ in range(round(duration / 0.01)):
            robot.publish(FrankaRobotState(robot_mode=value))
            time.sleep(0.01)

    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        mode(FrankaRobotState.ROBOT_MODE_USER_STOPPED, 0.5)
        wait_state(ros_probe, node, 'FAULT')
        held_from = len(ros_probe.messages(COMMANDS))
        assert call_enable(ros_probe, True).success
        mode(FrankaRobotState.ROBOT_MODE_USER_STOPPED, 0.5)
        faulted_again = states(ros_probe)[-1]
        held = targets(ros_probe)[held_from:]
        mode(FrankaRobotState.ROBOT_MODE_IDLE, 0.3)        # released: idle until recovery
        assert call_enable(ros_probe, True).success
        mode(FrankaRobotState.ROBOT_MODE_IDLE, 0.5)
        idle_again = states(ros_probe)[-1]
        mode(FrankaRobotState.ROBOT_MODE_MOVE, 0.3)        # recovered
        assert states(ros_probe)[-1] == 'FAULT'           # latched until ~/enable
        assert call_enable(ros_probe, True).success
        wait_state(ros_probe, node, 'RUNNING')
        output = node.output
    assert faulted_again == idle_again == 'FAULT'
    assert len(held) >= 5 and np.all(held[:, :7] == held[0, :7]), 'moved while user-stopped'
    assert "the arm's user stop is pressed; release it, recover it" in output
    assert "the arm's user stop was released and the arm is idle; recover it" in output


def test_stale_state_holds_then_resumes(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [0.3] * 7 + [0.0])
    watch(ros_probe)
    mute = ros_probe.publisher('/fake_arm/mute', Bool, MUTE_QOS)
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        mute.publish(Bool(data=True))
        wait_state(ros_probe, node, 'HOLD', timeout=2.0)
        held_from = len(ros_probe.messages(COMMANDS))
        time.sleep(1.0)
        held = targets(ros_probe)[held_from:]
        diag_wait = wait_until(lambda: int(diagnostics(ros_probe).get(
            'faults_stale_state', 0)) >= 1, 3.0)
        mute.publish(Bool(data=False))
        wait_state(ros_probe, node, 'RUNNING')
        commands = targets(ros_probe)
    assert len(held) >= 15 and np.all(held == held[0]), held
    assert diag_wait, diagnostics(ros_probe)
    assert_safe(commands)


def test_nonfinite_policy_never_reaches_the_arm(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [float('nan')] + [1.0] * 6 + [float('inf')])
    watch(ros_probe)
    with running(tmp_path, model) as node:
        assert wait_until(lambda: int(diagnostics(ros_probe).get(
            'faults_nonfinite_action', 0)) >= 5, 20), node.output
        commands = targets(ros_probe)
        assert node.proc.poll() is None
    assert len(commands) >= 5
    assert np.all(np.isfinite(commands))
    np.testing.assert_allclose(commands[:, :7], np.tile(SPEC.home, (len(commands), 1)),
                               atol=1e-9)
    assert 'HOLD' in states(ros_probe)


def test_start_disabled_until_enable(ros_probe: RosProbe, tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [0.0] * 8)
    watch(ros_probe)
    with running(tmp_path, model, 'start_enabled:=false') as node:
        wait_state(ros_probe, node, 'DISABLED')
        time.sleep(1.0)
        assert ros_probe.messages(COMMANDS) == []
        assert call_enable(ros_probe, True).success
        wait_state(ros_probe, node, 'RUNNING')
        assert call_enable(ros_probe, False).success
        wait_state(ros_probe, node, 'DISABLED')
        count = len(ros_probe.messages(COMMANDS))
        time.sleep(0.5)
        assert len(ros_probe.messages(COMMANDS)) <= count + 1


def test_pt2_program_on_joint_trajectory(ros_probe: RosProbe, tmp_path: Path) -> None:
    from trajectory_msgs.msg import JointTrajectory

    model, _ = write_policy(tmp_path, [0.5] * 7 + [0.0], fmt='pt2')
    topic = TOPICS['joint_trajectory'].name
    ros_probe.subscribe(topic, JointTrajectory, 200)
    watch(ros_probe)
    with running(tmp_path, model, 'command_interface:=joint_trajectory') as node:
        wait_state(ros_probe, node, 'RUNNING')
        time.sleep(0.5)
        trajectories = ros_probe.messages(topic)
    assert ros_probe.messages(COMMANDS) == []
    last = trajectories[-1]
    assert list(last.joint_names) == list(SPEC.arm_joints) and len(last.points) == 1
    point = last.points[0]
    assert point.time_from_start.sec == 0 and point.time_from_start.nanosec == 50_000_000
    # Zero stamps: the controller starts each one on arrival, so delay never shortens it.
    assert all(t.header.stamp.sec == t.header.stamp.nanosec == 0 for t in trajectories)
    assert_safe(np.array([list(t.points[0].positions) for t in trajectories]))
    assert np.all(np.array(point.positions) > SPEC.home)


def bad_input_size(tmp_path: Path) -> Path:
    return write_policy(tmp_path, [0.0] * 8, model_inputs=10)[0]


def bad_sha(tmp_path: Path) -> Path:
    model, card = write_policy(tmp_path, [0.0] * 8)
    card.write_text(card.read_text().replace(card.read_text().split('sha256: ')[1][:64],
                                             'f' * 64))
    return model


def missing_model(tmp_path: Path) -> Path:
    return tmp_path / 'nowhere.pt'


def corrupt_model(tmp_path: Path) -> Path:
    import yaml

    from simops_core.policy_card import file_sha256

    model, card = write_policy(tmp_path, [0.0] * 8)
    model.write_bytes(b'not a zip archive')
    content = yaml.safe_load(card.read_text())
    content['sha256'] = file_sha256(model)
    card.write_text(yaml.safe_dump(content))
    return model


def wrong_output_size(tmp_path: Path) -> Path:
    return write_policy(tmp_path, [0.0] * 5)[0]


@pytest.mark.parametrize(('make', 'params', 'expected'), [
    (bad_input_size, [], 'dry inference'),
    (bad_sha, [], 'sha256'),
    (missing_model, [], 'model_path'),
    (corrupt_model, [], 'cannot load TorchScript'),
    (wrong_output_size, [], 'action values'),
    (lambda p: write_policy(p, [0.0] * 8)[0], ['control_rate:=30.0'], 'control_rate'),
    (lambda p: write_policy(p, [0.0] * 8)[0], ['command_interface:=udp'], 'command_interface'),
    (lambda p: write_policy(p, [0.0] * 8)[0], ['velocity_scale:=3.0'], 'velocity_scale'),
], ids=['input-size', 'sha256', 'missing', 'corrupt', 'output-size', 'rate', 'interface',
        'range'])
def test_bad_model_or_parameter_exits_2(tmp_path: Path, make: object, params: list[str],
                                        expected: str) -> None:
    model = make(tmp_path)  # type: ignore[operator]
    args = ['--ros-args', '-p', f'model_path:={model}']
    for param in params:
        args += ['-p', param]
    with NodeProcess.ros2_run('simops_policy', 'policy', *args,
                              log_path=tmp_path / 'policy.log') as node:
        code = node.wait(60)
        output = node.output
    lines = output.strip().splitlines()
    assert code == 2, output
    assert len(lines) == 1 and lines[0].startswith('policy: error: '), output
    assert expected in lines[0] and '; ' in lines[0], output
    assert 'Traceback' not in output


def test_bad_messages_hold_and_are_counted(ros_probe: RosProbe, tmp_path: Path) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    model, _ = write_policy(tmp_path, [0.3] * 7 + [0.0])
    watch(ros_probe)
    mute = ros_probe.publisher('/fake_arm/mute', Bool, MUTE_QOS)
    states_pub = ros_probe.publisher(TOPICS['joint_states'].name, JointState,
                                     qos('joint_states'))
    goal_pub = ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    names = list(SPEC.joint_names)
    bad = [JointState(name=names, position=[float('nan')] * 9, velocity=[0.0] * 9),
           JointState(name=names[1:], position=[0.0] * 8, velocity=[0.0] * 8),
           JointState(name=names, position=[0.0] * 3)]
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        mute.publish(Bool(data=True))
        wait_state(ros_probe, node, 'HOLD', timeout=2.0)   # muted: only bad states come now
        nan_goal = PoseStamped()
        nan_goal.pose.position.x = float('nan')
        goal_pub.publish(nan_goal)
        held_from = len(ros_probe.messages(COMMANDS))
        for k in range(60):                       # 1.2 s of bad joint states at 50 Hz
            states_pub.publish(bad[k % len(bad)])
            time.sleep(0.02)
        held = targets(ros_probe)[held_from + 2:]
        assert wait_until(lambda: int(diagnostics(ros_probe).get(
            'faults_bad_message', 0)) >= 10, 3.0), diagnostics(ros_probe)
        assert node.proc.poll() is None, node.output
        output = node.output
    assert len(held) >= 15 and np.all(np.isfinite(held)) and np.all(held == held[-1])
    assert 'HOLD' in states(ros_probe)
    assert 'ignored /joint_states' in output and 'ignored /goal_pose' in output, output


def test_disable_mid_motion_brakes_to_rest(ros_probe: RosProbe, tmp_path: Path) -> None:
    """~/enable false at full speed: braking targets within the acceleration limit, then none."""
    model, _ = write_policy(tmp_path, [1.0] * 7 + [0.0])    # saturated: full speed
    watch(ros_probe)
    with running(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING')
        time.sleep(0.3)
        before = len(ros_probe.messages(COMMANDS))
        assert call_enable(ros_probe, False).success
        wait_state(ros_probe, node, 'DISABLED')
        after = len(ros_probe.messages(COMMANDS))
        time.sleep(0.5)
        assert len(ros_probe.messages(COMMANDS)) == after, 'commands after DISABLED'
        commands = targets(ros_probe)[before - 2:after, :7]
    assert 'STOPPING' in states(ros_probe)
    steps = np.abs(np.diff(commands, axis=0))
    assert np.all(steps[-1] == 0.0), 'the last command is not at rest'
    assert np.all(np.diff(steps, axis=0) <= LIMITS.max_step_change + 1e-9), 'sped up'
    assert np.all(np.abs(np.diff(steps, axis=0)) <= LIMITS.max_step_change + 1e-9)
    assert_safe(commands)
