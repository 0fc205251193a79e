"""A recorder subscription matched to the publishers' offers, as ``ros2 bag record`` does.

The subscription is reliable only if every offer is, transient-local (latched) only if every
offer is, and keeps a deep reader-side queue. What the bag stores for a topic (type,
definition, RIHS01 hash, offered QoS) comes from the offers and the rosbags typestore.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.topic_endpoint_info import TopicEndpointInfo
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability
from rosbags.interfaces import QosTime as BagTime

from simops_recorder.bag_writer import StoredTopic

# Reader-side queue: 1 s at 5 kHz. DDS acknowledges into this queue from its own thread, so
# a publisher's shallow keep_last history is not overwritten while Python is busy; only a
# recorder process starved of CPU for longer than the publisher's depth can lose samples,
# and the sequence-gap count reports exactly those.
RECORD_QUEUE_DEPTH = 5000


def latched(offers: Sequence[TopicEndpointInfo]) -> bool:
    """True when every publisher offers transient_local durability."""
    return all(o.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for o in offers)


def recording_qos(offers: Sequence[TopicEndpointInfo]) -> QoSProfile:
    """The subscription QoS that matches every offer."""
    reliable = all(o.qos_profile.reliability == ReliabilityPolicy.RELIABLE for o in offers)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=RECORD_QUEUE_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=(DurabilityPolicy.TRANSIENT_LOCAL if latched(offers)
                    else DurabilityPolicy.VOLATILE))


def message_class(msgtype: str) -> type:
    """The rclpy message class of ``pkg/msg/Name``."""
    package, _, type_name = msgtype.split('/')
    return getattr(importlib.import_module(f'{package}.msg'), type_name)


def stored_topic(typestore: Any, name: str, offers: Sequence[TopicEndpointInfo]
                 ) -> StoredTopic | str:
    """What the bag stores for topic ``name``, or why it cannot be recorded."""
    msgtype = offers[0].topic_type
    if msgtype not in typestore.fielddefs:
        return f'type {msgtype} has no known message definition'
    msgdef, _ = typestore.generate_msgdef(msgtype, ros_version=2)
    offered_hash = str(offers[0].topic_type_hash)
    type_hash = (offered_hash if offered_hash.startswith('RIHS01_')
                 else typestore.hash_rihs01(msgtype))
    return StoredTopic(name, msgtype, msgdef, type_hash,
                       tuple(bag_qos(o.qos_profile) for o in offers))


def bag_qos(profile: QoSProfile) -> Qos:
    """The rosbags Qos stored in offered_qos_profiles for an rclpy QoSProfile offer."""
    def duration(value: Any) -> BagTime:
        nanoseconds = value.nanoseconds
        return BagTime(nanoseconds // 10**9, nanoseconds % 10**9)

    return Qos(QosHistory(int(profile.history)), profile.depth,
               QosReliability(int(profile.reliability)), QosDurability(int(profile.durability)),
               duration(profile.deadline), duration(profile.lifespan),
               QosLiveliness(int(profile.liveliness)),
               duration(profile.liveliness_lease_duration),
               profile.avoid_ros_namespace_conventions)
