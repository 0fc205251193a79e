"""The real arm's ROS interfaces from ``config/real_robot.yaml`` (no rclpy here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from simops_bringup.arguments import COMMAND_INTERFACES, GraphError
from simops_core.topics import TopicSpec
from simops_core.yaml_fields import read_yaml

REAL_ROBOT_FILE = 'config/real_robot.yaml'


@dataclass(frozen=True)
class ArmInterfaces:
    """How the arm's driver stack names and serves the SimOps topics."""

    command_interface: str
    joint_state_rate: float  # Hz
    remap: Mapping[str, str]  # topic key (config/topics.yaml) -> the arm's topic name


def load_arm_interfaces(topics: Mapping[str, TopicSpec],
                        path: str | Path = REAL_ROBOT_FILE) -> ArmInterfaces:
    """Load and validate the arm interfaces file against the topic keys of ``topics``."""
    file, raw = read_yaml(path, GraphError, 'arm interfaces file', version=1)
    command = raw.get('command_interface')
    if command not in COMMAND_INTERFACES:
        raise GraphError(f'{file}: command_interface must be one of {COMMAND_INTERFACES}')
    rate = raw.get('joint_state_rate')
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
        raise GraphError(f'{file}: joint_state_rate must be a positive number of Hz')
    remap = raw.get('remap')
    if not isinstance(remap, dict):
        raise GraphError(f'{file}: remap must map topic keys to topic names')
    for key, name in remap.items():
        if key not in topics:
            raise GraphError(f'{file}: remap key {key!r} is not a topic of config/topics.yaml')
        if not isinstance(name, str) or not name.startswith('/') or name.endswith('/'):
            raise GraphError(f'{file}: remap.{key} must be an absolute topic name')
    return ArmInterfaces(command, float(rate), dict(remap))
