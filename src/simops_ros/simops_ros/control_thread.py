"""A control thread's clock: deadlines on wall or sim time; real-time priority where permitted."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable

from simops_core.thread_priority import schedule_fifo

FIFO_PRIORITY = 10   # SCHED_FIFO priority of a control thread, when permitted
NICE = -10           # else its nice value, when permitted
STOP_POLL = 0.1      # s, longest sleep before a stop is noticed
SIM_POLL = 0.001     # s between readings of sim time (joint states come at up to 1 kHz)
SIM_FALLBACK = 2.0   # periods of wall time without a sim-time tick before a supervising one
SIM_CATCH_UP = 5     # periods of sim time a control thread catches up, one tick each


def sleep_until(deadline: float, running: threading.Event) -> bool:
    """Sleep to the absolute ``deadline`` (time.monotonic, s); True if told to stop meanwhile."""
    while running.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(remaining, STOP_POLL))
    return True


def raise_thread_priority() -> str:
    """Give the calling thread SCHED_FIFO, else a lower nice value, where permitted.

    Returns the scheduling the thread got: ``fifo``, ``nice`` or ``default``.
    """
    if schedule_fifo(FIFO_PRIORITY, 'control thread', 'FIFO_PRIORITY')[0]:
        return 'fifo'
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, PermissionError, OSError):
        return 'default'
    return 'nice'


class SimDeadlines:
    """Deadlines ``period`` s apart on a clock that may stand still or jump: sim time.

    The first reading above zero (a clock that has been set) is due at once; a clock that
    jumped back by more than a period (a reset simulator) re-anchors the deadlines there.
    A simulator catching up on a hiccup runs its clock faster than the wall's: deadlines
    passed meanwhile fall due one per reading, up to :data:`SIM_CATCH_UP` periods behind;
    further behind, they are skipped.
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self._deadline: float | None = None

    def due(self, now: float) -> int | None:
        """None if the deadline is still ahead of ``now`` (s); else the periods skipped."""
        if now <= 0.0:
            return None
        if self._deadline is None or now < self._deadline - self.period:
            self._deadline = now
        if now < self._deadline:
            return None
        behind = math.floor((now - self._deadline) / self.period)
        skipped = behind if behind > SIM_CATCH_UP else 0
        self._deadline += (skipped + 1) * self.period
        return skipped


def run_periodic(period: float, running: threading.Event, tick: Callable[[float, bool], None],
                 slack: Callable[[], None], slack_period: float,
                 missed: Callable[[int], None],
                 sim_now: Callable[[], float] | None = None) -> None:
    """Call ``tick(wake, True)`` on absolute deadlines ``period`` s apart until ``running`` clears.

    ``wake`` is the time.monotonic() the tick woke at. After a tick, ``slack()`` runs every
    ``slack_period`` s (diagnostics). When ticks overran whole periods, those are skipped to
    keep the phase and ``missed(count)`` is told.

    ``sim_now`` (s): the simulator's time under ``use_sim_time`` (a node reads it from the
    stamp of its newest measured state, so a tick always has the state of its period). The
    deadlines are then on that clock (:class:`SimDeadlines`), as a controller manager on sim
    time updates: a simulator slower than the wall clock gets one tick per period of its own
    time, not more. Where :data:`SIM_FALLBACK` periods of wall time pass without one (a
    paused, stalled or absent simulator), ``tick(wake, False)`` runs, to supervise only.
    """
    if sim_now is not None:
        return _run_on_sim_time(period, running, tick, slack, slack_period, missed, sim_now)
    deadline = time.monotonic() + period
    next_slack = deadline + slack_period
    while not sleep_until(deadline, running):
        wake = time.monotonic()
        tick(wake, True)
        if wake >= next_slack:
            next_slack += slack_period
            slack()
        deadline += period
        behind = time.monotonic() - deadline
        if behind > 0:
            count = math.ceil(behind / period)
            deadline += count * period
            missed(count)


def _run_on_sim_time(period: float, running: threading.Event,
                     tick: Callable[[float, bool], None], slack: Callable[[], None],
                     slack_period: float, missed: Callable[[int], None],
                     sim_now: Callable[[], float]) -> None:
    """:func:`run_periodic` on ``sim_now``'s deadlines, polled every :data:`SIM_POLL` s."""
    deadlines = SimDeadlines(period)
    fallback = time.monotonic() + SIM_FALLBACK * period
    next_slack = time.monotonic() + slack_period
    while running.is_set():
        wake = time.monotonic()
        late = deadlines.due(sim_now())
        if late is not None or wake >= fallback:
            tick(wake, late is not None)
            fallback = wake + SIM_FALLBACK * period
            if wake >= next_slack:
                next_slack = wake + slack_period
                slack()
            if late:
                missed(late)
        time.sleep(SIM_POLL)
