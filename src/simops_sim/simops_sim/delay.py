"""Command delay in whole physics steps, shared by the simulator and system identification.

A target set before physics step ``k`` reaches the actuators at step ``k + d`` with
``d = round(delay / timestep)``. :class:`CommandDelay` does this online (a ring buffer);
:func:`shift_commands` does it to a whole command sequence, by the same rule.
"""

from __future__ import annotations

import numpy as np


def delay_steps(delay: float, timestep: float) -> int:
    """Whole physics steps for a delay of ``delay`` s at ``timestep`` s per step."""
    if delay < 0 or timestep <= 0:
        raise ValueError(f'need delay >= 0 and timestep > 0, got {delay} and {timestep}')
    return round(delay / timestep)


def shift_commands(commands: np.ndarray, steps: int, initial: np.ndarray) -> np.ndarray:
    """Delay a command sequence: ``out[t] = commands[t - steps]``, ``initial`` before that.

    ``commands`` has shape (T, n) with one row per physics step; ``initial`` has shape (n,)
    (the target held before the sequence starts). Returns a new (T, n) array.
    """
    commands = np.asarray(commands, dtype=float)
    out = np.empty_like(commands)
    head = min(steps, len(commands))
    out[:head] = initial
    out[head:] = commands[:len(commands) - head]
    return out


class CommandDelay:
    """A FIFO of ``steps`` control targets of width ``width``; allocation-free per step."""

    def __init__(self, steps: int, width: int) -> None:
        if steps < 0:
            raise ValueError(f'delay steps must be >= 0, got {steps}')
        self.steps = steps
        self._buffer = np.zeros((steps, width))
        self._out = np.zeros(width)
        self._head = 0

    def fill(self, target: np.ndarray) -> None:
        """Forget queued targets: the next ``steps`` outputs are ``target``."""
        self._buffer[:] = target
        self._head = 0

    def push(self, target: np.ndarray) -> np.ndarray:
        """Queue ``target`` (n,) and return the one due now (a reused buffer; copy to keep)."""
        if self.steps == 0:
            self._out[:] = target
            return self._out
        self._out[:] = self._buffer[self._head]
        self._buffer[self._head] = target
        self._head = (self._head + 1) % self.steps
        return self._out
