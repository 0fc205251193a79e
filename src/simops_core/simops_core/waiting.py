"""Polling for a condition with a deadline (tests, the demo's operator)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` every ``interval`` s until it is true or ``timeout`` s pass.

    Returns its last value, so a condition that turns true at the deadline still counts.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
