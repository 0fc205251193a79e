"""What differs between the rclpy releases SimOps runs on, in one place.

SimOps is tested on ROS 2 Kilted (rclpy 9.1) and Jazzy (rclpy 7.1, the distro of
franka_ros2 v3). Every difference the nodes meet is bridged here, so the rest of the code
reads as one rclpy:

- ``rclpy.init()`` is a context manager from rclpy 8 (Kilted) on; :func:`initialised` is one
  on both;
- ``rclpy.subscription.MessageInfo`` (the typed dict a two-argument subscription callback
  receives) is named from rclpy 8 on; Jazzy passes the same dict unnamed, and without the
  publisher's GID (:func:`publication`);
- interface packages differ by distro: Jazzy's control_msgs FollowJointTrajectory feedback
  has no ``index`` (:func:`has_field`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import rclpy
from rclpy.signals import SignalHandlerOptions

try:
    from rclpy.subscription import MessageInfo
except ImportError:   # rclpy 7 (Jazzy): the same keys, in a plain dict
    MessageInfo = dict  # type: ignore[misc, assignment]

__all__ = ['DISTRO', 'MessageInfo', 'has_field', 'initialised', 'publication']

# The ROS 2 distro of the rclpy in use, from its release (rclpy 7.x is Jazzy's, 9.x Kilted's).
DISTRO = 'jazzy' if int(version('ros-rclpy').split('.')[0]) < 8 else 'kilted'


@contextmanager
def initialised(args: Sequence[str] | None,
                signal_handler_options: SignalHandlerOptions) -> Iterator[None]:
    """Rclpy initialised with ``args`` for the block, shut down after it (if still up)."""
    rclpy.init(args=args, signal_handler_options=signal_handler_options)
    try:
        yield
    finally:
        rclpy.try_shutdown()


def has_field(message: Any, field: str) -> bool:
    """Whether the interface type (or message) ``message`` has ``field`` in this distro."""
    return field in message.get_fields_and_field_types()


def publication(info: MessageInfo, publishers: Callable[[], int]) -> tuple[str, int | None]:
    """Who published a taken message and its publication sequence number.

    Returns the publisher's GID as hex and the sequence number. rclpy 7 (Jazzy) reports no
    GID: the publisher is then ``'unknown'``, and its sequence number counts only while the
    topic has one publisher (``publishers()``, asked only then: the recorder takes every
    message of every topic through here), since two publishers' numbers interleave.
    """
    gid = info.get('publisher_gid')
    sequence = info.get('publication_sequence_number')
    if gid:
        return bytes(gid['data']).hex(), sequence
    return 'unknown', sequence if publishers() == 1 else None
