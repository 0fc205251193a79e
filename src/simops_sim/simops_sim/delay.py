"""Command delay in whole physics steps, shared by the simulator and system identification.

A target set before physics step ``k`` reaches the actuators at step ``k + d`` with
``d = round(delay / timestep)``. The actuator law does this online, a ring of ``d``
commands per arm (:func:`simops_sim.actuator_law.advance`); :func:`shift_commands` does it
to a whole command sequence, by the same rule (``tests/sim/test_physics.py`` holds the two
equal).
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
