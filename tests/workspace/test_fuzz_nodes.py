"""Fuzz the running nodes and their start-up parameters, over real DDS.

- Command messages (``Float64MultiArray`` and ``JointTrajectory``: wrong lengths, unknown
  joints, NaN, Inf, 1e308, absurd stamps and durations, mixed with valid targets at the
  limits) into a running simulator: it never dies, keeps 1 kHz joint states, and the arm stays
  inside its limits.
- Joint states (wrong names, lengths, NaN, Inf, far outside the limits) into a running
  policy node: it never dies, and every command it publishes keeps the safety invariants.
- Parameter values of every type into every node that moves or records an arm: each node
  either runs (and stops cleanly on Ctrl-C) or refuses with one line and exit 2.

Budget and reproduction: tests/fuzz_helpers.py.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from fuzz_helpers import ODD_FLOATS, budget, start_or_refuse
from geometry_msgs.msg import PoseStamped
from hypothesis import given
from hypothesis import strategies as st
from policy_helpers import COMMANDS, STATE, call_enable, qos
from rclpy.qos import QoSProfile
from ros_helpers import REPO, NodeProcess, RosProbe, installed_executable, wait_until
from sensor_msgs.msg import JointState
from sim_helpers import (
    Recovery,
    command_publisher,
    start_sim,
    subscribe_states,
    topic,
    trajectory_publisher,
)
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.robot_spec import load_robot_spec
from simops_core.safety import SafetyLimits
from simops_core.topics import load_topics

SPEC = load_robot_spec('fr3')
TOPICS = load_topics()
# rad a joint may pass its limit: a step too fast for the velocity limits stops the arm
# before it moves (a protective stop), and a trajectory within them that ends at a limit
# stops it 1 mrad beyond the limit; it then holds where it is.
LIMIT_SLACK = 0.01
NUMBERS = st.one_of(ODD_FLOATS, st.floats(-5, 5), st.floats(allow_nan=True,
                                                              allow_infinity=True))
NAMES = st.one_of(st.sampled_from(SPEC.arm_joints), st.sampled_from(['', 'x', 'panda_joint1']),
                  st.text(max_size=8))


def near_limits(u: list[float]) -> list[float]:
    """A valid arm target: ``u`` in [0, 1] per joint across the range, ends included."""
    return list(SPEC.position_lower + np.array(u) * (SPEC.position_upper
                                                    - SPEC.position_lower))


ARRAYS = st.one_of(
    st.lists(NUMBERS, max_size=12),
    st.lists(st.floats(0, 1), min_size=7, max_size=7).map(near_limits),
    st.tuples(st.lists(st.floats(0, 1), min_size=7, max_size=7), NUMBERS).map(
        lambda pair: [*near_limits(pair[0]), pair[1]]),
)


@st.composite
def trajectories(draw: st.DrawFn) -> JointTrajectory:
    names = draw(st.lists(NAMES, max_size=8))
    msg = JointTrajectory(joint_names=names)
    msg.header.stamp.sec = draw(st.sampled_from([0, 1, 2**31 - 1, int(time.time())]))
    msg.header.stamp.nanosec = draw(st.integers(0, 999_999_999))
    for _ in range(draw(st.integers(0, 4))):
        size = draw(st.sampled_from([len(names), 0, len(names) + 1]))
        point = JointTrajectoryPoint(
            positions=draw(st.lists(NUMBERS, min_size=size, max_size=size)),
            velocities=draw(st.one_of(st.just([]), st.lists(NUMBERS, min_size=size,
                                                            max_size=size))))
        point.time_from_start.sec = draw(st.integers(-5, 5))
        point.time_from_start.nanosec = draw(st.integers(0, 999_999_999))
        msg.points.append(point)
    return msg


@dataclass
class Rig:
    """A node under fuzz, the probe watching it and the probe's matched publishers."""

    node: NodeProcess
    probe: RosProbe
    publishers: dict[str, Any]


def _matched(probe: RosProbe, name: str, kind: type, profile: QoSProfile) -> Any:
    """A publisher on ``probe`` once the node's subscription has matched it."""
    pub = probe.publisher(name, kind, profile)
    assert wait_until(lambda: pub.get_subscription_count() > 0, 30)
    time.sleep(0.3)  # let the node's side of discovery settle too
    return pub


class TestSimUnderFuzzedCommands:
    """One simulator for the class (stopped before the policy's class starts, so its 1 kHz
    joint states never reach the policy under fuzz)."""

    @pytest.fixture(scope='class')
    @classmethod
    def sim(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
        folder = tmp_path_factory.mktemp('sim_fuzz')
        probe = RosProbe('fuzz_sim_probe')
        try:
            states = subscribe_states(probe)
            with start_sim(folder) as node:
                probe.wait_for_messages(states, timeout=30)
                yield Rig(node, probe, {'commands': command_publisher(probe),
                                        'paths': trajectory_publisher(probe),
                                        'recovery': Recovery(probe)})
                assert node.stop() == 0, node.output
        finally:
            probe.close()

    @budget(40)
    @given(messages=st.lists(st.one_of(ARRAYS, trajectories()), min_size=1, max_size=6))
    def test_sim_survives_fuzzed_commands(self, sim: Rig, messages: list[Any]) -> None:
        node, probe = sim.node, sim.probe
        sim.publishers['recovery']()   # each example starts free of a protective stop
        for message in messages:
            if isinstance(message, JointTrajectory):
                sim.publishers['paths'].publish(message)
            else:
                sim.publishers['commands'].publish(
                    Float64MultiArray(data=[float(v) for v in message]))
            time.sleep(0.03)
        assert node.proc.poll() is None, node.output[-3000:]
        states = probe.messages(topic('joint_states').name)[-200:]
        position = np.array([m.position[:7] for m in states])
        assert np.all(np.isfinite(position))
        assert np.all(position >= SPEC.position_lower - LIMIT_SLACK), position.min(axis=0)
        assert np.all(position <= SPEC.position_upper + LIMIT_SLACK), position.max(axis=0)
        assert 'Traceback' not in node.output

    def test_sim_still_at_rate_after_the_fuzz(self, sim: Rig) -> None:
        """Runs after the fuzz above (same node): 1 kHz of joint states."""
        name = topic('joint_states').name
        before = len(sim.probe.messages(name))
        time.sleep(2.0)
        rate = (len(sim.probe.messages(name)) - before) / 2.0
        assert rate > 800, (rate, sim.node.output[-2000:])


# --- joint states into the policy node --------------------------------------------------------

@st.composite
def joint_states(draw: st.DrawFn) -> JointState:
    names = draw(st.one_of(st.just(list(SPEC.joint_names)), st.lists(NAMES, max_size=10)))
    if draw(st.booleans()):   # well formed, but moving or placed far outside the domain
        finite = st.lists(st.floats(-10, 10), min_size=len(SPEC.joint_names),
                          max_size=len(SPEC.joint_names))
        return JointState(name=list(SPEC.joint_names), position=draw(finite),
                          velocity=draw(finite))
    size = draw(st.sampled_from([len(names), 0, max(len(names) - 1, 0), len(names) + 2]))
    return JointState(name=names,
                      position=draw(st.lists(NUMBERS, min_size=size, max_size=size)),
                      velocity=draw(st.lists(NUMBERS, min_size=size, max_size=size)),
                      effort=draw(st.lists(NUMBERS, max_size=size)))


RAMP_TICKS = 6   # home states at 60 ms: 0.36 s, past the policy's 0.2 s ramp


class TestPolicyUnderFuzzedJointStates:
    """One policy node for the class, fed only by the probe (no simulator runs meanwhile)."""

    @pytest.fixture(scope='class')
    @classmethod
    def policy(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
        folder = tmp_path_factory.mktemp('policy_fuzz')
        probe = RosProbe('fuzz_policy_probe')
        try:
            probe.subscribe(COMMANDS, Float64MultiArray, 500)
            probe.subscribe(STATE, String, qos('policy_state'))
            goal = PoseStamped()
            goal.header.frame_id = SPEC.base_frame
            goal.pose.position.x, goal.pose.position.z = 0.4, 0.3
            goal.pose.orientation.w = 1.0
            probe.publisher(TOPICS['goal_pose'].name, PoseStamped,
                            qos('goal_pose')).publish(goal)
            argv = [str(installed_executable('simops_policy', 'policy')), '--ros-args', '-p',
                    'ramp_time:=0.2', '-p', 'stale_state_timeout:=1.0', '-p',
                    'start_enabled:=true']
            with NodeProcess(argv, folder / 'policy.log') as node:
                assert probe.node.count_publishers(TOPICS['joint_states'].name) == 0, \
                    'another node publishes joint states: the fuzz would not reach the policy'
                yield Rig(node, probe, {
                    'states': _matched(probe, TOPICS['joint_states'].name, JointState,
                                       QoSProfile(**TOPICS['joint_states'].qos
                                                  .as_profile_kwargs())),
                    'poses': _matched(probe, TOPICS['object_pose'].name, PoseStamped,
                                      qos('object_pose'))})
                assert node.stop() == 0, node.output
        finally:
            probe.close()

    @budget(30)
    @given(messages=st.lists(joint_states(), min_size=1, max_size=4))
    def test_policy_survives_fuzzed_joint_states(self, policy: Rig,
                                                 messages: list[JointState]) -> None:
        node, probe = policy.node, policy.probe
        pose = PoseStamped()
        pose.header.frame_id = SPEC.base_frame
        pose.pose.position.x, pose.pose.orientation.w = 0.5, 1.0
        policy.publishers['poses'].publish(pose)   # volatile: once the node listens
        home = JointState(name=list(SPEC.joint_names),
                          position=[*SPEC.home, 0.04, 0.04], velocity=[0.0] * 9)
        states = policy.publishers['states']
        states.publish(home)
        time.sleep(0.06)
        assert call_enable(probe, True).success   # clear a FAULT the last example latched
        # Fresh home states through the ramp (ramp_time 0.2 s), so each example fuzzes a
        # RUNNING node, not only one that is ramping in.
        for message in [home] * RAMP_TICKS + messages:
            states.publish(message)
            time.sleep(0.06)   # the node takes the newest state once per 50 ms tick
        assert node.proc.poll() is None, node.output[-3000:]
        assert 'Traceback' not in node.output

    def test_policy_commands_kept_the_invariants_through_the_fuzz(self, policy: Rig) -> None:
        """Runs after the fuzz above (same node): every command it published was safe."""
        node, probe = policy.node, policy.probe
        limits = SafetyLimits.from_spec(SPEC, 0.05, 0.5, 0.05)
        commands = np.array([list(m.data)[:7] for m in probe.messages(COMMANDS)])
        assert commands.size, ('the policy never commanded', node.output[-3000:])
        assert np.all(commands >= limits.lower) and np.all(commands <= limits.upper)
        # Never disabled, so every target continues from the one before (holds included).
        assert np.all(np.abs(np.diff(commands, axis=0)) <= limits.max_step + 1e-9)
        # The fuzzed states reached the node: it ran, and faulted on some of them.
        assert {'RUNNING', 'FAULT'} <= {m.data for m in probe.messages(STATE)}
        assert node.proc.poll() is None


# --- parameter values at start-up -------------------------------------------------------------

PARAMETERS = {
    ('simops_sim', 'sim'): ('model', 'robot', 'sim_params_file', 'joint_state_rate',
                            'realtime_factor', 'publish_clock', 'sync_mode', 'control_period',
                            'lockstep_timeout', 'randomize', 'seed', 'command_timeout',
                            'initial_keyframe', 'joint_state_noise', 'joint_map'),
    ('simops_policy', 'policy'): ('model_path', 'card_path', 'robot', 'control_rate',
                                  'lpf_cutoff_hz', 'velocity_scale', 'joint_limit_margin',
                                  'stale_state_timeout', 'command_interface', 'start_enabled',
                                  'ramp_time'),
    ('simops_recorder', 'record'): ('root', 'topics', 'storage', 'compression', 'mode',
                                    'split_duration', 'split_size', 'flush_period', 'robot',
                                    'robot_mode', 'policy_sha256', 'sim_params_file',
                                    'auto_stop_grace', 'auto_min_duration'),
    ('simops_sysid', 'excite'): ('robot', 'duration', 'seed', 'amplitude_fraction',
                                 'command_interface', 'control_rate', 'start_enabled'),
    ('simops_teleop', 'teleop'): ('robot', 'model', 'teleop_rate', 'command_interface',
                                  'linear_speed', 'lower_singularity_threshold',
                                  'input_timeout', 'joy_layout', 'deadman_button'),
}
READY = {'sim': 'joint_states at', 'policy': 'DISABLED', 'record': 'recording',
         'excite': 'exciting', 'teleop': 'servoing'}
PROG = {'sim': 'sim', 'policy': 'policy', 'record': 'record', 'excite': 'excite',
        'teleop': 'teleop'}
VALUES = st.sampled_from(['5', '-1', '0', '1e400', '-1e400', 'nan', 'inf', 'soon', 'true',
                          'false', '[]', '[1, 2]', "['a', 'b']", "''", '2.5', '-0.0',
                          '1e-300', '99999999999999999999', '/', '/nonexistent/x.yaml',
                          'lockstep', "'/joint_states'", '[/a, b]'])


@budget(14)
@given(node=st.sampled_from(sorted(PARAMETERS)), data=st.data())
def test_nodes_start_or_refuse_on_fuzzed_parameters(tmp_path_factory: pytest.TempPathFactory,
                                                   node: tuple[str, str],
                                                   data: st.DataObject) -> None:
    names = data.draw(st.lists(st.sampled_from([*PARAMETERS[node], 'no_such_parameter']),
                               min_size=1, max_size=3, unique=True))
    values = [data.draw(VALUES) for _ in names]
    folder = tmp_path_factory.mktemp('params')
    args = [arg for name, value in zip(names, values, strict=True)
            for arg in ('-p', f'{name}:={value}')]
    if node[1] == 'record' and 'root' not in names:
        args += ['-p', f'root:={folder / "episodes"}']
    executable = node[1]
    argv = [str(installed_executable(*node)), '--ros-args', *args, '-p',
            'use_sim_time:=false']
    start_or_refuse(argv, folder / 'node.log', READY[executable], PROG[executable])


@pytest.mark.parametrize(('node', 'name'), [(('simops_sim', 'sim'), 'model'),
                                            (('simops_policy', 'policy'), 'model_path'),
                                            (('simops_recorder', 'record'), 'storage'),
                                            (('simops_sysid', 'excite'), 'robot'),
                                            (('simops_teleop', 'teleop'), 'model')])
def test_an_untyped_empty_list_is_refused_with_one_line(node: tuple[str, str],
                                                        name: str) -> None:
    """Found by the fuzz: ``-p model_path:=[]`` crashed every node (uninitialised value)."""
    result = subprocess.run([str(installed_executable(*node)), '--ros-args', '-p',
                             f'{name}:=[]'], capture_output=True, text=True, timeout=120,
                            cwd=REPO)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and f'parameter {name} has no value' in lines[0], lines
