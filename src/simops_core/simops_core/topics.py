"""Topic names, message types and QoS from ``config/topics.yaml`` (no rclpy here).

Nodes turn a :class:`QosSpec` into an ``rclpy.qos.QoSProfile``; this module only validates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simops_core.command_line import ConfigError
from simops_core.yaml_fields import read_yaml

TOPICS_FILE = 'config/topics.yaml'
RELIABILITY = ('reliable', 'best_effort')
DURABILITY = ('volatile', 'transient_local')
HISTORY = ('keep_last', 'keep_all')
# rmw's stable C enum values (rmw/types.h), which rclpy's QoSProfile accepts as ints.
_RMW_CODES = {'reliable': 1, 'best_effort': 2, 'transient_local': 1, 'volatile': 2,
              'keep_last': 1, 'keep_all': 2}


class TopicConfigError(ConfigError):
    """The topics file is missing, unreadable or malformed."""

    hint = 'fix config/topics.yaml'


@dataclass(frozen=True)
class QosSpec:
    """A QoS profile by policy names, as in rclpy's ``*Policy`` enums (lower case)."""

    reliability: str
    durability: str
    history: str
    depth: int

    def as_profile_kwargs(self) -> dict[str, int]:
        """Keyword arguments for ``rclpy.qos.QoSProfile(**kwargs)``."""
        return {'reliability': _RMW_CODES[self.reliability],
                'durability': _RMW_CODES[self.durability],
                'history': _RMW_CODES[self.history], 'depth': self.depth}


@dataclass(frozen=True)
class TopicSpec:
    """A topic's default name, its ROS 2 message type (``pkg/msg/Name``) and its QoS.

    ``qos`` is the publishers'; ``subscribe_qos`` the subscribers' (the same unless the file
    gives a topic ``subscribe: <profile>``, e.g. best effort to hear any publisher).
    """

    key: str
    name: str
    type: str
    qos: QosSpec
    subscribe_qos: QosSpec


def load_topics(path: str | Path = TOPICS_FILE) -> dict[str, TopicSpec]:
    """Load every topic of the topics file, keyed by its key (``joint_states``, ...)."""
    file, raw = read_yaml(path, TopicConfigError, 'topics file', version=1)
    profiles = _profiles(file, raw)
    topics = {}
    for key, value in (raw.get('topics') or {}).items():
        if not isinstance(value, dict) or not {'name', 'type', 'qos'} <= value.keys():
            raise TopicConfigError(f'{file}: topic {key!r} needs name, type and qos')
        if value['qos'] not in profiles:
            raise TopicConfigError(f'{file}: topic {key!r} uses unknown qos {value["qos"]!r}')
        if value['type'].count('/') != 2:
            raise TopicConfigError(f'{file}: topic {key!r} type must be pkg/msg/Name')
        subscribe = value.get('subscribe', value['qos'])
        if subscribe not in profiles:
            raise TopicConfigError(f'{file}: topic {key!r} subscribes with unknown qos '
                                   f'{subscribe!r}')
        topics[key] = TopicSpec(key, value['name'], value['type'], profiles[value['qos']],
                                profiles[subscribe])
    return topics


def load_qos(key: str, path: str | Path = TOPICS_FILE) -> QosSpec:
    """The QoS profile ``key`` of the topics file (``image``: the cameras' topics)."""
    file, raw = read_yaml(path, TopicConfigError, 'topics file', version=1)
    profiles = _profiles(file, raw)
    if key not in profiles:
        raise TopicConfigError(f'{file}: qos {key!r} is missing')
    return profiles[key]


def _profiles(file: Path, raw: dict[str, object]) -> dict[str, QosSpec]:
    qos = raw.get('qos') or {}
    if not isinstance(qos, dict):
        raise TopicConfigError(f'{file}: qos must be a mapping')
    return {key: _qos(file, key, value) for key, value in qos.items()}


def _qos(file: Path, key: str, value: object) -> QosSpec:
    if not isinstance(value, dict):
        raise TopicConfigError(f'{file}: qos {key!r} must be a mapping')
    choices = {'reliability': RELIABILITY, 'durability': DURABILITY, 'history': HISTORY}
    for field, allowed in choices.items():
        if value.get(field) not in allowed:
            raise TopicConfigError(f'{file}: qos {key}.{field} must be one of {allowed}')
    depth = value.get('depth')
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
        raise TopicConfigError(f'{file}: qos {key}.depth must be a positive integer')
    return QosSpec(value['reliability'], value['durability'], value['history'], depth)
