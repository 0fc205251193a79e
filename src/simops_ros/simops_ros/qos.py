"""The rclpy QoS profile of a topic (or a QoS profile) of ``config/topics.yaml``."""

from __future__ import annotations

from rclpy.qos import QoSProfile

from simops_core.topics import QosSpec, TopicSpec


def qos_profile(topic: TopicSpec) -> QoSProfile:
    """``topic``'s QoS as an rclpy profile (reliability, durability, history, depth)."""
    return qos_from_spec(topic.qos)


def subscription_qos(topic: TopicSpec) -> QoSProfile:
    """The QoS a subscription to ``topic`` uses (its ``subscribe`` profile, or its own)."""
    return qos_from_spec(topic.subscribe_qos)


def qos_from_spec(qos: QosSpec) -> QoSProfile:
    """A QoS profile of the topics file as an rclpy profile."""
    return QoSProfile(**qos.as_profile_kwargs())
