"""Following ``/clock`` from a thread of the node's own instead of its executor (rclpy).

With ``use_sim_time`` rclpy's TimeSource subscribes to ``/clock`` in the node's default
callback group (rclpy/time_source.py, ``_subscribe_to_clock_topic``), so the executor wakes
and rebuilds its wait set in Python for every message: at the simulator's 1 kHz that costs
an rclpy node about half a core (``bench/clock_cost.py``). :class:`PolledSimClock` takes
that subscription over: a :class:`~simops_ros.polled.PolledGroup` subscription whose newest
message a thread reads every :data:`POLL` s and sets as the node clock's ROS time override,
as TimeSource's ``clock_callback`` does. Sim-time timers fire as before: rcl wakes a timer's
wait set when an override reaches its deadline, whichever thread sets it.
"""

from __future__ import annotations

import threading
import time

from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rclpy.time_source import CLOCK_TOPIC
from rosgraph_msgs.msg import Clock

from simops_ros.polled import Polled, PolledGroup, leading_time, never_called

POLL = 0.001   # s of wall time between two looks at /clock
JOIN_TIMEOUT = 1.0   # s


class PolledSimClock:
    """``node``'s ROS time from ``/clock``, read on a thread; nothing without use_sim_time.

    Call :meth:`stop` before destroying the node.
    """

    def __init__(self, node: Node) -> None:
        self._node = node
        self._running = threading.Event()
        self._thread: threading.Thread | None = None
        if not node.get_parameter('use_sim_time').value:
            return
        for subscription in list(node.subscriptions):   # TimeSource's
            if subscription.topic_name == CLOCK_TOPIC:
                node.destroy_subscription(subscription)
        # rclpy's own profile for /clock (TimeSource): the newest message only
        qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._clock = Polled(node.create_subscription(
            Clock, CLOCK_TOPIC, never_called, qos, raw=True, callback_group=PolledGroup()))
        self._running.set()
        self._thread = threading.Thread(target=self._follow, name='sim_clock', daemon=True)
        self._thread.start()

    @property
    def following(self) -> bool:
        """Whether a thread follows /clock (the node uses sim time)."""
        return self._thread is not None

    def _follow(self) -> None:
        clock, polled = self._node.get_clock(), self._clock
        while self._running.is_set():
            if polled.take_newest():
                stamp = leading_time(polled.raw or b'')
                if stamp is not None:
                    clock.set_ros_time_override(Time(seconds=stamp[0], nanoseconds=stamp[1],
                                                     clock_type=ClockType.ROS_TIME))
            time.sleep(POLL)

    def stop(self) -> None:
        """Stop the thread (before the node is destroyed)."""
        self._running.clear()
        if self._thread is not None:
            self._thread.join(timeout=JOIN_TIMEOUT)
