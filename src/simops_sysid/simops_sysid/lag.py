"""A first guess of the command delay, where the fit starts from.

Open-loop replay from a zero delay can slide into a valley where other parameters imitate
the delay (a first-order lag looks like a dead time at low frequency). The delay is visible
with the controller's own law, though: the arm's effort is the JointTrajectoryController's
``p (q_d(t - d) - q) + d (qd_d(t - d) - qd)`` plus slowly varying terms (gravity, friction,
sensor bias), and its step changes follow the targets' corners ``d`` later. The estimate is
the delay at which the controller's delayed inputs, weighted by the nominal gains, best
explain ``effort + p q + d qd`` (first differences remove the slow terms); a real arm whose
gains differ from nominal still puts the minimum at its delay.
"""

from __future__ import annotations

import numpy as np

from simops_sysid.recording import Recording
from simops_sysid.replay import physics_targets

MAX_RESIDUAL = 0.8   # of the median lag's: above it the effort carries no trace of the commands


def estimate_delay(rec: Recording, dt: float, max_delay: float, gain_p: np.ndarray,
                   gain_d: np.ndarray) -> float | None:
    """The command delay (s, a whole number of ``dt`` steps in [0, ``max_delay``]).

    Uses the commanded span of ``rec`` at the physics rate: the controller inputs from the
    replay rule, the measured position, velocity and effort (N*m) interpolated onto the same
    steps; ``gain_p`` (7,) N*m/rad and ``gain_d`` (7,) N*m*s/rad are the nominal gains.
    Returns None when the effort carries no trace of the commands (flat or unrelated effort,
    e.g. a bag whose commands are not the arm's): the data then give no first guess.
    """
    start, end = rec.command_span
    first = min(int(np.searchsorted(rec.t, start)), len(rec.t) - 1)
    start = float(rec.t[first])   # physics steps end on joint-state stamps: align to them
    steps = int((end - start) / dt)
    lags = np.arange(round(max_delay / dt) + 1)
    if steps <= 2 * lags.size:
        return None
    initial = rec.q[first, :7]
    inputs = physics_targets(rec.commands, start, steps, dt, initial, rec.measured_at)
    grid = start + dt * np.arange(1, steps + 1)   # a step's state is stamped after it

    def measured(values: np.ndarray) -> np.ndarray:
        return np.column_stack([np.interp(grid, rec.t, values[:, j]) for j in range(7)])

    q, qd, effort = measured(rec.q), measured(rec.qd), measured(rec.effort)
    # A step's effort was computed from the state before it: pair it with the previous sample.
    q, qd = np.vstack((q[:1], q[:-1])), np.vstack((qd[:1], qd[:-1]))
    explained = effort + gain_p * q + gain_d * qd   # = p q_d(t - d) + d qd_d(t - d) + slow
    scores = []
    for lag in lags:
        shifted = np.vstack((np.repeat(inputs[:1], lag, axis=0), inputs[:steps - lag]))
        drive = gain_p * shifted[:, :7] + gain_d * shifted[:, 7:]
        scores.append(float(np.sum(np.diff(explained - drive, axis=0)[lags[-1]:] ** 2)))
    score = np.asarray(scores)
    if not np.all(np.isfinite(score)) or score.min() > MAX_RESIDUAL * float(np.median(score)):
        return None
    return float(lags[int(np.argmin(score))] * dt)
