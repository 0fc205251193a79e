"""A model-free first guess of the command delay, where the fit starts from.

Open-loop replay from a zero delay slides into a valley where lower servo gains and more
armature imitate the delay (a first-order lag looks like a dead time at low frequency).
The delay is visible without a model, though: the servo effort ``kp (u(t - d) - q) - kv qd``
follows the target ``u`` at once, while ``q`` is smooth, so every corner of the
piecewise-interpolated targets (a step in their first difference) reappears in the
effort's first difference ``d`` later. The estimate is the cross-correlation peak of the two
first differences, summed over the arm joints. Commands streamed at a fixed rate repeat the
peak every command period, so the smallest lag within :data:`PEAK` of the highest wins.
"""

from __future__ import annotations

import numpy as np

from simops_sysid.dataset import Recording
from simops_sysid.replay import physics_targets

PEAK = 0.9   # fraction of the highest correlation that still counts as a peak


def estimate_delay(rec: Recording, dt: float, max_delay: float) -> float | None:
    """The command delay (s, a whole number of ``dt`` steps in [0, ``max_delay``]).

    Uses the commanded span of ``rec`` at the physics rate: targets from the replay rule,
    measured effort (N*m) linearly interpolated onto the same steps. Returns None when no
    lag correlates positively (flat or anti-correlated effort, e.g. a real arm whose torque
    does not follow the target corners): the data then give no first guess.
    """
    start, end = rec.command_span
    steps = int((end - start) / dt)
    targets = physics_targets(rec.commands, start, steps, dt, rec.q[np.searchsorted(rec.t,
                                                                                    start), :7])
    grid = start + dt * np.arange(1, steps + 1)   # a step's effort is stamped after it
    effort = np.column_stack([np.interp(grid, rec.t, rec.effort[:, j]) for j in range(7)])
    target_steps = np.diff(targets, axis=0)
    effort_steps = np.diff(effort, axis=0)
    target_steps /= np.maximum(np.linalg.norm(target_steps, axis=0), 1e-12)
    effort_steps /= np.maximum(np.linalg.norm(effort_steps, axis=0), 1e-12)
    lags = np.arange(round(max_delay / dt) + 1)
    score = np.array([np.sum(target_steps[:len(target_steps) - lag] * effort_steps[lag:])
                      for lag in lags])
    if not np.all(np.isfinite(score)) or score.max() <= 0.0:
        return None
    return float(lags[np.flatnonzero(score >= PEAK * score.max())[0]] * dt)
