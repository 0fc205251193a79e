"""ROS times and durations (``sec``, ``nanosec``) to and from seconds and nanoseconds.

Read by attribute, so ``builtin_interfaces`` messages from rclpy and those a ``rosbags``
typestore decodes from a bag both work. Pure Python, no rclpy.
"""

from __future__ import annotations

from typing import Any

NANOS_PER_SECOND = 1_000_000_000


def to_seconds(stamp: Any) -> float:
    """A ``builtin_interfaces/Time`` or ``Duration`` in s (float: about 0.24 us near 1.8e9 s)."""
    return stamp.sec + 1e-9 * stamp.nanosec


def to_nanoseconds(stamp: Any) -> int:
    """A ``builtin_interfaces/Time`` or ``Duration`` in ns, exactly."""
    return stamp.sec * NANOS_PER_SECOND + stamp.nanosec


def split_nanoseconds(nanoseconds: int) -> tuple[int, int]:
    """(sec, nanosec) of a time or duration in ns, nanosec in [0, 1e9), as ROS stores it."""
    sec, nanosec = divmod(int(nanoseconds), NANOS_PER_SECOND)
    return sec, nanosec
