"""When a recorded command reached the arm: receive times mapped onto the joint-state clock.

A recorder stamps every message with its receive time (its own clock); an arm's joint states
carry header stamps on the arm driver's clock (system time on a real arm, sim time under
/clock). :class:`ReceiveClock` maps one onto the other through the joint states themselves.
``fit`` times streamed and unstamped commands with it, and ``simops-dataset export`` takes
every command at the time it gives. :func:`delivery_times` takes a starved recorder's
lateness out of its receive times where the bag holds send times. No rclpy here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

STALL = 0.005              # s without a newer joint state that means the arm ran late
SAME_CLOCK = 1.0           # s: send and receive times further apart are two clocks' times


def delivery_times(received_ns: Sequence[int], sent_ns: Sequence[int]) -> np.ndarray:
    """When each of a topic's messages reached a recorder that kept up (N,) s.

    ``received_ns`` (N,) the recorder's receive times, ``sent_ns`` (N,) the publisher's send
    times, ns. A recorder short of CPU receives late: a command then seems to reach the arm
    later than it did, and joint states seem late like those of an arm that ran late. Where
    the bag holds send times (MCAP's publish time as rosbag2 Jazzy writes it, the DDS source
    timestamp: rosbag2 0.26.5 recorder.cpp:611-614, mcap_storage.cpp:875-876), each message
    reached a recorder that kept up at its send time plus its topic's fastest delivery,
    which also absorbs a constant offset between the publisher's and the recorder's clocks.
    Where it holds none (Humble's MCAP and sqlite3 repeat the receive time, and a bag
    recorded with ``--use-sim-time`` receives on another clock: its deliveries spread over
    more than :data:`SAME_CLOCK`), the receive times are all there is.
    """
    received = np.asarray(received_ns, dtype=np.int64)
    sent = np.asarray(sent_ns, dtype=np.int64)
    scan = DeliveryScan()
    if sent.shape == received.shape:
        scan.add_many(received, sent)
    else:
        scan.unusable = True
    return scan.delivery().times(received, sent)


@dataclass(frozen=True)
class Delivery:
    """One topic's rule from receive and send times to delivery times (:func:`delivery_times`).

    ``fastest_ns``: the topic's fastest delivery (receive less send time), ns; ``None`` where
    the bag holds no usable send times, and the receive times stand.
    """

    fastest_ns: int | None

    def times(self, received_ns: np.ndarray, sent_ns: np.ndarray) -> np.ndarray:
        """Delivery times (N,) s of messages received and sent at these times (N,) ns."""
        if self.fastest_ns is None:
            return np.asarray(received_ns, dtype=np.int64) * 1e-9
        return (np.asarray(sent_ns, dtype=np.int64) + self.fastest_ns) * 1e-9

    def time(self, received_ns: int, sent_ns: int) -> float:
        """One message's delivery time, s."""
        return (received_ns if self.fastest_ns is None else sent_ns + self.fastest_ns) * 1e-9


class DeliveryScan:
    """A topic's :class:`Delivery`, from messages taken one or an array at a time.

    Constant memory: the rule for a bag too long to hold (``simops-dataset export``).
    """

    def __init__(self) -> None:
        self.count = 0
        self.unusable = False   # a message without a send time
        self._fastest = np.iinfo(np.int64).max
        self._slowest = np.iinfo(np.int64).min

    def add(self, received_ns: int, sent_ns: int) -> None:
        """Take one message's receive and send times, ns."""
        self.count += 1
        if sent_ns <= 0:
            self.unusable = True
        delivery = received_ns - sent_ns
        self._fastest = min(self._fastest, delivery)
        self._slowest = max(self._slowest, delivery)

    def add_many(self, received_ns: np.ndarray, sent_ns: np.ndarray) -> None:
        """Take messages' receive and send times (N,) ns."""
        if received_ns.size == 0:
            return
        self.count += received_ns.size
        self.unusable |= bool(np.any(sent_ns <= 0))
        delivery = received_ns - sent_ns
        self._fastest = min(self._fastest, int(delivery.min()))
        self._slowest = max(self._slowest, int(delivery.max()))

    def delivery(self) -> Delivery:
        """The rule for the messages taken (:func:`delivery_times`).

        Send times plus the fastest delivery, where every message has a send time, some
        differ from their receive times, and the deliveries spread over no more than
        :data:`SAME_CLOCK`; else the receive times.
        """
        spread = self._slowest - self._fastest
        if (self.count == 0 or self.unusable or spread > SAME_CLOCK * 1e9
                or self._fastest == self._slowest == 0):
            return Delivery(None)
        return Delivery(self._fastest)


@dataclass(frozen=True)
class ReceiveClock:
    """Maps receive times (s) onto the joint-state stamp clock through the joint states.

    ``received`` (N,) s when each joint state was recorded, ``stamps`` (N,) s its header stamp.
    The smallest ``received - stamps`` is the clock offset (plus the least transport
    latency); a message received at ``w`` reached the arm at ``w`` minus that offset, as the
    recorder and the arm receive it alike. When the arm ran late (a stalled simulator catching
    up, an overloaded driver), so did its joint states, and a command took effect half a
    joint-state period after the newest state published before it was received (plus the
    usual delivery latency of a joint state). That estimate holds when it is more than
    :data:`STALL` earlier than the first (shorter gaps are delivery jitter, not a late arm)
    and the first joint state received after the command came more than :data:`STALL` late:
    a late arm's states arrive late, while states that were only lost (a real arm's log
    drops samples: Gaz et al.'s Panda recording has 504 gaps of 1.5-8.8 ms in 21 s) leave a
    gap with the next state on time, and the commands inside it took effect as received.
    Effect times never run backwards: a command takes effect no earlier than the one
    received before it.

    When the arm ran late, the recording cannot say when it took the command: the arm took
    it when its own callbacks ran, somewhere in its catch-up, and a trajectory controller
    starts a new trajectory from the state it reads at the update that takes it
    (joint_trajectory_controller.cpp:298-313, ros2_controllers jazzy ed360c9): 10 ms at
    0.17 rad/s is a start 1.7 mrad apart.
    :meth:`arm_late` names those commands.
    """

    received: np.ndarray
    stamps: np.ndarray

    def __call__(self, when: np.ndarray) -> np.ndarray:
        """Stamp-clock times (M,) s of the receive times ``when`` (M,) s."""
        return self.estimate(when)[0]

    def arm_late(self, when: np.ndarray) -> np.ndarray:
        """Whether the arm ran late (M,) bool when each of ``when`` (M,) s was received.

        The first joint state received after it came more than :data:`STALL` late, so when
        the arm took it is known only to within the stall.
        """
        return self.estimate(when)[1]

    def estimate(self, when: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both at once: the stamp-clock times (M,) s and :meth:`arm_late` (M,) bool."""
        order = np.argsort(self.received, kind='stable')
        received, stamps = self.received[order], self.stamps[order]
        lag = received - stamps
        offset, usual = float(lag.min()), float(np.median(lag))
        when = np.asarray(when, dtype=float)
        direct = when - offset
        newest = np.maximum.accumulate(stamps)
        half = 0.5 * float(np.median(np.diff(stamps))) if stamps.size > 1 else 0.0
        index = np.searchsorted(received, when, side='right') - 1
        late = newest[np.maximum(index, 0)] + half + (usual - offset)
        after = np.minimum(index + 1, received.size - 1)
        arm_late = (index + 1 >= received.size) | (lag[after] - offset > STALL)
        effect = np.where((index >= 0) & (late < direct - STALL) & arm_late, late, direct)
        order = np.argsort(when, kind='stable')
        effect[order] = np.maximum.accumulate(effect[order])
        return effect, (index >= 0) & (index + 1 < received.size) & arm_late
