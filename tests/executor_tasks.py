"""Task functions for tests/core/test_executor.py, importable by spawned and Ray workers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def square(item: tuple[int, float]) -> tuple[int, int]:
    """(item, item squared) after ``delay`` s: a task whose order of completion varies."""
    value, delay = item
    time.sleep(delay)
    return value, value * value


def die_once(item: tuple[int, str]) -> tuple[int, int]:
    """Kill this worker process the first time item 3 runs (a marker file remembers)."""
    value, marker = item
    if value == 3 and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)
    return value, os.getpid()
