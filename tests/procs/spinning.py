"""The ``main()`` tail of a simple node: spin until Ctrl-C or shutdown, then clean up."""

from __future__ import annotations

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def spin_until_shutdown(node: Node) -> None:
    """Spin ``node`` until SIGINT or an external shutdown; destroy it and shut rclpy down."""
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
