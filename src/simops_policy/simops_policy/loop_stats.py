"""The control loop's counters and rolling timing statistics, for /diagnostics (no ROS here)."""

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


FAULTS = ('nonfinite_action', 'stale_state', 'stale_image', 'bad_message', 'inference',
          'out_of_domain', 'outside_limits')
TIMINGS = ('period', 'period_error', 'state_age', 'latency', 'compute', 'inference')
WINDOW = 1200   # samples (60 s at 20 Hz) behind each percentile


class LoopStats:
    """Counters and timing windows of one control loop; the caller serialises access.

    Timings, in s, over the last :data:`WINDOW` samples: the command period measured at
    publication, on the clock the loop ticks on (the measured states' stamps under
    use_sim_time, where the wall's period is the simulator's pace), and its error against
    ``period``; the joint state's age at the tick;
    observation-to-command latency; the tick's compute time and the inference time.
    """

    def __init__(self, period: float) -> None:
        self.period = period
        self.ticks = 0
        self.commands = 0
        self.overruns = 0
        self.repeated_states = 0   # ticks that found no new joint state (nothing sent)
        self.faults = dict.fromkeys(FAULTS, 0)
        self.timing = {key: WindowStats(WINDOW) for key in TIMINGS}
        self._last_command: float | None = None   # time.monotonic() of the last command

    def fault(self, kind: str) -> int:
        """Count one fault of ``kind`` (one of :data:`FAULTS`); return its total."""
        self.faults[kind] += 1
        return self.faults[kind]

    def command_sent(self, now: float) -> None:
        """Count a command published at ``now`` (s, the loop's clock) and its period."""
        self.commands += 1
        if self._last_command is not None:
            self.timing['period'].add(now - self._last_command)
            self.timing['period_error'].add(abs(now - self._last_command - self.period))
        self._last_command = now

    def tick_done(self, received_ns: int, tick_ns: int, done_ns: int, inference: float) -> None:
        """Time a tick that commanded: state receipt, tick start and command (ns), inference (s)."""
        self.timing['latency'].add(1e-9 * (done_ns - received_ns))
        self.timing['compute'].add(1e-9 * (done_ns - tick_ns))
        self.timing['inference'].add(inference)

    def restart_period(self) -> None:
        """Forget the last command time (DISABLED: the next period is not a period)."""
        self._last_command = None

    def values(self) -> dict[str, float | int]:
        """Counters, then p50/p99/max (ms) of every timing."""
        values: dict[str, float | int] = {
            'ticks': self.ticks, 'commands': self.commands, 'overruns': self.overruns,
            'repeated_states': self.repeated_states,
            **{f'faults_{key}': count for key, count in self.faults.items()}}
        for key, stats in self.timing.items():
            summary = stats.summary()
            for stat in ('p50', 'p99', 'max'):
                values[f'{key}_{stat}_ms'] = 1e3 * getattr(summary, stat)
        return values
