"""The fit report: per-joint plots (PNG) and summary.md with intervals, bounds and warnings.

Plain functions over the fit's results; matplotlib draws off-screen (Agg), no display needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt
import numpy as np
from mujoco import sysid

from simops_sysid.evaluation import Evaluation
from simops_sysid.optimize import FitResult
from simops_sysid.residual import SIGNALS

CORRELATION_WARNING = 0.95   # |correlation| above which two parameters are called inseparable
RELATIVE_INTERVAL_WARNING = 0.5  # 95 % half-width / |value| that calls a parameter poorly excited
AT_BOUND = 1e-3              # fraction of the bound range that counts as "at the bound"
UNITS = ('rad', 'rad/s', 'N*m')


@dataclass(frozen=True)
class Diagnosis:
    """Warnings about the optimum.

    Parameters at their bounds, poorly excited parameters (relative 95 % interval above
    :data:`RELATIVE_INTERVAL_WARNING`) and strongly correlated pairs (name, name, corr).
    """

    at_bounds: tuple[str, ...]
    poorly_excited: tuple[str, ...]
    correlated: tuple[tuple[str, str, float], ...]


def diagnose(result: FitResult) -> Diagnosis:
    """Bounds, interval and correlation checks of ``result``."""
    names = result.params.keys()
    x = result.params.as_vector()
    low, high = result.params.get_bounds()
    span = high - low
    at = [n for n, v, lo, hi, s in zip(names, x, low, high, span, strict=True)
          if v - lo <= AT_BOUND * s or hi - v <= AT_BOUND * s]
    relative = np.abs(result.intervals) / np.maximum(np.abs(x), 1e-12)
    poor = [n for n, r in zip(names, relative, strict=True)
            if not np.isfinite(r) or r > RELATIVE_INTERVAL_WARNING]
    std = np.sqrt(np.abs(np.diag(result.covariance)))
    with np.errstate(divide='ignore', invalid='ignore'):
        corr = result.covariance / np.outer(std, std)
    pairs = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            if np.isfinite(corr[i, j]) and abs(corr[i, j]) > CORRELATION_WARNING:
                pairs.append((names[i], names[j], float(corr[i, j])))
    return Diagnosis(tuple(at), tuple(poor), tuple(pairs))


def write_report(folder: Path, result: FitResult, initial: sysid.ParameterDict,
                 joints: Sequence[str], train: tuple[Evaluation, Evaluation],
                 holdout: tuple[Evaluation, Evaluation] | None, delay_step: float,
                 delay_profile: Mapping[str, Sequence[float]] | None = None,
                 checks: Sequence[str] = ()) -> Path:
    """Write summary.md and one PNG per fitted joint into ``folder``; return summary.md.

    ``train`` and ``holdout`` are (nominal, fitted) evaluations; the plots show the first
    held-out sequence if there is one, else the first training sequence.
    ``delay_profile``: the replay's position error over command delays (``delay_ms``,
    ``position_rms_mrad``), where the fit started the delay; ``checks``: the check's
    warnings about the recording.
    """
    folder.mkdir(parents=True, exist_ok=True)
    shown = holdout if holdout is not None else train
    for j, joint in enumerate(joints):
        _plot_joint(folder / f'{joint}.png', joint, j, len(joints), shown)
    _plot_objective(folder / 'objective.png', result.objective)
    diagnosis = diagnose(result)
    lines = ['# System identification report', '',
             f'{result.iterations} Levenberg-Marquardt iterations in {result.wall:.1f} s '
             f'(mujoco.sysid, x_scale=jac).', '',
             '## Replay error (RMS over the fitted joints)', '',
             '| data | position nominal (mrad) | position fitted (mrad) | '
             'effort nominal (N*m) | effort fitted (N*m) |', '|---|---|---|---|---|']
    for label, pair in (('training', train), ('held-out', holdout)):
        if pair is not None:
            before, after = pair
            lines.append(f'| {label} | {1e3 * before.rms_q_total:.3f} | '
                         f'{1e3 * after.rms_q_total:.3f} | '
                         f'{_rms(before.rms_effort):.3f} | {_rms(after.rms_effort):.3f} |')
    lines += ['', '## Parameters (95 % confidence half-widths)', '',
              '| parameter | nominal | fitted | ± 95 % | lower bound | upper bound |',
              '|---|---|---|---|---|---|']
    low, high = result.params.get_bounds()
    for name, x0, x, ci, lo, hi in zip(result.params.keys(), initial.as_vector(),
                                       result.params.as_vector(), result.intervals, low, high,
                                       strict=True):
        lines.append(f'| {name} | {x0:.6g} | {x:.6g} | {ci:.3g} | {lo:.4g} | {hi:.4g} |')
    lines += ['', f'The command delay is written rounded to whole physics steps of '
              f'{delay_step * 1e3:g} ms, as the simulator runs it.', '',
              '## Parameters at their bounds', '']
    lines += [f'- {n}' for n in diagnosis.at_bounds] or ['none']
    if delay_profile is not None:
        lowest = min(delay_profile['position_rms_mrad'])
        lines += ['', '## Command delay profile', '',
                  'The replay\'s position error at each command delay, every other parameter '
                  'nominal; the fit started the delay at the lowest. A flat profile is a '
                  'delay the data do not determine.', '',
                  '| delay (ms) | position RMS (mrad) | relative |', '|---|---|---|']
        lines += [f'| {d:g} | {e:.4f} | {e / lowest:.2f} |' for d, e in zip(
            delay_profile['delay_ms'], delay_profile['position_rms_mrad'], strict=True)]
    lines += ['', '## Warnings', '']
    warnings = [f'- {line}' for line in checks]
    warnings += [f'- {n}: poorly excited (95 % interval above '
                f'{RELATIVE_INTERVAL_WARNING:.0%} of its value); excite longer or harder'
                for n in diagnosis.poorly_excited]
    warnings += [f'- {a} and {b} are inseparable in this data (correlation {c:+.3f})'
                 for a, b, c in diagnosis.correlated]
    lines += warnings or ['none']
    lines += ['', '## Plots', ''] + [f'![{j}]({j}.png)' for j in joints]
    summary = folder / 'summary.md'
    summary.write_text('\n'.join(lines) + '\n')
    return summary


def _rms(values: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.asarray(values) ** 2)))


def _plot_joint(path: Path, joint: str, j: int, joints: int,
                pair: tuple[Evaluation, Evaluation]) -> None:
    """Measured vs nominal vs fitted position, velocity and effort of one joint."""
    nominal, fitted = pair
    t, nominal_pred, measured = nominal.series[0]
    _, fitted_pred, _ = fitted.series[0]
    figure, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
    for row, (signal, unit) in enumerate(zip(SIGNALS, UNITS, strict=True)):
        column = row * joints + j
        ax = axes[row]
        ax.plot(t - t[0], measured[:, column], 'k', lw=1.2, label='measured')
        ax.plot(t - t[0], nominal_pred[:, column], 'C3--', lw=1, label='nominal')
        ax.plot(t - t[0], fitted_pred[:, column], 'C0', lw=1, label='fitted')
        ax.set_ylabel(f'{signal} ({unit})')
        ax.grid(alpha=0.3)
    axes[0].legend(loc='upper right')
    axes[0].set_title(f'{joint}: open-loop replay')
    axes[-1].set_xlabel('time (s)')
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _plot_objective(path: Path, objective: Sequence[float]) -> None:
    figure, ax = plt.subplots(figsize=(6, 3.5))
    ax.semilogy(range(1, len(objective) + 1), objective, 'o-')
    ax.set_xlabel('iteration')
    ax.set_ylabel('objective')
    ax.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
