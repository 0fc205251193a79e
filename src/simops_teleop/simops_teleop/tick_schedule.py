"""When the teleop node ticks: once a period, in step with a steady input stream (no rclpy).

A servo that ticks on a free-running timer takes a device's input up to one period late:
moveit_servo's loop sleeps on a ``WallRate`` of ``1 / publish_period`` and takes the newest
command (``ServoNode::servoLoop``, moveit_servo/src/servo_node.cpp). At the teleop node's
100 Hz that is up to 10 ms between a twist and the target that carries it.
:class:`TickSchedule` ticks as soon as an input has arrived instead, and between inputs
once a period:

- never sooner than ``period`` after the last tick fell due: the safety pipeline's limits
  are per period (:class:`simops_core.safety.SafetyLimits`), so a target is never more than
  one period's step from the last. Ticks are timed from when they fell due, not from when a
  thread got to run them (:meth:`TickSchedule.due_since`), as a timer's are: a late
  wake-up does not push every later tick, and the next input's with it;
- a tick with an input not yet taken runs as soon as that allows;
- without one, the tick runs ``period`` after the last, unless the input stream is steady
  (:data:`SYNC_INPUTS` inputs, no gap longer than ``stale``): a tick within ``window``
  of its next input waits for it, and ticks that would miss it run up to ``2 * window``
  later until they fall on the inputs (:meth:`TickSchedule.next_tick`). Ticks are
  ``period`` to ``period + 2 * window`` apart.

A device at 50 Hz and a node at 100 Hz: one tick as each input arrives and one halfway
between. Times are monotonic seconds. :class:`TickLoop` runs a schedule on a thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from simops_ros.control_thread import raise_thread_priority

SYNC_INPUTS = 8     # inputs that make a stream steady; its next is predicted from them
WINDOW = 0.25       # of the period: how long a tick waits for a due input
LOCK_PERIOD = 0.005  # s: shorter periods (above 200 Hz) do not wait for inputs


class TickSchedule:
    """The teleop node's tick times: see the module docstring.

    ``period`` s between ticks at least; ``window`` s a tick may wait for a due input;
    ``stale`` s: a longer gap between two inputs ends their stream.
    """

    def __init__(self, period: float, window: float, stale: float) -> None:
        if period <= 0.0 or window < 0.0 or stale <= 0.0:
            raise ValueError(f'period ({period:g}) and stale ({stale:g}) must be positive, '
                             f'window ({window:g}) non-negative')
        self.period, self.window, self.stale = period, window, stale
        self.last_tick = -np.inf
        self.pending = False   # an input arrived since the last tick
        self._pending_at = -np.inf   # when the first of them arrived, s
        self._inputs: deque[float] = deque(maxlen=SYNC_INPUTS)   # arrival times, s

    @classmethod
    def for_commands(cls, period: float, stale: float, fixed_grid: bool) -> TickSchedule:
        """The schedule for commands paced by their arrival, or on a ``fixed_grid``.

        ``/joint_commands`` (a simulator paces them by arrival): a window of :data:`WINDOW`
        periods. Chained trajectories (:class:`simops_ros.point_commands.SegmentChain`) run
        one-period segments on a fixed grid: no window, so no lengthened period, and an
        input waits for the grid's next tick, as on a timer. Nor below :data:`LOCK_PERIOD`:
        an input waits less than that period anyway, and the safety pipeline's limit on the
        change of a step (acceleration x period^2: 0.02 mrad at 500 Hz on the FR3) leaves no
        room for steps over periods of different lengths.
        """
        lock = not fixed_grid and period >= LOCK_PERIOD
        return cls(period, WINDOW * period if lock else 0.0, stale)

    def input(self, now: float) -> None:
        """An input arrived at ``now`` s."""
        if self._inputs and now - self._inputs[-1] > self.stale:
            self._inputs.clear()
        self._inputs.append(now)
        if not self.pending:
            self._pending_at = now
        self.pending = True

    def expected(self) -> float | None:
        """When the steady stream's next input is due (s); None without a steady stream.

        Predicted from the last :data:`SYNC_INPUTS` arrivals at their mean interval, from
        their mean time (a device's jitter averages out of it as it does not out of the
        last arrival alone).
        """
        inputs = self._inputs
        n = len(inputs)
        if n < SYNC_INPUTS:
            return None
        interval = (inputs[-1] - inputs[0]) / (n - 1)
        return sum(inputs) / n + interval * (n + 1) / 2

    def next_tick(self) -> float:
        """When the next tick runs (s), unless an input arrives first and it is due then.

        With a steady stream whose next input is due: a tick up to ``2 * window`` before it
        waits for it (the input runs it as it arrives), until ``window`` after it was due and
        at most ``2 * window``; a tick whose later ticks, once a period, would all miss it by
        more than ``window`` runs up to ``2 * window`` later, so that they come to fall on
        the inputs.
        """
        earliest = self.last_tick + self.period
        due = None if self.pending else self.expected()
        if due is None or due + self.window < earliest:   # none due, or overdue
            return earliest
        ahead = due - earliest
        if ahead <= 2 * self.window:   # wait for it: the tick runs as it arrives
            return min(due + self.window, earliest + 2 * self.window)
        phase = ahead % self.period
        if phase <= self.window or phase >= self.period - self.window:
            return earliest   # a later tick, once a period, comes within window of it
        return earliest + min(2 * self.window, phase)

    def due_since(self, now: float) -> float:
        """When the tick running at ``now`` s fell due (s).

        At :meth:`next_tick`, or when its input arrived after that (without a window, on
        the grid still). A thread that woke late passes this to :meth:`ticked`, so its
        lateness does not move later ticks (as a timer's does not). A tick a whole period
        late, or the first, fell due at ``now``: the ticks it missed are not made up.
        """
        due = max(self.last_tick + self.period, self._pending_at) \
            if self.pending and self.window > 0 else self.next_tick()
        return due if now - self.period < due <= now else now

    def due(self, now: float) -> bool:
        """Whether a tick runs at ``now`` s."""
        return now >= self.next_tick()

    def ticked(self, now: float) -> float:
        """A tick ran at ``now`` s and took every input so far: the period it covers (s).

        The time since the last tick, ``period`` to ``period + 2 * window`` (``period`` for
        the first): a tick integrates its velocity over it, so lengthened periods keep the
        commanded speed.
        """
        since = now - self.last_tick if np.isfinite(self.last_tick) else self.period
        covered = min(max(since, self.period), self.period + 2 * self.window)
        self.last_tick, self.pending = now, False
        return covered


class TickLoop:
    """Calls ``tick(covered)`` on a thread of its own at the times ``schedule`` gives.

    ``covered``: the period (s) the tick covers (:meth:`TickSchedule.ticked`).

    The thread runs SCHED_FIFO where permitted, as the policy's control thread
    (:func:`simops_ros.control_thread.raise_thread_priority`): a tick that falls due wakes
    it ahead of the node's other threads. :meth:`input` is called as each input arrives
    (any thread) and wakes it; an exception from ``tick`` ends the loop and goes to
    ``failed``. :meth:`stop` ends it.
    """

    def __init__(self, schedule: TickSchedule, tick: Callable[[float], None],
                 failed: Callable[[BaseException], None]) -> None:
        self.schedule, self._tick, self._failed = schedule, tick, failed
        self._wake = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._run, name='teleop_tick', daemon=True)

    def start(self) -> None:
        """Start ticking."""
        self._thread.start()

    def input(self) -> None:
        """An input arrived now: note it, and wake the thread if its tick is due."""
        with self._wake:
            self.schedule.input(time.monotonic())
            self._wake.notify()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop ticking; wait up to ``timeout`` s for a running tick."""
        with self._wake:
            self._running = False
            self._wake.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        raise_thread_priority()
        schedule = self.schedule
        try:
            while True:
                with self._wake:
                    while self._running and not schedule.due(now := time.monotonic()):
                        self._wake.wait(schedule.next_tick() - now)
                    if not self._running:
                        return
                    covered = schedule.ticked(schedule.due_since(now))
                self._tick(covered)
        except Exception as exc:  # the node stops rather than leave the arm uncommanded
            self._failed(exc)
