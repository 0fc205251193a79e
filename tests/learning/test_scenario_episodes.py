"""The envs play the gate's adversarial scenarios as the ROS graph would meet them: the policy
node's mode machine (a hold on stale joint states, the e-stop, the FAULT the arm's own stop
latches, the ramp after each), a push
through MuJoCo's applied forces, a goal that moves, an object pose that stops coming; and
``simops-validate --scenarios`` reports a cell per scenario."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from learning_helpers import POLICY
from ros_helpers import REPO

from simops_core.policy_step import StepSettings
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.reach_env import FR3ReachEnv
from simops_sim.scenarios import scenario

VALIDATE = str(REPO / '.venv/bin/simops-validate')
PERIOD = 0.05   # s, the shipped cards' 20 Hz
STILL = np.zeros(8, np.float32)   # a policy that asks for nothing (commands the anchor)


@pytest.fixture(scope='module')
def env() -> FR3ReachEnv:
    return FR3ReachEnv(safety=StepSettings(ramp_time=0.2))


def play(env: FR3ReachEnv, name: str, ticks: int, action: np.ndarray = STILL,
         seed: int = 0) -> list[dict]:
    """``ticks`` steps of scenario ``name`` (a far goal: nothing ends the episode)."""
    env.reset(seed=seed, options={'scenario': scenario(name), 'goal': np.array([0.7, 0.3, 0.45])})
    return [env.step(action)[4] for _ in range(ticks)]


def test_stale_joint_states_hold_the_arm_after_the_timeout_then_it_ramps_in_again(
        env: FR3ReachEnv) -> None:
    """No joint state for 0.3 s: the node sends nothing while the last one is at most
    stale_state_timeout (0.1 s) old, holds the last target after that (actions are ignored:
    even NaN faults nothing), and when they come back restarts its ramp from the held target."""
    stale = scenario('stale_joint_states')
    first, last = round(stale.at / PERIOD), round((stale.at + stale.duration) / PERIOD)
    infos = play(env, 'stale_joint_states', last + 6)
    modes = [info['mode'] for info in infos]   # the mode decided at the tick after each step
    assert modes[first - 2] == 'RUNNING'
    timeout = round(StepSettings().stale_state_timeout / PERIOD)   # 2 periods
    assert modes[first - 1:first - 1 + timeout] == ['RUNNING'] * timeout
    assert set(modes[first - 1 + timeout:last - 1]) == {'HOLD'}
    assert modes[last - 1] == 'RAMPING' and modes[-1] == 'RUNNING'
    # while the node sends nothing or holds, a NaN action changes nothing
    env.reset(seed=0, options={'scenario': stale, 'goal': np.array([0.7, 0.3, 0.45])})
    for tick in range(last + 2):
        action = np.full(8, np.nan, np.float32) if first <= tick < last else STILL
        info = env.step(action)[4]
        assert not info['fault'], tick
    held = [infos[k]['command'] for k in range(first + timeout - 1, last - 1)]
    assert all(np.array_equal(h, held[0]) for h in held)


def test_the_estop_holds_until_release_and_enable_then_ramps(env: FR3ReachEnv) -> None:
    estop = scenario('estop')
    ticks = estop.ticks(PERIOD)
    modes = [info['mode'] for info in play(env, 'estop', ticks.enable + 3)]
    assert set(modes[ticks.start - 1:ticks.end - 1]) == {'ESTOP'}
    assert set(modes[ticks.end - 1:ticks.enable - 1]) == {'HOLD'}
    assert modes[ticks.enable - 1] == 'RAMPING'


def test_the_arms_own_stop_faults_the_node_until_its_recovery_and_enable(
        env: FR3ReachEnv) -> None:
    """arm_stop: the arm halts where it is and refuses commands; the node latches FAULT while
    it reads the stop, and the episode goes on (the stop is the scenario's, not the
    policy's); error recovery clears it, and ~/enable ramps the node in again."""
    ticks = scenario('arm_stop').ticks(PERIOD)
    turning = STILL.copy()
    turning[0] = 0.5   # joint 1 keeps turning at the policy's step
    env.reset(seed=0, options={'scenario': scenario('arm_stop'),
                               'goal': np.array([0.7, 0.3, 0.45])})
    infos, joint1 = [], []
    for _ in range(ticks.enable + 4):
        _, _, terminated, _, info = env.step(turning)
        assert not terminated
        infos.append(info)
        joint1.append(float(env.physics.data.qpos[0]))
    modes = [info['mode'] for info in infos]   # infos[k]: tick k + 1
    assert modes[ticks.start - 2] == 'RUNNING'
    assert set(modes[ticks.start - 1:ticks.enable - 1]) == {'FAULT'}
    assert modes[ticks.enable - 1] == 'RAMPING'
    stops = [info['protective_stop'] for info in infos]
    assert all(stops[ticks.start - 1:ticks.end - 1]) and not any(stops[ticks.end - 1:])
    stride = joint1[ticks.start - 2] - joint1[ticks.start - 3]   # rad a tick before it
    assert stride > 0.015
    stopped = joint1[ticks.start + 3:ticks.end - 1]
    assert abs(stopped[0] - joint1[ticks.start - 1]) < stride / 4   # it halted where it was
    assert np.ptp(stopped) < 1e-3                                    # and stays there
    held = infos[ticks.start - 1]['command'][0]   # the node's last target, sent in FAULT
    assert abs(stopped[-1] - held) > 1e-4
    assert abs(joint1[ticks.enable - 2] - held) < 1e-3   # recovered, the arm takes it
    assert joint1[-1] > joint1[ticks.enable - 1] + 0.01   # enabled, it turns again


def test_the_user_stop_faults_the_node_with_its_own_line_until_release_recovery_and_enable(
        env: FR3ReachEnv) -> None:
    """user_stop: the arm halts where it is (robot mode USER_STOPPED, no error set); the node
    reads it as it reads franka's robot state and latches FAULT with the user stop's line;
    released and recovered, ~/enable ramps the node in again."""
    ticks = scenario('user_stop').ticks(PERIOD)
    turning = STILL.copy()
    turning[0] = 0.5
    env.reset(seed=0, options={'scenario': scenario('user_stop'),
                               'goal': np.array([0.7, 0.3, 0.45])})
    infos, joint1, reasons = [], [], []
    for _ in range(ticks.enable + 4):
        _, _, terminated, _, info = env.step(turning)
        assert not terminated
        infos.append(info)
        joint1.append(float(env.physics.data.qpos[0]))
        reasons.append(env.supervisor.reason)
    modes = [info['mode'] for info in infos]   # infos[k]: tick k + 1
    assert modes[ticks.start - 2] == 'RUNNING'
    assert set(modes[ticks.start - 1:ticks.enable - 1]) == {'FAULT'}
    assert modes[ticks.enable - 1] == 'RAMPING'
    assert reasons[ticks.start - 1].startswith("the arm's user stop is pressed; release it")
    stops = [info['protective_stop'] for info in infos]
    assert all(s.startswith('user stop (pressed)') for s in stops[ticks.start - 1:ticks.end - 1])
    assert not any(stops[ticks.end - 1:])
    stopped = joint1[ticks.start + 3:ticks.end - 1]
    assert np.ptp(stopped) < 1e-3                          # it holds where it stopped
    assert joint1[-1] > joint1[ticks.enable - 1] + 0.01    # enabled, it turns again


def test_a_push_moves_the_flange_and_ends(env: FR3ReachEnv) -> None:
    push = scenario('push_arm')
    ticks = push.ticks(PERIOD)
    env.reset(seed=0, options={'goal': np.array([0.7, 0.3, 0.45])})
    for _ in range(ticks.end):
        env.step(STILL)
    unpushed = env.flange_position()
    play(env, 'push_arm', ticks.end)
    assert np.linalg.norm(env.physics.data.xfrc_applied[env.physics.index.flange_body]) > 0
    pushed = env.flange_position()
    assert np.linalg.norm(pushed - unpushed) > 0.003   # m: the servos give a few millimetres
    env.step(STILL)
    assert not np.any(env.physics.data.xfrc_applied)


def test_the_goal_moves_once_mid_episode(env: FR3ReachEnv) -> None:
    moved = scenario('goal_moved').ticks(PERIOD).start
    goals = [info['goal'] for info in play(env, 'goal_moved', moved + 2)]
    assert np.array_equal(goals[0], goals[moved - 2])
    assert not np.array_equal(goals[moved - 2], goals[moved - 1])
    assert np.array_equal(goals[moved - 1], goals[-1])
    assert np.array_equal(env.policy_step.raw.goal_position, goals[-1])


def test_a_lost_object_pose_is_read_again_until_it_comes_back() -> None:
    env = FR3PickPlaceEnv()
    lost = scenario('object_pose_dropout').ticks(PERIOD)
    env.reset(seed=0, options={'scenario': scenario('object_pose_dropout')})
    for _ in range(lost.start):
        env.step(STILL)
    seen = env.policy_step.raw.object_position.copy()
    cube = env.physics.index.object_body
    qpos = env.physics.data.qpos[env.physics.model.jnt_qposadr[env.physics.model.body_jntadr[
        cube]]:][:3]
    qpos[0] += 0.05   # the cube moves while no pose comes
    for _ in range(lost.start, lost.end - 1):
        env.step(STILL)
        assert np.array_equal(env.policy_step.raw.object_position, seen)
    env.step(STILL)
    assert not np.array_equal(env.policy_step.raw.object_position, seen)


def test_a_scenario_changes_no_episode_without_it(env: FR3ReachEnv) -> None:
    """The scenario's draws are its own: the next plain episode is as if none had run."""
    plain = [env.step(STILL)[0] for _ in range(3) if env.reset(seed=4) or True]
    play(env, 'push_arm', 3)
    again = [env.step(STILL)[0] for _ in range(3) if env.reset(seed=4) or True]
    assert all(np.array_equal(a, b) for a, b in zip(plain, again, strict=True))


@pytest.mark.ros_free
def test_the_gate_reports_a_cell_per_scenario(tmp_path: Path) -> None:
    result = subprocess.run(
        [VALIDATE, '--policy', str(POLICY), '--grid', 'delay=0', '--scenarios', 'estop',
         'stale_joint_states', '--episodes', '4', '--workers', '1', '--out', str(tmp_path),
         '--verdict-exit-zero'],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / 'validation.json').read_text())
    assert [s['name'] for s in report['scenarios']] == ['estop', 'stale_joint_states']
    cells = report['configs']
    assert [c.get('scenario') for c in cells] == [None, 'estop', 'stale_joint_states']
    assert all(c['episodes'] == 4 for c in cells)
    assert cells[1]['delay'] == 0 and cells[1]['friction'] == 1.0   # the calibrated physics
    assert cells[1]['mean_steps'] > cells[0]['mean_steps']   # held, then ramped in again
    text = (tmp_path / 'validation.md').read_text()
    assert '| estop | e-stop at 1 s for 0.5 s, ~/enable 0.5 s after its release |' in text
    assert '1 configurations and 2 scenarios × 4 episodes' in text


@pytest.mark.parametrize(('args', 'message'), [
    (['--scenarios', 'earthquake'], "has no scenario 'earthquake'"),
    (['--scenarios', 'push_cube'], "scenario 'push_cube' is not for the reach task"),
])
@pytest.mark.ros_free
def test_a_scenario_the_gate_cannot_play_is_one_line(args: list[str], message: str,
                                                      tmp_path: Path) -> None:
    result = subprocess.run([VALIDATE, '--policy', str(POLICY), '--out', str(tmp_path), *args],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_changed_scenario_is_a_new_cell() -> None:
    """Scenarios compare by value: the report and a training-sim run must name the same."""
    base = scenario('push_arm')
    assert replace(base, force=base.force) == base and replace(base, force=1.0) != base
