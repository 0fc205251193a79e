"""A control thread's clock: absolute deadlines and, where permitted, real-time priority."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable

FIFO_PRIORITY = 10   # SCHED_FIFO priority of a control thread, when permitted
NICE = -10           # else its nice value, when permitted
STOP_POLL = 0.1      # s, longest sleep before a stop is noticed


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
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    except (AttributeError, PermissionError, OSError):
        pass
    else:
        return 'fifo'
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, PermissionError, OSError):
        return 'default'
    return 'nice'


def run_periodic(period: float, running: threading.Event, tick: Callable[[float], None],
                 slack: Callable[[], None], slack_period: float,
                 missed: Callable[[int], None]) -> None:
    """Call ``tick(wake)`` on absolute deadlines ``period`` s apart until ``running`` clears.

    ``wake`` is the time.monotonic() the tick woke at. After a tick, ``slack()`` runs every
    ``slack_period`` s (diagnostics). When ticks overran whole periods, those are skipped to
    keep the phase and ``missed(count)`` is told.
    """
    deadline = time.monotonic() + period
    next_slack = deadline + slack_period
    while not sleep_until(deadline, running):
        wake = time.monotonic()
        tick(wake)
        if wake >= next_slack:
            next_slack += slack_period
            slack()
        deadline += period
        behind = time.monotonic() - deadline
        if behind > 0:
            count = math.ceil(behind / period)
            deadline += count * period
            missed(count)
