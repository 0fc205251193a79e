"""What a teleop node's buttons ask of the recorder (rclpy).

:class:`RecorderButtons` turns ``/joy``
presses (:mod:`simops_teleop.record_buttons`) into calls of the recorder's ``~/start``,
``~/stop`` and ``~/discard`` (std_srvs/Trigger) and messages on its ``~/episode_info``
(std_msgs/String), and logs each answer. Calls are asynchronous: a tick never waits for
the recorder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from simops_teleop.record_buttons import LABELS, SERVICES, presses


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
