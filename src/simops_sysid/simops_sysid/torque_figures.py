"""Torque RMS, the one figure every torque comparison reports (numpy only).

``residual_rms`` is per joint, over samples; ``joint_total`` folds per-joint figures into
one over all joints (the RMS of the per-joint RMS, which equals the RMS over every sample
of every joint when the joints have as many samples).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def residual_rms(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Torque RMS (J,) N*m of ``measured`` (N, J) N*m against ``predicted`` (N, J) N*m."""
    return np.sqrt(np.mean((measured - predicted) ** 2, axis=0))


def joint_total(values: Iterable[float]) -> float:
    """One figure (N*m) over all joints from per-joint RMS ``values`` (N*m)."""
    return float(np.sqrt(np.mean(np.square(np.fromiter(values, dtype=float)))))
