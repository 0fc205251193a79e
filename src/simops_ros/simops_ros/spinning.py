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
"""

from __future__ import annotations

from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.rcutils_logger import RcutilsLogger
from rclpy.node import Node

UNCONVERTED = 'Unable to convert call argument'   # pybind11's message for a failed take
REPORT_PERIOD = 1.0   # s between two reports of dropped messages


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
