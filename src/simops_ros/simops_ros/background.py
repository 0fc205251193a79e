"""A node with its own context, spun on a background thread, for tools that are not nodes.

Tests and the demo's operator talk to the graph from an ordinary Python program: they need
a node that receives while the program waits, and that leaves no global rclpy state behind.
"""

from __future__ import annotations

import threading

import rclpy
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
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context went down while spinning
                if self.context.ok():
                    raise
                return

    def close(self) -> None:
        """Shut the context down, join the spinner and destroy the node."""
        if self.context.ok():
            rclpy.shutdown(context=self.context)
        self._thread.join(timeout=5)
        self.executor.shutdown()
        self.node.destroy_node()
