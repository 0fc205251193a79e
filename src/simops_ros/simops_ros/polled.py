"""Subscriptions a node's own thread or timer takes the newest message from.

High-rate topics (1 kHz joint states) cost a Python callback per message when an executor
runs them; a control loop that needs only the newest message takes it at its tick instead.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rclpy.callback_groups import CallbackGroup
from rclpy.serialization import deserialize_message
from rclpy.subscription import Subscription

T = TypeVar('T')


class PolledGroup(CallbackGroup):
    """A callback group no executor runs: its subscriptions are only read with take_newest."""

    def can_execute(self, entity: Any) -> bool:
        """Never: executors leave these subscriptions out of their wait sets."""
        return False

    def beginning_execution(self, entity: Any) -> bool:
        """Never."""
        return False

    def ending_execution(self, entity: Any) -> None:
        """Nothing to release."""


def take_all(subscription: Subscription) -> list[tuple[bytes, Any]]:
    """Every message queued on a ``raw=True`` subscription, in order.

    Each as (CDR bytes, its MessageInfo); the handle is held only while taking.
    """
    taken: list[tuple[bytes, Any]] = []
    with subscription.handle:
        while (message := subscription.handle.take_message(subscription.msg_type,
                                                           True)) is not None:
            taken.append(message)
    return taken


def never_called(msg: Any) -> None:
    """Callback of polled subscriptions, which no executor runs (see PolledGroup)."""
    raise AssertionError('a polled subscription was executed')


@dataclass
class Polled:
    """Newest message of a polled subscription: serialised bytes, DDS receipt time (ns).

    Create the subscription with ``raw=True``, callback :func:`never_called` and a
    :class:`PolledGroup`.
    """

    subscription: Subscription
    raw: bytes | None = None
    received_ns: int = 0
    read_ns: int = 0   # receipt time (ns) of the message :meth:`read` last decoded

    @property
    def fresh(self) -> bool:
        """Whether the newest message arrived after the one :meth:`read` last decoded."""
        return self.received_ns != self.read_ns

    def take_newest(self) -> bool:
        """Drain the subscription's queue, keep the newest message; True if one arrived."""
        taken = take_all(self.subscription)
        if not taken:
            return False
        newest = taken[-1]
        self.raw = newest[0]
        self.received_ns = newest[1]['received_timestamp'] or time.time_ns()
        return True

    def newest_stamp(self) -> float:
        """Take the newest message; its ``header.stamp`` (s): see :meth:`stamp`."""
        self.take_newest()
        return self.stamp()

    def stamp(self) -> float:
        """``header.stamp`` (s) of the message held, 0 for none or one too short.

        For message types that begin with a std_msgs/Header (JointState): read from the CDR
        bytes without decoding the rest (encapsulation, then ``sec``, ``nanosec``).
        """
        return 0.0 if self.raw is None else header_stamp(self.raw)

    def read(self, check: Callable[[Any], T]) -> T | str:
        """``check(message)`` on the newest message, or the problem if its bytes don't decode."""
        self.read_ns = self.received_ns
        try:
            message = deserialize_message(self.raw, self.subscription.msg_type)
        except Exception as exc:  # bytes rclpy cannot decode
            return f'undecodable message ({exc})'
        return check(message)


def header_stamp(raw: bytes) -> float:
    """The ``header.stamp`` (s) of a serialised message that begins with a std_msgs/Header.

    0 for bytes too short to hold it (see :func:`leading_time`).
    """
    stamp = leading_time(raw)
    return 0.0 if stamp is None else stamp[0] + 1e-9 * stamp[1]


def leading_time(raw: bytes) -> tuple[int, int] | None:
    """``(sec, nanosec)`` of the builtin_interfaces/Time a serialised message begins with.

    A std_msgs/Header's stamp, or a rosgraph_msgs/Clock's clock: read from the CDR bytes
    (encapsulation, then ``sec`` int32, ``nanosec`` uint32) without decoding the rest; None
    for bytes too short to hold it.
    """
    if len(raw) < 12:
        return None
    order = '<' if raw[1] & 1 else '>'   # CDR_LE or CDR_BE
    sec, nanosec = struct.unpack_from(f'{order}iI', raw, 4)
    return sec, nanosec
