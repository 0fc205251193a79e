"""Twists as geometry_msgs/TwistStamped, stamped on the node's clock (rclpy)."""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import TwistStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile


class TwistPublisher:
    """Publishes twists on ``topic`` (``qos``), each stamped now, in ``frame`` by default.

    A twist is (6,): linear x, y, z in m/s, then angular x, y, z in rad/s, in the frame the
    message names.
    """

    def __init__(self, node: Node, topic: str, qos: QoSProfile | int, frame: str) -> None:
        self.node, self.frame = node, frame
        self._publisher = node.create_publisher(TwistStamped, topic, qos)
        self._msg = TwistStamped()

    def __call__(self, twist: np.ndarray, frame: str | None = None) -> None:
        """Publish ``twist`` (6,) in ``frame`` (None: the publisher's)."""
        msg = self._msg
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.frame if frame is None else frame
        v, w = msg.twist.linear, msg.twist.angular
        v.x, v.y, v.z, w.x, w.y, w.z = (float(c) for c in twist)
        self._publisher.publish(msg)
