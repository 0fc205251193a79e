"""Spinning that outlives a message rclpy cannot hand over: a bad message is no crash.

rclpy converts each message it takes into its Python class from C++; when that fails,
pybind11 raises ``RuntimeError('Unable to convert call argument ...')`` out of
``Executor.spin_once``, and a plain ``rclpy.spin`` ends the node with a traceback. It
happens when a Ctrl-C lands during the conversion (the KeyboardInterrupt is raised in the
conversion's Python code, and rclpy shuts the context down a moment later from its signal
thread: seen on the policy node under load, at the simulator's 1 kHz joint states, as
ros/joint_state_publisher#117 reports), and for a message rclpy cannot represent
(ros2/rclpy#848). Either way the message is dropped and reported, and spinning goes on
until the context shuts down.

:func:`spin_until_signal` is for a node with threads of its own (the simulator's physics,
the recorder's writes): SIGINT and SIGTERM are noticed between two waits, so the node stops
its threads and is destroyed while the context is still up, and the context shuts down
last. A node still alive :data:`STOP_REPORT_AFTER` s after the signal prints every
thread's stack to stderr (Python's faulthandler, from a thread of its own), so a hang at
shutdown says where it is before the launcher's SIGTERM and SIGKILL. rclpy's own handlers
(``SignalHandlerOptions.ALL``) shut the context down from their signal thread at once,
under the feet of a thread that is publishing; run such a node with
``SignalHandlerOptions.NO``.
"""

from __future__ import annotations

import faulthandler
import signal
import threading

from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node

UNCONVERTED = 'Unable to convert call argument'   # pybind11's message for a failed take
REPORT_PERIOD = 1.0   # s between two reports of dropped messages
STOP_CHECK_PERIOD = 0.1   # s, longest wait before a SIGINT/SIGTERM is noticed
STOP_REPORT_AFTER = 3.0   # s after a stop signal: still running, print the stacks


def spin_once(executor: Executor, logger: RcutilsLogger,
              timeout_sec: float | None = None) -> None:
    """``executor.spin_once(timeout_sec)``, dropping and reporting an unconvertible message."""
    try:
        executor.spin_once(timeout_sec)
    except RuntimeError as exc:
        if UNCONVERTED not in str(exc):
            raise
        logger.error(f'dropped a message rclpy could not convert to Python ({exc})',
                     throttle_duration_sec=REPORT_PERIOD)


def spin(*nodes: Node) -> None:
    """Spin ``nodes`` in one single-threaded executor until their context shuts down."""
    executor = SingleThreadedExecutor(context=nodes[0].context)
    for node in nodes:
        executor.add_node(node)
    logger = nodes[0].get_logger()
    try:
        while executor.context.ok():
            spin_once(executor, logger)
    except ExternalShutdownException:
        pass   # the context shut down while it waited
    finally:
        executor.shutdown()


def spin_until_signal(executor: Executor, *nodes: Node) -> None:
    """Spin ``nodes`` in ``executor`` until SIGINT/SIGTERM, or their context shuts down.

    The signal is noticed at a wait (within :data:`STOP_CHECK_PERIOD`), never inside a
    callback; the executor is shut down on the way out, the context is left up. Once one
    has come, SIGTERM takes its default action again, so the SIGTERM a launcher sends a
    node that has not finished stopping ends it; a second SIGINT (a terminal's Ctrl-C
    reaches every node of a launch, and ros2 launch sends its own) changes nothing.
    """
    stop = threading.Event()

    def on_signal(*_: object) -> None:
        if not stop.is_set():
            faulthandler.dump_traceback_later(STOP_REPORT_AFTER, exit=False)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    for node in nodes:
        executor.add_node(node)
    logger = nodes[0].get_logger()
    try:
        while not stop.is_set() and nodes[0].context.ok():
            spin_once(executor, logger, STOP_CHECK_PERIOD)
    except ExternalShutdownException:
        pass   # the context shut down while it waited
    finally:
        executor.shutdown()


def spin_threaded(*nodes: Node) -> None:
    """:func:`spin_until_signal` in a single-threaded executor, for a node with its own threads.

    Run it with ``SignalHandlerOptions.NO``: SIGINT and SIGTERM then reach no rclpy signal
    thread, and the node's ``stop()`` joins its threads while the context is up. Under
    rclpy's handlers, Jazzy's policy node died by SIGSEGV at a Ctrl-C in
    ``executor.shutdown()``, destroying the executor's SIGINT guard condition
    (rclpy 7.1.6, rclpy/signals.py:65) once the signal thread had shut the context down.
    """
    spin_until_signal(SingleThreadedExecutor(), *nodes)
