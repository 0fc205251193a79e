"""Rolling timing statistics for the control loop's diagnostics (no ROS here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Summary:
    """Percentiles of a window of samples, in the unit they were added in."""

    count: int
    p50: float
    p99: float
    max: float


class WindowStats:
    """The last ``size`` samples in a preallocated ring buffer."""

    def __init__(self, size: int) -> None:
        self._values = np.zeros(size)
        self._next = 0
        self._count = 0

    def add(self, value: float) -> None:
        """Record one sample."""
        self._values[self._next] = value
        self._next = (self._next + 1) % self._values.size
        self._count = min(self._count + 1, self._values.size)

    def summary(self) -> Summary:
        """p50, p99 and max of the window; NaN while it is empty."""
        if not self._count:
            return Summary(0, float('nan'), float('nan'), float('nan'))
        window = self._values[:self._count]
        p50, p99 = np.percentile(window, [50.0, 99.0])
        return Summary(self._count, float(p50), float(p99), float(window.max()))
