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

The first width is taken as sent, not sent: it is the hand's own opening. Every width a node
commands comes out of the safety law, which starts at the measured opening
(:func:`simops_core.safety.start`) and moves it by at most ``gripper_max_step`` (5 mm) a
period. A goal for it would do harm: franka_gripper grasps at any width below the hand's
opening (:mod:`simops_sim.gripper_goal`), and an empty hand closes fully. On the stand-in,
the pick policy's hand closed before it reached the cube whenever the hand read a hair wider
than the opening the policy started from.

A service response can be lost: rmw_fastrtps drops a response when the client's response
reader has not matched within 100 ms (ros2/rmw_fastrtps#390, #467), which happens right
after discovery, when the first goal goes out. A goal request unanswered for
:data:`ANSWER_TIMEOUT` is therefore sent again (the answer to the one given up is ignored),
and a result request unanswered for as long is asked again, so a lost response never stops
the gripper for good.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from control_msgs.action import GripperCommand
from rclpy.action import ActionClient
from rclpy.node import Node

HYSTERESIS = 0.01     # m between the last width sent and a width worth a new goal
GRASP_EFFORT = 20.0   # N, max_effort of the goals (franka_gripper's grasp force)
SEND_PERIOD = 0.05    # s between looks at the newest width (the policy's 20 Hz)
ANSWER_TIMEOUT = 2.0  # s without an answer to a goal or result request before asking again


@dataclass
class _Pending:
    """The goal in flight.

    ``number``: which goal request; ``asked``: when its last request went out (monotonic s);
    ``handle``: its goal handle once accepted.
    """

    number: int
    asked: float
    handle: Any = None


class GripperGoals:
    """Sends the widths given to :meth:`__call__` (m) as GripperCommand goals on ``action``."""

    def __init__(self, node: Node, action: str, hysteresis: float = HYSTERESIS,
                 effort: float = GRASP_EFFORT) -> None:
        self._client = ActionClient(node, GripperCommand, action)
        self._hysteresis, self._effort = hysteresis, effort
        self._lock = threading.Lock()   # callers' thread and the executor's callbacks
        self._wanted: float | None = None
        self._sent: float | None = None
        self._pending: _Pending | None = None
        self.goals = 0     # goal requests sent so far, repeats included
        self.repeats = 0   # goal requests sent again and result requests asked again
        node.create_timer(SEND_PERIOD, self._send)

    def __call__(self, width: float) -> None:
        """Command the opening ``width`` (m); sent when it is worth a goal and none runs."""
        with self._lock:
            if self._wanted is None:   # the hand's own opening: no goal (module docstring)
                self._sent = width
            self._wanted = width

    def _send(self) -> None:
        now = time.monotonic()
        with self._lock:
            pending = self._pending
            if pending is not None:
                if now - pending.asked < ANSWER_TIMEOUT:
                    return
                self.repeats += 1
                pending.asked = now
                if pending.handle is None:   # the goal unanswered: send it again
                    self._pending, self._sent = None, None
        if pending is not None and pending.handle is not None:   # no result yet: ask again
            self._ask_result(pending)
            return
        with self._lock:
            width = self._wanted
            if width is None or (self._sent is not None
                                 and abs(width - self._sent) <= self._hysteresis):
                return
        if not self._client.server_is_ready():
            return
        with self._lock:
            self.goals += 1
            pending = self._pending = _Pending(self.goals, now)
            self._sent = width
        goal = GripperCommand.Goal()
        goal.command.position = width / 2.0   # franka_gripper: half the opening
        goal.command.max_effort = self._effort
        self._client.send_goal_async(goal).add_done_callback(
            lambda future: self._on_response(pending, future))

    def _on_response(self, pending: _Pending, future: Any) -> None:
        handle = future.result()
        with self._lock:
            if pending is not self._pending:   # a goal given up on: its answer came late
                return
            if handle is None or not handle.accepted:
                self._pending = None
                return
            pending.handle, pending.asked = handle, time.monotonic()
        self._ask_result(pending)

    def _ask_result(self, pending: _Pending) -> None:
        pending.handle.get_result_async().add_done_callback(lambda _: self._done(pending))

    def _done(self, pending: _Pending) -> None:
        with self._lock:
            if pending is self._pending:
                self._pending = None
