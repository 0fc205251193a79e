"""Success labels from recorded poses (the envs' criteria), without ROS."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml
from rosbags.typesys import Stores, get_typestore

from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_recorder.bag_writer import StoredTopic
from simops_recorder.episode_bags import RecordedTopic, episode_bags
from simops_recorder.outcome import OutcomeJudge

STORE = get_typestore(Stores.ROS2_JAZZY)
PoseStamped = STORE.types['geometry_msgs/msg/PoseStamped']
Header = STORE.types['std_msgs/msg/Header']
Time = STORE.types['builtin_interfaces/msg/Time']
Pose = STORE.types['geometry_msgs/msg/Pose']
Point = STORE.types['geometry_msgs/msg/Point']
Quaternion = STORE.types['geometry_msgs/msg/Quaternion']


def pose(x: float, y: float, z: float) -> bytes:
    msg = PoseStamped(Header(Time(0, 0), 'fr3_link0'),
                      Pose(Point(x, y, z), Quaternion(0.0, 0.0, 0.0, 1.0)))
    return bytes(STORE.serialize_cdr(msg, 'geometry_msgs/msg/PoseStamped'))


def judge(criterion: str = 'pick_place') -> OutcomeJudge:
    return OutcomeJudge(criterion, 0.02, '/goal_pose', '/object_pose', STORE)


def test_the_closest_approach_decides_as_in_the_env() -> None:
    j = judge()
    assert j.verdict() is None                          # no goal, no pose yet
    j.observe('/object_pose', pose(0.5, 0.0, 0.02))     # before any goal: not counted
    j.observe('/goal_pose', pose(0.4, 0.1, 0.2))
    assert j.verdict() is None
    for z in (0.02, 0.1, 0.19, 0.12):                   # passes 1 cm from the goal, drops it
        j.observe('/object_pose', pose(0.4, 0.1, z))
    success, note = j.verdict()
    assert success and 'within 10.0 mm' in note and 'pick_place' in note
    j.start()                                           # a new episode, the goal kept
    j.observe('/object_pose', pose(0.4, 0.1, 0.05))
    assert j.verdict()[0] is False
    j.observe('/ee_pose', pose(0.4, 0.1, 0.2))          # not the tracked topic
    j.observe('/object_pose', b'\x00\x01')              # malformed: skipped
    assert j.verdict()[0] is False


def test_an_unlabelled_episode_is_labelled_and_an_operator_label_wins(tmp_path: Path) -> None:
    settings = SimpleNamespace(**{   # the node's parameters: the schema's defaults, then these
        **defaults(load_parameter_schema('recorder')),
        'compression': 'none', 'storage': 'mcap', 'topics': ['/goal_pose', '/object_pose'],
        'robot': 'fr3', 'robot_mode': 'sim', 'policy_sha256': '', 'sim_params_file': '',
        'root': str(tmp_path), 'split_duration': 0.0, 'split_size': 0,
        'success_criterion': 'pick_place', 'success_radius': 0.02})
    bags = episode_bags(settings, lambda *_: None)
    topics = []
    for name in ('/goal_pose', '/object_pose'):
        msgdef, _ = STORE.generate_msgdef('geometry_msgs/msg/PoseStamped', ros_version=2)
        topics.append(RecordedTopic(StoredTopic(
            name, 'geometry_msgs/msg/PoseStamped', msgdef,
            STORE.hash_rihs01('geometry_msgs/msg/PoseStamped')), latched=name == '/goal_pose'))
    goal, cube = topics
    labels = []
    for operator in (None, False):
        assert bags.start(topics)[0]
        if operator is not None:
            bags.episode.info.success = operator
        bags.write(goal, 1, pose(0.4, 0.1, 0.2), 'g', 1)
        bags.write(cube, 2, pose(0.4, 0.1, 0.195), 'c', 1)
        ok, path = bags.stop('stopped')
        assert ok
        data = yaml.safe_load((Path(path) / 'metadata.yaml').read_text())[
            'rosbag2_bagfile_information']['custom_data']
        labels.append((data['simops.success'], data['simops.notes']))
    assert labels[0][0] == 'true' and 'auto-labelled' in labels[0][1]
    assert labels[1] == ('false', '')
