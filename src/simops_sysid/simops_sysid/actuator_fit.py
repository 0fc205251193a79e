"""The learned actuator and sensor model: a causal linear filter per joint (no rclpy).

What Franka's link-side torque sensors read is not the rigid-body + friction torque of the
moment: it leads and smooths it (joint elasticity, the sensor's own dynamics), which no
SimParams field expresses. This model learns it from the efforts of recorded bags, in the
style of Hwangbo et al.'s actuator nets but linear: per arm joint ``j`` and sample ``t``,

    tau_J[t, j] ~ sum_k a_k tau_m[t-k, j] + b_k qd[t-k, j] + c_k qdd[t-k, j] + d,

``k = 0 .. W-1`` over the last ``W`` samples at the recorded rate (causal: nothing after
``t``), with ``tau_m`` the parametric model's torque (rigid body plus fitted friction, N*m),
``qd`` rad/s and ``qdd`` rad/s^2 the filtered motion the model torque was computed from.

Structure (``bench/real_panda.py --extra '--mode torque --actuator-model linear'`` prints
the figures on Gaz et al.'s real Panda recording):

- per joint: each joint has its own elasticity, sensor and scale;
- the window ``W`` is chosen among :data:`WINDOWS` on the last :data:`VALIDATION_FRACTION`
  of the training samples (a split in time), then the model is refitted on all of them;
  velocity and acceleration histories beside the model torque's;
- ridge regression (:data:`RIDGE`, on standardised features) against over-fitting: the
  neighbouring lags of one smooth signal are nearly collinear.

A fit whose held-out error is worse than the parametric model's is refused
(:class:`ActuatorFitError`). Parts (bags, or a bag's training and held-out spans) are never
joined inside a window: each part's first ``W - 1`` samples repeat its first one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simops_sysid.torque_figures import joint_total, residual_rms

WINDOWS = (0.01, 0.02, 0.03, 0.04)   # s of history, the candidates
VALIDATION_FRACTION = 0.2            # of the training samples (the last), to choose the window
RIDGE = 1e-3                         # ridge penalty per sample, on standardised features
INPUTS = ('model_torque', 'velocity', 'acceleration')   # the histories, in feature order
# Further inputs a structure experiment may add (bench/actuator_inputs.py); the exported
# model and the simulator take INPUTS
OPTIONAL_INPUTS = ('position', 'tracking_error')


class ActuatorFitError(ValueError):
    """The learned model cannot be fitted, or does worse than the parametric model held out."""


@dataclass(frozen=True)
class ActuatorPart:
    """One stretch of samples at one rate, arrays (N, 7) over the arm joints.

    ``model_torque`` N*m: the parametric model's (rigid body plus friction); ``velocity``
    rad/s and ``acceleration`` rad/s^2: the motion it was computed from; ``measured`` N*m: the
    raw efforts, unfiltered, at the recorded rate. Where known, the :data:`OPTIONAL_INPUTS`:
    ``position`` rad, as measured, and ``tracking_error`` rad, the commanded position less
    the measured one.
    """

    model_torque: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    measured: np.ndarray
    position: np.ndarray | None = None
    tracking_error: np.ndarray | None = None


@dataclass(frozen=True)
class LinearActuator:
    """A fitted model: ``weights`` (7, I W + 1) over :func:`features`, at ``period`` s.

    ``window`` ``W`` is in samples, over the I ``inputs``; the weights multiply the features
    as they come (the standardisation of the fit is folded in).
    """

    window: int
    period: float
    weights: np.ndarray
    inputs: tuple[str, ...] = INPUTS

    def predict(self, part: ActuatorPart) -> np.ndarray:
        """What the torque sensors read (N, 7) N*m over ``part``."""
        return np.column_stack([features(part, j, self.window, self.inputs) @ self.weights[j]
                                for j in range(self.weights.shape[0])])


class SensorPredictor(Protocol):
    """A learned model as the fit scores it: ``window`` samples at ``period`` s."""

    window: int
    period: float

    def predict(self, part: ActuatorPart) -> np.ndarray:
        """What the torque sensors read (N, 7) N*m over ``part``."""
        ...


def history(x: np.ndarray, window: int) -> np.ndarray:
    """``x`` (N,) as (N, ``window``): column ``k`` is ``x[t - k]``, the first value before it."""
    n = x.size
    out = np.empty((n, window))
    for k in range(window):
        out[k:, k] = x[:n - k]
        out[:k, k] = x[0]
    return out


def features(part: ActuatorPart, joint: int, window: int,
             inputs: tuple[str, ...] = INPUTS) -> np.ndarray:
    """Joint ``joint``'s inputs (N, I ``window`` + 1): the ``inputs``' histories, then 1."""
    columns = [history(_input(part, name)[:, joint], window) for name in inputs]
    return np.hstack([*columns, np.ones((part.measured.shape[0], 1))])


def _input(part: ActuatorPart, name: str) -> np.ndarray:
    if name not in (*INPUTS, *OPTIONAL_INPUTS):
        raise ActuatorFitError(f'the learned model has no input {name!r}; its inputs are '
                               f'{", ".join((*INPUTS, *OPTIONAL_INPUTS))}')
    values = getattr(part, name)
    if values is None:
        raise ActuatorFitError(f'the learned model\'s input {name.replace("_", " ")} is not '
                               'known for these samples')
    return values


def fit_linear(parts: Sequence[ActuatorPart], window: int, period: float,
               inputs: tuple[str, ...] = INPUTS) -> LinearActuator:
    """Ridge-fit a :class:`LinearActuator` of ``window`` samples of ``inputs`` to ``parts``."""
    joints = parts[0].measured.shape[1]
    weights = np.empty((joints, len(inputs) * window + 1))
    for j in range(joints):
        a = np.vstack([features(part, j, window, inputs) for part in parts])
        b = np.concatenate([part.measured[:, j] for part in parts])
        scale = a.std(axis=0)
        scale[scale == 0.0] = 1.0   # the constant, and a joint that did not move
        scaled = a / scale
        normal = scaled.T @ scaled + RIDGE * b.size * np.eye(a.shape[1])
        normal[-1, -1] -= RIDGE * b.size   # the constant is not penalised
        weights[j] = np.linalg.solve(normal, scaled.T @ b) / scale
    return LinearActuator(window, period, weights, inputs)


def choose_and_fit(parts: Sequence[ActuatorPart], period: float,
                   inputs: tuple[str, ...] = INPUTS
                   ) -> tuple[LinearActuator, dict[float, float]]:
    """Choose the window on the training parts' last :data:`VALIDATION_FRACTION`, refit on all.

    Returns the model over ``inputs`` and the validation RMS (N*m, all joints) of each
    window of :data:`WINDOWS` (s). Raises :class:`ActuatorFitError` for too few samples.
    """
    fitting, checking = [], []
    for part in parts:
        cut = int(part.measured.shape[0] * (1.0 - VALIDATION_FRACTION))
        fitting.append(_slice(part, slice(None, cut)))
        checking.append(_slice(part, slice(cut, None)))
    longest = round(max(WINDOWS) / period)
    if sum(part.measured.shape[0] for part in checking) < 10 * longest:
        needed = 10 * longest * period / VALIDATION_FRACTION
        raise ActuatorFitError(f'too few samples for a learned model: it needs at least '
                               f'{needed:.1f} s of training data')
    scores = {}
    for seconds in WINDOWS:
        model = fit_linear(fitting, max(1, round(seconds / period)), period, inputs)
        scores[seconds] = total_rms(checking, model)
    best = min(scores, key=lambda seconds: scores[seconds])
    return fit_linear(parts, max(1, round(best / period)), period, inputs), scores


def rms(parts: Sequence[ActuatorPart], model: SensorPredictor | None = None) -> np.ndarray:
    """Torque RMS (7,) N*m of the measured efforts against ``model`` (None: the parametric)."""
    return residual_rms(np.vstack([part.measured for part in parts]),
                        np.vstack([part.model_torque if model is None else model.predict(part)
                                   for part in parts]))


def total_rms(parts: Sequence[ActuatorPart], model: SensorPredictor | None = None) -> float:
    """:func:`rms` over all joints together, N*m."""
    return joint_total(rms(parts, model))


def check_held_out(parts: Sequence[ActuatorPart], model: SensorPredictor) -> None:
    """Refuse ``model`` (:class:`ActuatorFitError`) if worse than the parametric one held out."""
    learned, parametric = total_rms(parts, model), total_rms(parts)
    if learned > parametric:
        raise ActuatorFitError(f'the learned actuator model does worse on held-out data than '
                               f'the parametric one ({learned:.3f} against {parametric:.3f} '
                               'N*m): not used; record more varied motion')


def input_history(part: ActuatorPart, window: int) -> np.ndarray:
    """``part``'s inputs as the model's histories (N, 3, W, 7), the first sample repeated."""
    stacked = np.stack([getattr(part, name) for name in INPUTS], axis=1)   # (N, 3, 7)
    padded = np.concatenate([np.repeat(stacked[:1], window - 1, axis=0), stacked])
    n = stacked.shape[0]
    lags = [padded[window - 1 - k:window - 1 - k + n] for k in range(window)]
    return np.stack(lags, axis=2)


def input_range(parts: Sequence[ActuatorPart]) -> dict[str, dict[str, list[float]]]:
    """Per input, the per-joint ``min`` and ``max`` over ``parts`` (the training range)."""
    out = {}
    for name in INPUTS:
        values = np.vstack([getattr(part, name) for part in parts])
        # rounded outward to 1e-6, so the training samples themselves stay inside
        out[name] = {'min': [float(v) for v in np.floor(values.min(axis=0) * 1e6) / 1e6],
                     'max': [float(v) for v in np.ceil(values.max(axis=0) * 1e6) / 1e6]}
    return out


def beyond_range(parts: Sequence[ActuatorPart], seen: dict[str, dict[str, list[float]]]
                 ) -> dict[str, float]:
    """Per input, the fraction of ``parts``' samples with a joint outside the range ``seen``.

    ``seen``: :func:`input_range` of the training parts. There the model extrapolates.
    """
    out = {}
    for name in INPUTS:
        values = np.vstack([getattr(part, name) for part in parts])
        low, high = np.array(seen[name]['min']), np.array(seen[name]['max'])
        out[name] = float(np.mean(np.any((values < low) | (values > high), axis=1)))
    return out


def _slice(part: ActuatorPart, span: slice) -> ActuatorPart:
    return ActuatorPart(*(None if values is None else values[span] for values in (
        part.model_torque, part.velocity, part.acceleration, part.measured, part.position,
        part.tracking_error)))
