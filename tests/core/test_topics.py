"""config/topics.yaml: the single source of topic names, types and QoS."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simops_core.paths import resolve_resource
from simops_core.topics import TopicConfigError, load_topics


def test_defaults_match_the_real_arm_stack() -> None:
    topics = load_topics()
    assert topics['joint_states'].name == '/joint_states'
    assert topics['joint_states'].type == 'sensor_msgs/msg/JointState'
    assert topics['joint_trajectory'].name == '/fr3_arm_controller/joint_trajectory'
    assert topics['joint_trajectory'].type == 'trajectory_msgs/msg/JointTrajectory'
    assert topics['clock'].qos.reliability == 'best_effort'
    assert topics['estop'].qos.durability == 'transient_local'
    # franka_robot_state_broadcaster publishes robot_state reliable; subscribers take it best
    # effort, which also hears the convenience topics' best-effort publishers (v2.4+/v3.3+).
    assert topics['robot_state'].qos.reliability == 'reliable'
    assert topics['robot_state'].subscribe_qos.reliability == 'best_effort'
    assert topics['joint_states'].subscribe_qos == topics['joint_states'].qos


def test_every_type_is_importable() -> None:
    import importlib

    for topic in load_topics().values():
        package, _, name = topic.type.split('/')
        assert hasattr(importlib.import_module(f'{package}.msg'), name), topic.type


@pytest.mark.parametrize(('mutate', 'message'), [
    (lambda t: t['topics']['clock'].update(qos='nope'), 'unknown qos'),
    (lambda t: t['topics']['clock'].update(subscribe='nope'), 'subscribes with unknown qos'),
    (lambda t: t['qos']['state'].update(depth=0), 'depth'),
    (lambda t: t['qos']['state'].update(reliability='sometimes'), 'reliability'),
    (lambda t: t['topics']['clock'].update(type='Clock'), 'pkg/msg/Name'),
    (lambda t: t.update(version=3), 'version'),
])
def test_malformed_topics_file(tmp_path: Path, mutate: object, message: str) -> None:
    tree = yaml.safe_load(resolve_resource('config/topics.yaml').read_text())
    mutate(tree)
    path = tmp_path / 'topics.yaml'
    path.write_text(yaml.safe_dump(tree))
    with pytest.raises(TopicConfigError, match=message):
        load_topics(path)


def test_profile_kwargs_match_rclpy_enums() -> None:
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    for topic in load_topics().values():
        profile = QoSProfile(**topic.qos.as_profile_kwargs())
        assert profile.reliability == ReliabilityPolicy.get_from_short_key(topic.qos.reliability)
        assert profile.durability == DurabilityPolicy.get_from_short_key(topic.qos.durability)
        assert profile.history == HistoryPolicy.get_from_short_key(topic.qos.history)
        assert profile.depth == topic.qos.depth
