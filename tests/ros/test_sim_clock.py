"""A node with use_sim_time follows /clock from its own thread, not from its executor.

rclpy's TimeSource runs /clock in the node's default callback group: at the simulator's
1 kHz the executor woke a thousand times a second (bench/clock_cost.py: about half a core).
"""

from __future__ import annotations

import threading
import time

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

from simops_ros.polled import PolledGroup
from simops_ros.sim_clock import PolledSimClock
from simops_ros.spinning import spin_once


def test_sim_time_comes_from_a_polled_clock_and_sim_time_timers_still_fire() -> None:
    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('sim_clock_probe', context=context, parameter_overrides=[
            Parameter('use_sim_time', value=True)])
        wall = rclpy.create_node('clock_source', context=context)
        clock = PolledSimClock(node)
        assert clock.following
        (subscription,) = [s for s in node.subscriptions if s.topic_name == '/clock']
        assert isinstance(subscription.callback_group, PolledGroup)   # no executor runs it
        fired: list[int] = []
        node.create_timer(0.1, lambda: fired.append(node.get_clock().now().nanoseconds))
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        running = threading.Event()
        running.set()

        def spin() -> None:
            while running.is_set():
                spin_once(executor, node.get_logger(), 0.05)

        spinner = threading.Thread(target=spin, daemon=True)
        spinner.start()
        publisher = wall.create_publisher(Clock, '/clock', 10)
        deadline = time.monotonic() + 5.0
        while publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        message = Clock()
        for ms in range(1, 1001):   # 1 s of sim time in 1 ms steps, 4x faster than the wall
            message.clock.sec, message.clock.nanosec = 100 + ms // 1000, (ms % 1000) * 1_000_000
            publisher.publish(message)
            time.sleep(0.00025)
        time.sleep(0.2)
        now = node.get_clock().now().nanoseconds
        running.clear()
        spinner.join(timeout=2.0)
        clock.stop()
    finally:
        rclpy.shutdown(context=context)
    assert now == 101_000_000_000, now   # the newest /clock, exactly
    # a 10 Hz timer on sim time: once per 100 ms of /clock (the first one at 100.1 s or so)
    assert 8 <= len(fired) <= 11, fired
    assert all(100_000_000_000 < t <= 101_000_000_000 for t in fired), fired


def test_without_sim_time_nothing_is_taken_over() -> None:
    context = Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('wall_clock_probe', context=context)
        clock = PolledSimClock(node)
        assert not clock.following
        assert not [s for s in node.subscriptions if s.topic_name == '/clock']
        clock.stop()
    finally:
        rclpy.shutdown(context=context)
