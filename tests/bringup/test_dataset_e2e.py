"""Acceptance (#17): the demo's policy episode, recorded over DDS on the stand-in, and 20
simulated rollouts export to one LeRobot v3.0 dataset that LeRobot's own loader reads, and
every frame matches its source.

The episode is recorded as ``simops-demo`` step 2 records it (``simops-launch real_robot
standin:=true`` with the shipped reach policy, the graph's recorder, the demo's operator:
goals on /goal_pose, ``~/enable``, the outcome on ``~/episode_info``). The bag is read back
with Foxglove's independent ``mcap`` / ``mcap_ros2`` decoder: joint states interpolated at the
frame times equal the dataset's within interpolation error, each frame's action equals the
recorded trajectory it names exactly, and the success flag is the one reported.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from lerobot_loader import lerobot_dataset
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from ros_helpers import REPO, NodeProcess, installed_executable, wait_until

from simops_bringup.command_lines import command_line
from simops_bringup.demo.loop import GOALS
from simops_bringup.demo.ros_operator import Operator
from simops_bringup.graph import build_graph
from simops_core.robot_spec import load_robot_spec
from simops_learning.dataset_cli import load_card
from simops_learning.episode_schema import card_schema
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.sim_episodes import sim_episode
from simops_policy.model import load_policy
from simops_sim.randomization import default_randomization

SPEC = load_robot_spec('fr3')
POLICY = REPO / 'models/policy/fr3_reach.pt'
CARD = POLICY.with_suffix('.yaml')
STARTUP = 30.0      # s, two shared cores
GOAL_TIMEOUT = 10.0
ROLLOUTS, SEED = 20, 0


def record_policy_episode(folder: Path, launch: object) -> Path:
    """simops-demo step 2 with two goals; the recorded bag."""
    values = {'standin': 'true', 'record': 'false', 'policy': str(POLICY)}
    nodes = {n.name: n for n in build_graph('real_robot', values | {
        'record': 'true', 'record_dir': str(folder / 'episodes')})}
    graph = launch('real_robot', *(f'{k}:={v}' for k, v in values.items()))
    with NodeProcess(command_line(nodes['recorder']), folder / 'recorder.log'):
        operator = Operator(SPEC.base_frame)
        try:
            assert operator.wait_for_arm(STARTUP), graph.output
            bag = operator.start_recording('policy')
            operator.publish_goal(np.array(GOALS[0]))
            operator.enable(True)
            assert operator.wait_state('RUNNING', STARTUP), graph.output
            for goal in map(np.array, GOALS[:2]):
                operator.publish_goal(goal)
                assert wait_until(lambda g=goal: operator.distance(g) < 0.02, GOAL_TIMEOUT,
                                  interval=0.01)
                wait_until(lambda: False, 1.0)   # dwell on the goal, as the demo does
            operator.enable(False)
            operator.report_outcome(True, '2/2 goals reached')
            assert operator.stop_recording() == bag
        finally:
            operator.close()
    return Path(bag)


def independent(bag: Path, topics: tuple[str, ...]) -> dict[str, list[tuple[int, object]]]:
    """(receive time ns, decoded message) per topic, read with mcap_ros2's decoder."""
    out: dict[str, list[tuple[int, object]]] = {t: [] for t in topics}
    for file in sorted(bag.glob('*.mcap')):
        with file.open('rb') as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _, channel, message, msg in reader.iter_decoded_messages(topics=list(topics)):
                out[channel.topic].append((message.log_time, msg))
    return out


@pytest.mark.slow
def test_demo_policy_episode_and_rollouts_round_trip(tmp_path: Path, launch: object) -> None:
    bag = record_policy_episode(tmp_path, launch)
    out = tmp_path / 'dataset'
    dataset_exe = installed_executable('simops_learning', 'simops-dataset')
    result = subprocess.run([str(dataset_exe), 'export', str(bag), '--card', str(CARD),
                             '--out', str(out), '--task', 'reach two goals'],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rollout_exe = installed_executable('simops_learning', 'simops-rollout')
    result = subprocess.run([str(rollout_exe), '--policy', str(POLICY), '--out', str(out),
                             '--append', '--episodes', str(ROLLOUTS), '--seed', str(SEED)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr

    dataset = lerobot_dataset(out, tmp_path / 'hf')
    assert dataset.num_episodes == 1 + ROLLOUTS
    episodes = sorted(pq.read_table(sorted((out / 'meta/episodes').rglob('*.parquet')))
                      .to_pylist(), key=lambda r: r['episode_index'])
    real = episodes[0]
    assert real['success'] is True and real['success_known'] is True
    assert real['notes'] == '2/2 goals reached' and real['robot'] == 'fr3'
    n = real['length']
    assert n >= 2 * 20      # at least the 1 s dwell on each of the two goals
    data = pq.read_table(sorted((out / 'data').rglob('*.parquet'))).slice(0, n)
    column = {name: np.array(data.column(name).to_pylist()) for name in data.column_names}
    times = real['start_time'] + np.round(column['timestamp'].astype(float) * 20) / 20

    state_topic, command_topic = '/franka/joint_states', '/fr3_arm_controller/joint_trajectory'
    source = independent(bag, (state_topic, command_topic))
    stamps = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
                       for _, m in source[state_topic]])
    names = list(source[state_topic][0][1].name)
    positions = np.array([[m.position[names.index(j)] for j in SPEC.arm_joints]
                          for _, m in source[state_topic]])
    # Within interpolation error: a 1 kHz linear interpolation errs by |q''| dt^2 / 8, about
    # 1e-6 rad here; the frame times, rebuilt in float64 at 1.7e9 s (0.24 us), add 1e-7.
    for joint in range(7):
        truth = np.interp(times, stamps, positions[:, joint])
        assert np.max(np.abs(column['observation.state'][:, joint] - truth)) < 1e-6
    commands = {log_time: np.array(m.points[0].positions) for log_time, m in
                source[command_topic]}
    for row in range(n):
        received = round(column['source.command.received'][row] * 1e9)
        match = [t for t in commands if abs(t - received) < 1000]   # float64 at 1.7e9 s
        assert len(match) == 1
        assert np.array_equal(column['action'][row, :7], commands[match[0]])
        assert column['source.command.effective'][row] < times[row] + 0.05
    assert real['frames_dropped'] == 0

    card, _ = load_card(CARD)
    env = FR3ReachEnv(card_path=CARD, randomization=default_randomization('randomization'))
    model = load_policy(POLICY, env.card)
    for episode in range(ROLLOUTS):
        truth = sim_episode(env, model.infer, card_schema(card), SEED, episode, {})
        assert episodes[1 + episode]['success'] == truth.meta['success']
        item = dataset[episodes[1 + episode]['dataset_from_index']]
        assert np.array_equal(item['action'].numpy(),
                              truth.columns['action'][0].astype(np.float32))
