"""A node whose stop stalls: spin_until_signal, then a shutdown step that never finishes."""

from __future__ import annotations

import threading

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from simops_ros.spinning import spin_until_signal


def main() -> None:
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('stalled_stop')
    # said from inside the spin, where the signal handlers are in place
    timer = node.create_timer(0.01, lambda: (print('spinning', flush=True), timer.cancel()))
    spin_until_signal(SingleThreadedExecutor(), node)
    print('stopping', flush=True)
    threading.Event().wait()   # a stop that never ends: waits on nothing, forever


if __name__ == '__main__':
    main()
