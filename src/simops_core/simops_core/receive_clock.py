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
    if received.size == 0 or sent.shape != received.shape or np.any(sent <= 0):
        return received * 1e-9
    delivery = received - sent
    fastest = int(delivery.min())
    if int(delivery.max()) - fastest > SAME_CLOCK * 1e9 or not delivery.any():
        return received * 1e-9
    return (sent + fastest) * 1e-9


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
