"""A node with its own context, spun on a background thread, for tools that are not nodes.

Tests and the demo's operator talk to the graph from an ordinary Python program: they need
a node that receives while the program waits, and that leaves no global rclpy state behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import rclpy
from rclpy.action import ActionClient
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor


class BackgroundNode:
    """``node`` in a private ``context``, spun by a daemon thread until :meth:`close`."""

    def __init__(self, name: str) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._turn = threading.Lock()    # held by the spinner for each spin_once
        self._queue = threading.Lock()   # taken before _turn, so a pause is not starved
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                with self._queue:
                    self._turn.acquire()
                try:
                    self.executor.spin_once(timeout_sec=0.05)
                finally:
                    self._turn.release()
            except Exception:  # the context went down while spinning
                if self.context.ok():
                    raise
                return

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the spinner between two ``spin_once`` calls (at most its 50 ms wait).

        rclpy's ``ActionClient`` registers itself with the node before it has finished
        constructing, so a spinner that runs meanwhile dies on ``'ActionClient' object has no
        attribute '_lock'`` (ros2/rclpy#1589, fixed upstream after the Kilted wheels).
        """
        with self._queue:
            self._turn.acquire()
        try:
            yield
        finally:
            self._turn.release()

    def action_client(self, action: type, name: str) -> Any:
        """An ``ActionClient`` for ``action`` on ``name``, created while the spinner waits.

        Its requests (a goal, a result, a cancel) are sent while the spinner waits too.
        """
        with self.paused():
            return _PausingActionClient(self, action, name)

    def close(self) -> None:
        """Shut the context down, join the spinner and destroy the node."""
        if self.context.ok():
            rclpy.shutdown(context=self.context)
        self._thread.join(timeout=5)
        self.executor.shutdown()
        self.node.destroy_node()


class _PausingActionClient(ActionClient):
    """An ``ActionClient`` whose requests go out while its :class:`BackgroundNode` pauses.

    rclpy sends a request, then files its sequence number to match the answer; a spinner
    that takes the answer in between drops it ("Ignoring unexpected goal response") and the
    future never completes (ros2/rclpy#1123; the lock of ros2/rclpy#1308 is in the Kilted
    wheels, its Jazzy backport ros2/rclpy#1519 is not in rclpy 7.1.6). Sent from the
    spinner's own thread (a done callback), a request needs no pause: nothing spins then.
    """

    def __init__(self, owner: BackgroundNode, action: type, name: str) -> None:
        self._owner = owner
        super().__init__(owner.node, action, name)

    def _paused(self, send: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is self._owner._thread:
            return send(*args, **kwargs)
        with self._owner.paused():
            return send(*args, **kwargs)

    def send_goal_async(self, goal: Any, feedback_callback: Any = None,
                        goal_uuid: Any = None) -> Any:
        return self._paused(super().send_goal_async, goal, feedback_callback, goal_uuid)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        return self._paused(super()._cancel_goal_async, goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        return self._paused(super()._get_result_async, goal_handle)
