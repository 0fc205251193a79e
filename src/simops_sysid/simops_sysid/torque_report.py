"""The torque fit's report: per-joint RMS tables and held-out plots (``fit --report``).

``torque.md`` compares, per joint and over all joints, on training and held-out data, the
raw measured efforts against each model the fit knows: the rigid body alone, with the
model's own friction, with the fitted friction and offsets, and with the learned model
when one was fitted. Its figures are the SimParams provenance's ``torque_rms_nm``, as
written. ``torque_holdout.png`` plots the held-out efforts per joint, measured and modelled,
and ``torque_residual.png`` what each model leaves of them. matplotlib draws off-screen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt
import numpy as np

from simops_sysid.torque_figures import joint_total

# What each key of the provenance's ``torque_rms_nm`` compares, in the order the fit adds them.
MODELS = {
    'rigid_body': 'rigid body',
    'nominal': "+ the model's friction",
    'fitted': '+ fitted friction and offsets',
    'actuator_model': '+ learned model',
}
PARTS = {'holdout': 'Held out', 'training': 'Training'}


def beyond_shares(beyond: Mapping[str, float]) -> str:
    """Per input, the share (0..1) of held-out samples beyond the training range, as text.

    As fit prints and reports it: ``model torque 0.1 %, velocity 0.5 %, acceleration 0.0 %``.
    """
    return ', '.join(f'{name.replace("_", " ")} {100 * share:.1f} %'
                     for name, share in beyond.items())


@dataclass(frozen=True)
class HeldOutTraces:
    """Held-out efforts at ``period`` s per sample: ``measured`` (N, 7) N*m, raw.

    ``models``: each model's prediction (N, 7) N*m by :data:`MODELS` key.
    """

    period: float
    measured: np.ndarray
    models: Mapping[str, np.ndarray]


def write_torque_report(folder: Path, joints: Sequence[str],
                        rms: Mapping[str, Mapping[str, Mapping[str, float]]],
                        traces: HeldOutTraces, rate: float,
                        beyond: Mapping[str, float] | None = None) -> Path:
    """Write ``torque.md`` and the held-out plots into ``folder``; return ``torque.md``.

    ``rms``: the provenance's ``torque_rms_nm`` (part -> model -> joint -> N*m); ``rate``
    Hz: the recorded rate the figures are at; ``beyond``: with a learned model, the
    fraction of held-out samples beyond its training range, per input.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lines = ['# Torque fit', '',
             f'Torque RMS (N*m) of the raw measured efforts at {rate:.0f} Hz, unfiltered, '
             'against each model.', '']
    for part, title in PARTS.items():
        figures = rms[part]
        keys = [key for key in MODELS if key in figures]
        lines += [f'## {title}', '',
                  '| joint | ' + ' | '.join(MODELS[key] for key in keys) + ' |',
                  '|---|' + '---:|' * len(keys)]
        for joint in joints:
            lines.append(f'| {joint} | '
                         + ' | '.join(f'{figures[key][joint]:.4f}' for key in keys) + ' |')
        lines.append('| all joints | ' + ' | '.join(
            f'{joint_total(figures[key].values()):.4f}' for key in keys) + ' |')
        lines.append('')
    if beyond is not None:
        lines += ['Held-out samples beyond the learned model\'s training range, where it '
                  f'extrapolates: {beyond_shares(beyond)}.', '']
    _plot(folder / 'torque_holdout.png', joints, traces, residual=False)
    _plot(folder / 'torque_residual.png', joints, traces, residual=True)
    lines += ['![held-out efforts](torque_holdout.png)', '',
              '![what each model leaves](torque_residual.png)', '']
    path = folder / 'torque.md'
    path.write_text('\n'.join(lines))
    return path


def _plot(path: Path, joints: Sequence[str], traces: HeldOutTraces, residual: bool) -> None:
    """One row per joint: the measured and modelled efforts, or what the models leave."""
    t = traces.period * np.arange(traces.measured.shape[0])
    figure, axes = plt.subplots(len(joints), 1, figsize=(9, 1.6 * len(joints)), sharex=True)
    for j, (ax, joint) in enumerate(zip(np.atleast_1d(axes), joints, strict=True)):
        if not residual:
            ax.plot(t, traces.measured[:, j], color='0.6', lw=0.8, label='measured')
        for key, predicted in traces.models.items():
            values = (traces.measured[:, j] - predicted[:, j] if residual
                      else predicted[:, j])
            ax.plot(t, values, lw=0.8, label=MODELS[key])
        ax.set_ylabel(f'{joint}\nN*m', fontsize=7)
        ax.tick_params(labelsize=7)
    np.atleast_1d(axes)[0].legend(fontsize=6, ncol=5, loc='upper right')
    np.atleast_1d(axes)[-1].set_xlabel('held-out time (s)')
    figure.suptitle('held-out: measured minus model' if residual
                    else 'held-out efforts: measured and modelled', fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
