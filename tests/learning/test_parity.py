"""Env ↔ ROS graph parity for the shipped policy (the sim-to-real bug the anchors report most).

The simulator node runs in lockstep (one 0.05 s period per command; ``lockstep_timeout``
long, so sim time only advances on commands) and the policy node at 20 Hz on the shipped
policy, with the env's StepSettings (``ramp_time`` 0: the node ramps on wall-clock time,
which no offline replay reproduces to 1e-5). Per episode: policy disabled, sim reset, goal
on /goal_pose, policy enabled; success when an end-of-period /ee_pose is within 2 cm within
200 periods. The env runs the same goals through ``FR3ReachEnv`` with the same model loader.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped
from learning_helpers import CARD, POLICY
from policy_helpers import (
    STATE,
    TOPICS,
    call_enable,
    call_reset,
    first_contact,
    publish_goal,
    qos,
    states,
)
from ros_helpers import NodeProcess, RosProbe, wait_until
from std_msgs.msg import Float64MultiArray, String

from simops_core.policy_step import StepSettings
from simops_core.stamps import to_nanoseconds
from simops_learning.reach_env import MAX_EPISODE_STEPS, SUCCESS_RADIUS, FR3ReachEnv, episode_goal
from simops_learning.rollout import run_episodes
from simops_policy.model import load_policy

EPISODES = 20
COMPARED_COMMANDS = 20
SEED = 7
PERIOD_NS = 50_000_000
# The node's staleness runs on the wall clock, the lockstep sim's periods on commands: a
# state held up past the 0.1 s default by a slow step would make the node hold (an extra
# period and a fresh ramp the env never takes). The env's states are never stale.
SAFETY = StepSettings(ramp_time=0.0, stale_state_timeout=10.0)
COMMANDS = TOPICS['joint_commands'].name
ACTIONS = TOPICS['policy_action'].name
EE_POSE = TOPICS['ee_pose'].name


def env_rollouts() -> tuple[list[bool], np.ndarray, np.ndarray]:
    """Env successes per episode, and episode 0's first commands (N, 8) and raw actions."""
    env = FR3ReachEnv(card_path=CARD, safety=SAFETY)
    model = load_policy(POLICY, env.card)
    successes = [r.success for r in run_episodes(env, model.infer, range(EPISODES), SEED)]
    commands, actions = [], []

    def recording(obs: np.ndarray) -> np.ndarray:
        action = model.infer(obs)
        actions.append(action)
        return action

    obs = env.reset(seed=0, options={'goal': episode_goal(SEED, 0)})[0]
    for _ in range(COMPARED_COMMANDS):
        obs, *_, info = env.step(recording(obs))
        commands.append(info['command'])
    return successes, np.array(commands), np.array(actions)


def end_of_period_poses(probe: RosProbe, since: int) -> list[PoseStamped]:
    """/ee_pose messages after index ``since`` stamped at the end of a control period."""
    return [m for m in probe.messages(EE_POSE)[since:]
            if to_nanoseconds(m.header.stamp) % PERIOD_NS == 0
            and (m.header.stamp.sec or m.header.stamp.nanosec)]


def reached(pose: PoseStamped, goal: np.ndarray) -> bool:
    p = pose.pose.position
    return float(np.linalg.norm([p.x - goal[0], p.y - goal[1], p.z - goal[2]])) < SUCCESS_RADIUS


@pytest.mark.slow
def test_graph_matches_env(ros_probe: RosProbe, tmp_path: Path) -> None:
    env_success, env_commands, env_actions = env_rollouts()

    ros_probe.subscribe(COMMANDS, Float64MultiArray, 1000)
    ros_probe.subscribe(ACTIONS, Float64MultiArray, 1000)
    ros_probe.subscribe(EE_POSE, PoseStamped, 5000)
    ros_probe.subscribe(STATE, String, qos('policy_state'))
    goal_pub = ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    graph_success: list[bool] = []
    first_commands = first_actions = None
    with NodeProcess.ros2_run(
            'simops_sim', 'sim', '--ros-args', '-p', 'sync_mode:=lockstep',
            '-p', 'control_period:=0.05', '-p', 'lockstep_timeout:=3600.0',
            log_path=tmp_path / 'sim.log') as sim, \
        NodeProcess.ros2_run(
            'simops_policy', 'policy', '--ros-args', '-p', f'model_path:={POLICY}',
            '-p', 'start_enabled:=false',
            *SAFETY.ros_args(), log_path=tmp_path / 'policy.log') as policy:
        assert wait_until(lambda: states(ros_probe)[-1:] == ['DISABLED'], 30), policy.output
        joint_states = TOPICS['joint_states'].name
        assert wait_until(lambda: ros_probe.node.count_subscribers(joint_states) >= 1
                          and ros_probe.node.count_publishers(joint_states) >= 1, 30)
        call_reset(ros_probe)
        publish_goal(goal_pub, episode_goal(SEED, 0))
        first_contact(ros_probe)
        for episode in range(EPISODES):
            goal = episode_goal(SEED, episode)
            time.sleep(0.3)                     # in-flight commands land before the reset
            call_reset(ros_probe)
            publish_goal(goal_pub, goal)
            time.sleep(0.3)                     # goal and the reset state reach the policy
            poses_before = len(ros_probe.messages(EE_POSE))
            commands_before = len(ros_probe.messages(COMMANDS))
            actions_before = len(ros_probe.messages(ACTIONS))
            assert call_enable(ros_probe, True).success
            assert wait_until(lambda: states(ros_probe)[-1:] == ['RUNNING'], 30), policy.output

            def done(goal: np.ndarray = goal, since: int = poses_before) -> bool:
                poses = end_of_period_poses(ros_probe, since)
                return len(poses) >= MAX_EPISODE_STEPS or any(reached(p, goal) for p in poses)

            assert wait_until(done, MAX_EPISODE_STEPS * 0.05 * 3 + 10), (
                sim.output[-2000:], policy.output[-2000:])
            assert call_enable(ros_probe, False).success
            # The policy brakes to rest before it stops commanding; wait, so no braking
            # command advances the lockstep sim after the next reset.
            assert wait_until(lambda: states(ros_probe)[-1:] == ['DISABLED'], 10)
            poses = end_of_period_poses(ros_probe, poses_before)[:MAX_EPISODE_STEPS]
            graph_success.append(any(reached(p, goal) for p in poses))
            if episode == 0:
                first_commands = np.array([m.data for m in ros_probe.messages(COMMANDS)[
                    commands_before:commands_before + COMPARED_COMMANDS]])
                first_actions = np.array([m.data for m in ros_probe.messages(ACTIONS)[
                    actions_before:actions_before + COMPARED_COMMANDS]])
        assert policy.stop() == 0, policy.output
        assert sim.stop() == 0, sim.output

    print(f'graph success {np.mean(graph_success):.0%}, env success {np.mean(env_success):.0%}; '
          f'first {COMPARED_COMMANDS} commands differ by at most '
          f'{np.abs(first_commands - env_commands).max():.1e}')
    assert graph_success == env_success   # episode by episode
    assert first_commands.shape == env_commands.shape
    np.testing.assert_array_equal(first_actions, env_actions)   # bit for bit
    np.testing.assert_array_equal(first_commands, env_commands)
