"""The check before a trajectory fit: is each joint excited, can the data tell parameters apart.

Two parts, from the sequences the fit would use:

- **Excitation per joint** from the measured motion: the range covered (rad), the RMS
  speed (rad/s) and the number of direction reversals (friction is only identifiable from
  motion in both directions).
- **Identifiability** from the residual's Jacobian at the starting point (one batched
  rollout per parameter, mujoco.sysid's residual, on the first :data:`JACOBIAN_SPAN` s): a
  parameter whose column is zero does not change the replay at all; one whose predicted
  95 % interval, for residuals at the scale of the measurement
  (:class:`simops_sysid.residual.Scales`), is wider than half its bound range is not
  determined by the data; and a pair whose estimates are correlated above
  :data:`CORRELATED` can trade one for the other.

The verdict is ``fail`` when a fitted joint barely moves or a parameter has no effect (the
fit would report numbers the data do not contain), ``warn`` for weak excitation, poorly
determined parameters or correlated pairs, else ``pass``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from mujoco import sysid

from simops_sysid.recording import SequenceData
from simops_sysid.residual import Problem

STILL = 0.01          # rad of range below which a joint is not excited at all
WEAK_RANGE = 0.05     # rad of range below which excitation is weak
WEAK_SPEED = 0.05     # rad/s RMS below which excitation is weak
MIN_REVERSALS = 4     # direction changes needed to see friction on both sides
MOVING = 0.02         # rad/s; slower samples do not count towards reversals
CORRELATED = 0.95     # |correlation| above which a pair is reported
NO_EFFECT = 1e-9      # column norm (relative to the largest) that counts as zero
JACOBIAN_SPAN = 20.0  # s of sequences the Jacobian is taken on (intervals from less data are
                      # wider, so the identifiability verdict errs on the safe side)


@dataclass(frozen=True)
class JointExcitation:
    """How a joint moved: ``range`` rad, ``speed_rms`` rad/s, direction ``reversals``."""

    joint: str
    range: float
    speed_rms: float
    reversals: int

    @property
    def verdict(self) -> str:
        """``none``, ``weak`` or ``ok``."""
        if self.range < STILL:
            return 'none'
        weak = (self.range < WEAK_RANGE or self.speed_rms < WEAK_SPEED
                or self.reversals < MIN_REVERSALS)
        return 'weak' if weak else 'ok'


@dataclass(frozen=True)
class Check:
    """The check's findings; ``verdict`` is ``pass``, ``warn`` or ``fail``.

    ``no_effect``: parameters that do not change the replay; ``undetermined``: (name,
    predicted 95 % half-width as a fraction of half the bound range) above 1;
    ``correlated``: (name, name, correlation) pairs above :data:`CORRELATED`.
    """

    joints: tuple[JointExcitation, ...]
    no_effect: tuple[str, ...]
    undetermined: tuple[tuple[str, float], ...]
    correlated: tuple[tuple[str, str, float], ...]

    @property
    def verdict(self) -> str:
        """``fail``, ``warn`` or ``pass`` (see the module docstring)."""
        if self.no_effect or any(j.verdict == 'none' for j in self.joints):
            return 'fail'
        if (self.undetermined or self.correlated
                or any(j.verdict == 'weak' for j in self.joints)):
            return 'warn'
        return 'pass'

    def reason(self) -> str:
        """One line saying why the verdict is ``fail`` (empty otherwise)."""
        still = [j.joint for j in self.joints if j.verdict == 'none']
        if still:
            return (f'{", ".join(still)} barely moved (range under {STILL * 1e3:g} mrad); '
                    'record with excite, or leave them out with --joints')
        if self.no_effect:
            return (f'{", ".join(self.no_effect)} do not change the replay; leave their kinds '
                    'out of --params')
        return ''

    def lines(self) -> list[str]:
        """The report, one finding per line."""
        out = [f'check: {self.verdict}']
        for j in self.joints:
            out.append(f'  {j.joint}: range {j.range:.3f} rad, speed RMS {j.speed_rms:.3f} '
                       f'rad/s, {j.reversals} reversals: {j.verdict}')
        out += [f'  no effect on the replay: {name}' for name in self.no_effect]
        out += [f'  not determined by the data: {name} (95 % interval {ratio:.1f}x half its '
                f'bound range)' for name, ratio in self.undetermined]
        out += [f'  correlated: {a} and {b} ({rho:+.3f})' for a, b, rho in self.correlated]
        return out


def excitation(sequences: Sequence[SequenceData], names: Sequence[str]
               ) -> tuple[JointExcitation, ...]:
    """Per fitted joint (``names``, the sequences' columns), over all ``sequences``."""
    out = []
    for column, name in enumerate(names):
        q = np.concatenate([s.q[:, column] for s in sequences])
        qd = np.concatenate([s.qd[:, column] for s in sequences])
        moving = np.sign(qd[np.abs(qd) > MOVING])
        out.append(JointExcitation(name, float(q.max() - q.min()) if q.size else 0.0,
                                   float(np.sqrt(np.mean(qd ** 2))) if qd.size else 0.0,
                                   int(np.count_nonzero(np.diff(moving)))))
    return tuple(out)


def jacobian(problem: Problem, params: sysid.ParameterDict) -> np.ndarray:
    """(R, P) forward-difference Jacobian of the scaled residual at ``params``' values.

    One batch of P + 1 candidates through the problem's residual (batched rollouts).
    """
    x = params.as_vector()
    low, high = params.get_bounds()
    step = 1e-4 * np.maximum(np.abs(x), 1e-3 * (high - low))
    step = np.where(x + step > high, -step, step)
    candidates = np.repeat(x[:, None], x.size + 1, axis=1)
    candidates[np.arange(x.size), np.arange(1, x.size + 1)] += step
    residuals, _, _ = problem.residual_fn(candidates, params.copy())
    batch = np.concatenate(residuals, axis=0)
    return (batch[:, 1:] - batch[:, :1]) / step


def identifiability(jac: np.ndarray, params: sysid.ParameterDict
                    ) -> tuple[tuple[str, ...], tuple[tuple[str, float], ...],
                               tuple[tuple[str, str, float], ...]]:
    """Parameters with no effect, undetermined ones and correlated pairs from ``jac`` (R, P)."""
    names = [name for name, _ in params.items()]
    low, high = params.get_bounds()
    half_span = 0.5 * (high - low)
    scaled = jac * half_span            # columns per half bound range
    norms = np.linalg.norm(scaled, axis=0)
    dead = norms <= NO_EFFECT * max(float(norms.max(initial=0.0)), 1e-300)
    live = np.flatnonzero(~dead)
    undetermined: list[tuple[str, float]] = []
    correlated: list[tuple[str, str, float]] = []
    if live.size:
        cov = np.linalg.pinv(scaled[:, live].T @ scaled[:, live])
        sigma = np.sqrt(np.maximum(np.diag(cov), 0.0))
        for i, p in enumerate(live):
            if 1.96 * sigma[i] > 1.0:
                undetermined.append((names[p], float(1.96 * sigma[i])))
        rho = cov / np.outer(np.maximum(sigma, 1e-300), np.maximum(sigma, 1e-300))
        for i, j in zip(*np.triu_indices(live.size, 1), strict=True):
            if abs(rho[i, j]) > CORRELATED:
                correlated.append((names[live[i]], names[live[j]], float(rho[i, j])))
    return (tuple(names[p] for p in np.flatnonzero(dead)), tuple(undetermined),
            tuple(correlated))


def check(problem: Problem, sequences: Sequence[SequenceData], params: sysid.ParameterDict,
          names: Sequence[str]) -> Check:
    """Excitation over ``sequences``, identifiability of ``params`` (current values).

    ``problem`` may hold only the first :data:`JACOBIAN_SPAN` s of ``sequences``.
    """
    dead, undetermined, correlated = identifiability(jacobian(problem, params), params)
    return Check(excitation(sequences, names), dead, undetermined, correlated)
