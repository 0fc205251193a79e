"""What a teleop node gives the recorder: button presses and the operator's twist (rclpy).

:class:`OperatorTwist` publishes the twist the node servoes (``operator_twist`` of
config/topics.yaml), which the recorder records. :class:`RecorderButtons` turns ``/joy``
presses (:mod:`simops_teleop.record_buttons`) into calls of the recorder's ``~/start``,
``~/stop`` and ``~/discard`` (std_srvs/Trigger) and messages on its ``~/episode_info``
(std_msgs/String), and logs each answer. Calls are asynchronous: a tick never waits for
the recorder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
from geometry_msgs.msg import TwistStamped
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from simops_core.topics import TopicSpec
from simops_ros.qos import qos_profile
from simops_teleop.record_buttons import LABELS, SERVICES, presses


class OperatorTwist:
    """Publishes a twist (6,) m/s, rad/s in ``frame`` on ``topic``, stamped now."""

    def __init__(self, node: Node, topic: TopicSpec, frame: str) -> None:
        self.node, self.frame = node, frame
        self._publisher = node.create_publisher(TwistStamped, topic.name, qos_profile(topic))

    def __call__(self, twist: np.ndarray) -> None:
        """Publish ``twist``: linear x, y, z then angular x, y, z."""
        msg = TwistStamped()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.header.frame_id = self.frame
        v, w = msg.twist.linear, msg.twist.angular
        v.x, v.y, v.z, w.x, w.y, w.z = (float(c) for c in twist)
        self._publisher.publish(msg)


class RecorderButtons:
    """``mapping`` (button -> action) of ``node``'s ``/joy``, for the recorder ``recorder``."""

    def __init__(self, node: Node, recorder: str, mapping: dict[int, str]) -> None:
        self.node, self.mapping = node, mapping
        self._before: Sequence[int] = ()
        recorder = recorder.rstrip('/')
        used = set(mapping.values())
        self._clients = {action: node.create_client(Trigger, f'{recorder}/{service}')
                         for action, service in SERVICES.items() if action in used}
        self._info = (node.create_publisher(String, f'{recorder}/episode_info', 10)
                      if used & set(LABELS) else None)

    def on_joy(self, buttons: Sequence[int]) -> None:
        """Fire the actions pressed since the last message."""
        for action in presses(self.mapping, self._before, buttons):
            if action in LABELS and self._info is not None:
                self._info.publish(String(data=json.dumps({'success': LABELS[action]})))
                self.node.get_logger().info(f'marked the episode a {action}')
                continue
            client = self._clients[action]
            if not client.service_is_ready():
                self.node.get_logger().warning(f'{action}: {client.srv_name} is not there; is '
                                               'the recorder running?')
                continue
            future = client.call_async(Trigger.Request())
            future.add_done_callback(lambda f, a=action: self._answered(a, f))
        self._before = list(buttons)

    def _answered(self, action: str, future: object) -> None:
        result = future.result()   # type: ignore[attr-defined]
        log = self.node.get_logger()
        (log.info if result.success else log.warning)(f'{action}: {result.message}')
