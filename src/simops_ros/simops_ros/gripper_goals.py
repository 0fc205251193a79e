"""A commanded gripper width as franka_gripper goals, no faster than the gripper acts.

On a real arm the Franka Hand is not on the arm controller's topic: franka_gripper serves
it through actions. :class:`GripperGoals` turns the width a policy commands every control
period into control_msgs ``GripperCommand`` goals on franka_gripper's ``gripper_action`` (its node
name is the franka_ros2 release's: :meth:`simops_core.franka_ros2.FrankaRelease.gripper_action`)
(franka_gripper moves when the width opens the hand and grasps when it closes it): a goal
only when the width has moved more than :data:`HYSTERESIS` from the last one sent, and never
while the previous goal is still running, so the gripper is not flooded with goals it
cannot act on; the newest width is sent once it is free. The caller (a control thread) only
stores the width: goals are sent from the node's executor every :data:`SEND_PERIOD`, so an
action client call never delays a control period.
"""

from __future__ import annotations

import threading
from typing import Any

from control_msgs.action import GripperCommand
from rclpy.action import ActionClient
from rclpy.node import Node

HYSTERESIS = 0.01     # m between the last width sent and a width worth a new goal
GRASP_EFFORT = 20.0   # N, max_effort of the goals (franka_gripper's grasp force)
SEND_PERIOD = 0.05    # s between looks at the newest width (the policy's 20 Hz)


class GripperGoals:
    """Sends the widths given to :meth:`__call__` (m) as GripperCommand goals on ``action``."""

    def __init__(self, node: Node, action: str, hysteresis: float = HYSTERESIS,
                 effort: float = GRASP_EFFORT) -> None:
        self._client = ActionClient(node, GripperCommand, action)
        self._hysteresis, self._effort = hysteresis, effort
        self._lock = threading.Lock()   # callers' thread and the executor's callbacks
        self._wanted: float | None = None
        self._sent: float | None = None
        self._busy = False
        self.goals = 0   # goals sent so far
        node.create_timer(SEND_PERIOD, self._send)

    def __call__(self, width: float) -> None:
        """Command the opening ``width`` (m); sent when it is worth a goal and none runs."""
        with self._lock:
            self._wanted = width

    def _send(self) -> None:
        with self._lock:
            width = self._wanted
            if width is None or self._busy or (self._sent is not None
                                               and abs(width - self._sent) <= self._hysteresis):
                return
        if not self._client.server_is_ready():
            return
        with self._lock:
            self._busy, self._sent = True, width
            self.goals += 1
        goal = GripperCommand.Goal()
        goal.command.position = width / 2.0   # franka_gripper: half the opening
        goal.command.max_effort = self._effort
        self._client.send_goal_async(goal).add_done_callback(self._on_response)

    def _on_response(self, future: Any) -> None:
        handle = future.result()
        if handle is None or not handle.accepted:
            self._free()
            return
        handle.get_result_async().add_done_callback(lambda _: self._free())

    def _free(self) -> None:
        with self._lock:
            self._busy = False
