"""A node's own threads end it when they die: no node answers with nothing behind it.

A node whose control, physics or tick thread raised would otherwise go on spinning: it
answers ``~/enable``, keeps its publishers and its last mode on the topic, while nothing
commands or watches the arm behind it. :class:`ThreadFailure` is the one rule the nodes
share: the first unexpected error of one of the node's threads is logged FATAL, the node's
context is shut down (its spin ends, ``run_node`` calls its ``stop()``), and the process
exits :data:`~simops_core.command_line.EXIT_FAILED`, which a launch file reports.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable

import rclpy
from rclpy.node import Node

from simops_core.command_line import EXIT_FAILED, EXIT_OK

THREAD_EXIT_CODES = {EXIT_FAILED: 'a thread of the node failed (the log names it)'}


class ThreadFailure:
    """The first unexpected error of ``node``'s own threads; it stops the node.

    ``running``: the event the node's threads run while set; an error once it is cleared
    (the node stopping) is not a failure, nor one after the context shut down (Ctrl-C).
    """

    def __init__(self, node: Node, running: threading.Event | None = None) -> None:
        self.node, self.running = node, running
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def __call__(self, exc: BaseException, thread: str) -> None:
        """``thread`` (its name, for the log) died of ``exc``: stop the node."""
        if not self.node.context.ok() or (self.running is not None
                                          and not self.running.is_set()):
            return
        with self._lock:
            if self.error is not None:
                return
            self.error = exc
        self.node.get_logger().fatal(f'the {thread} thread failed: {exc!r} at '
                                     f'{_innermost(exc)}; the node stops (exit {EXIT_FAILED})')
        rclpy.try_shutdown(context=self.node.context)

    def start(self, body: Callable[[], None], thread: str) -> threading.Thread:
        """Run ``body`` in a daemon thread named ``thread``; an exception from it stops the node."""
        def run() -> None:
            try:
                body()
            except Exception as exc:   # stop the node rather than run on without the thread
                self(exc, thread)
        started = threading.Thread(target=run, name=thread, daemon=True)
        started.start()
        return started

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_FAILED` once a thread failed, else :data:`EXIT_OK`."""
        return EXIT_OK if self.error is None else EXIT_FAILED


def _innermost(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f'{frames[-1].filename}:{frames[-1].lineno}' if frames else '?'
