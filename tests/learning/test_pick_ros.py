"""The shipped pick-and-place policy through the ROS graph: sim node and policy node over DDS.

Per episode: policy disabled, sim reset (the cube back at the scene's (0.5, 0, 0.02) m), a
goal on /goal_pose, policy enabled; success when /object_pose comes within 2 cm of the goal
within the episode's 200 periods. Goals are the env's for that cube (``episode_task``).

- realtime, as deployed: at least 8 of 10 episodes succeed, the gripper included;
- lockstep, against ``SimOps/FR3PickPlace-v0`` with the same cube and goals: the first 20
  commands (arm targets and gripper width) are identical and the outcomes agree.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import PoseStamped
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
from ros_helpers import REPO, NodeProcess, RosProbe, wait_until
from std_msgs.msg import Float64MultiArray, String

from simops_core.policy_step import StepSettings
from simops_learning.pick_env import MAX_EPISODE_STEPS, FR3PickPlaceEnv
from simops_learning.reach_env import SUCCESS_RADIUS
from simops_policy.model import load_policy

POLICY = REPO / 'models/policy/fr3_pick_place.pt'
CUBE = (0.5, 0.0, 0.0)          # x, y m and yaw rad: where the scene (and a reset) puts it
REALTIME = StepSettings(ramp_time=0.0)
# In lockstep the node's staleness runs on the wall clock, the sim's periods on commands: a
# state held up past the 0.1 s default by a slow step would make the node hold (an extra
# period and a fresh ramp the env never takes). The env's states are never stale.
LOCKSTEP = StepSettings(ramp_time=0.0, stale_state_timeout=10.0)
COMMANDS = TOPICS['joint_commands'].name
OBJECT_POSE = TOPICS['object_pose'].name
COMPARED_COMMANDS = 20


def episode_goal(episode: int) -> np.ndarray:
    """The env's goal (3,) m for the scene's cube, episode ``episode``."""
    env = FR3PickPlaceEnv()
    env.reset(seed=episode, options={'object': CUBE})
    return env.goal.copy()


def placed(probe: RosProbe, since: int, goal: np.ndarray) -> bool:
    for msg in probe.messages(OBJECT_POSE)[since:]:
        p = msg.pose.position
        if np.linalg.norm([p.x - goal[0], p.y - goal[1], p.z - goal[2]]) < SUCCESS_RADIUS:
            return True
    return False


def run_graph(probe: RosProbe, tmp_path: Path, episodes: int, sim_args: list[str],
              settings: StepSettings) -> tuple[list[bool], np.ndarray]:
    """Episodes through the graph; successes and episode 0's first commands (N, 8)."""
    probe.subscribe(COMMANDS, Float64MultiArray, 2000)
    probe.subscribe(OBJECT_POSE, PoseStamped, 20000)
    probe.subscribe(STATE, String, qos('policy_state'))
    goal_pub = probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    successes, first = [], np.zeros((0, 8))
    with NodeProcess.ros2_run('simops_sim', 'sim', '--ros-args', *sim_args,
                              log_path=tmp_path / 'sim.log') as sim, \
        NodeProcess.ros2_run(
            'simops_policy', 'policy', '--ros-args', '-p', f'model_path:={POLICY}',
            '-p', 'start_enabled:=false',
            *settings.ros_args(), log_path=tmp_path / 'policy.log') as policy:
        assert wait_until(lambda: states(probe)[-1:] == ['DISABLED'], 30), policy.output
        call_reset(probe)
        publish_goal(goal_pub, episode_goal(0))
        first_contact(probe)
        for episode in range(episodes):
            goal = episode_goal(episode)
            time.sleep(0.3)                     # in-flight commands land before the reset
            call_reset(probe)
            publish_goal(goal_pub, goal)
            time.sleep(0.3)                     # the goal and the reset state reach the policy
            poses, commands = len(probe.messages(OBJECT_POSE)), len(probe.messages(COMMANDS))
            assert call_enable(probe, True).success
            assert wait_until(lambda: states(probe)[-1:] == ['RUNNING'], 30), policy.output
            def over(g: np.ndarray = goal, p: int = poses, c: int = commands) -> bool:
                return (placed(probe, p, g)
                        or len(probe.messages(COMMANDS)) - c >= MAX_EPISODE_STEPS)
            wait_until(over, MAX_EPISODE_STEPS * 0.05 * 4 + 10)
            assert call_enable(probe, False).success
            assert wait_until(lambda: states(probe)[-1:] == ['DISABLED'], 10), (
                episode, states(probe)[-5:], policy.story(), sim.story(2000))
            successes.append(placed(probe, poses, goal))
            if episode == 0:
                first = np.array([m.data for m in probe.messages(COMMANDS)[
                    commands:commands + COMPARED_COMMANDS]])
        assert policy.stop() == 0, policy.output
        assert sim.stop() == 0, sim.output
    return successes, first


@pytest.mark.slow
def test_the_shipped_policy_picks_and_places_through_the_graph(ros_probe: RosProbe,
                                                               tmp_path: Path) -> None:
    successes, _ = run_graph(ros_probe, tmp_path, 10, [], REALTIME)
    print(f'graph (realtime): {sum(successes)} of {len(successes)} placed')
    assert sum(successes) >= 8, successes


def env_rollouts(episodes: int) -> tuple[list[bool], np.ndarray]:
    env = FR3PickPlaceEnv(card_path=POLICY.with_suffix('.yaml'), safety=LOCKSTEP)
    model = load_policy(POLICY, env.card)
    successes, commands = [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode, options={'object': CUBE})
        while True:
            obs, _, terminated, truncated, info = env.step(model.infer(obs))
            if episode == 0 and len(commands) < COMPARED_COMMANDS:
                commands.append(info['command'])
            if terminated or truncated:
                break
        successes.append(bool(info['is_success']))
    return successes, np.array(commands)


@pytest.mark.slow
def test_graph_in_lockstep_matches_the_env(ros_probe: RosProbe, tmp_path: Path) -> None:
    env_success, env_commands = env_rollouts(10)
    graph_success, graph_commands = run_graph(
        ros_probe, tmp_path, 10, ['-p', 'sync_mode:=lockstep', '-p', 'control_period:=0.05',
                                  '-p', 'lockstep_timeout:=3600.0'], LOCKSTEP)
    print(f'graph {graph_success}, env {env_success}; first {COMPARED_COMMANDS} commands '
          f'differ by at most {np.abs(graph_commands - env_commands).max():.1e}')
    np.testing.assert_array_equal(graph_commands, env_commands)   # bit for bit
    assert graph_success == env_success   # episode by episode
