"""The rclpy QoS profile of a topic of ``config/topics.yaml``."""

from __future__ import annotations

from rclpy.qos import QoSProfile

from simops_core.topics import TopicSpec


def qos_profile(topic: TopicSpec) -> QoSProfile:
    """``topic``'s QoS as an rclpy profile (reliability, durability, history, depth)."""
    return QoSProfile(**topic.qos.as_profile_kwargs())
