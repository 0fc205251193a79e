"""What ``simops-demo`` reports: parameter recovery, replay error, policy episode, validation.

Pure Python over the files the tools wrote: the fitted SimParams (``fit`` puts the replay
residuals in its provenance), the stand-in's hidden truth and the model's nominal SimParams,
and ``simops-validate``'s validation.json. The recovery bar is the fidelity issue's: the
controller gains and the command delay within 10 % of the truth (median at most 5 %), the
encoder offsets within 0.1 mrad. The stand-in's friction is smooth (tanh) on purpose, which
the trajectory fit's rollouts only approximate (four saturating lines).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from simops_core.sim_params import SimParams

JOINT_KINDS = ('kp', 'kv', 'encoder_offset')
UNITS = {'kp': 'N*m/rad', 'kv': 'N*m*s/rad', 'encoder_offset': 'mrad', 'command_delay': 'ms'}
MAX_ERROR = 0.10            # of the truth, for the gains and the delay
MEDIAN_ERROR = 0.05
MAX_OFFSET_ERROR = 1e-4     # rad, for the encoder offsets
SHOWN = {'encoder_offset': 1e3, 'command_delay': 1e3}   # rad and s shown as mrad and ms


@dataclass(frozen=True)
class Recovered:
    """One fitted parameter against the hidden truth (and where the fit started)."""

    name: str          # e.g. fr3_joint1.damping or command_delay
    kind: str
    nominal: float
    truth: float
    fitted: float

    @property
    def absolute(self) -> bool:
        """Whether the error is absolute (an offset, rad) rather than relative."""
        return self.kind == 'encoder_offset'

    @property
    def error(self) -> float:
        """The fit's error against the truth: absolute (rad) for offsets, else relative."""
        miss = abs(self.fitted - self.truth)
        return miss if self.absolute else miss / abs(self.truth)

    @property
    def within(self) -> bool:
        """Whether this parameter meets its bar."""
        return self.error <= (MAX_OFFSET_ERROR if self.absolute else MAX_ERROR)


def recovery(fitted: SimParams, truth: SimParams, nominal: SimParams,
             joints: Sequence[str]) -> list[Recovered]:
    """Every parameter the fit wrote for ``joints`` (and the delay), against the truth."""
    rows = []
    for joint in joints:
        got = fitted.joints.get(joint)
        if got is None:
            continue
        for kind in JOINT_KINDS:
            value = getattr(got, kind)
            if value is not None:
                rows.append(Recovered(f'{joint}.{kind}', kind,
                                      float(getattr(nominal.joints[joint], kind)),
                                      float(getattr(truth.joints[joint], kind)), float(value)))
    if fitted.command_delay is not None:
        rows.append(Recovered('command_delay', 'command_delay', float(nominal.command_delay or 0),
                              float(truth.command_delay or 0), float(fitted.command_delay)))
    return rows


def within_bar(rows: Sequence[Recovered]) -> bool:
    """The bar: every parameter within its own (see the module), relative median <= 5 %."""
    relative = [r.error for r in rows if not r.absolute]
    return (bool(rows) and all(r.within for r in rows)
            and float(np.median(relative or [0.0])) <= MEDIAN_ERROR)


@dataclass(frozen=True)
class Goal:
    """One goal of the policy episode and how the flange did on it.

    ``position`` (m, base frame); ``reached``: whether the flange got within the success
    radius, after ``seconds``; ``final``: its distance (m) after dwelling there.
    """

    position: tuple[float, float, float]
    reached: bool
    seconds: float
    final: float


@dataclass(frozen=True)
class Validation:
    """The verdict and success rates of one simops-validate run."""

    physics: str
    verdict: str
    mean_success: float
    min_success: float
    configs: int

    @classmethod
    def load(cls, physics: str, path: Path) -> Validation:
        """Read ``validation.json``."""
        data = json.loads(path.read_text())
        return cls(physics, data['verdict'], data['mean_success'], data['min_success'],
                   len(data['configs']))


@dataclass(frozen=True)
class Dataset:
    """The demo's LeRobot dataset: where, and what its episode table says."""

    path: str
    fps: float
    episodes: int
    frames: int
    recorded: int        # episodes from bags
    recorded_success: list[bool]
    frames_dropped: int  # over the recorded episodes
    simulated: int
    simulated_success: int

    @classmethod
    def load(cls, folder: Path) -> Dataset:
        """Read ``folder``'s meta/info.json and episode table."""
        info = json.loads((folder / 'meta' / 'info.json').read_text())
        rows = pq.read_table(sorted((folder / 'meta' / 'episodes').rglob('*.parquet'))
                             ).to_pylist()
        real = [r for r in rows if r['source'] != 'sim']
        sim = [r for r in rows if r['source'] == 'sim']
        return cls(str(folder), float(info['fps']), int(info['total_episodes']),
                   int(info['total_frames']), len(real), [bool(r['success']) for r in real],
                   sum(int(r['frames_dropped']) for r in real), len(sim),
                   sum(bool(r['success']) for r in sim))

    def line(self) -> str:
        """One summary line."""
        return (f'LeRobot v3.0 dataset {self.path}: {self.episodes} episodes, {self.frames} '
                f'frames at {self.fps:g} fps: {self.recorded} recorded (success '
                f'{self.recorded_success}, {self.frames_dropped} frames dropped) and '
                f'{self.simulated} simulated ({self.simulated_success} successes)')


@dataclass(frozen=True)
class Deployment:
    """The promotion and what the real_robot profile did under the fit's calibration.

    ``stages_run``: the pipeline's stages DVC ran (none: all cached); ``refused``: the policy
    node's one line for ``unpromoted``; ``goal``: the promoted policy on its goal.
    """

    promoted: str
    calibration: str
    stages_run: tuple[str, ...]
    unpromoted: str
    refused: str
    goal: Goal

    def lines(self) -> list[str]:
        """Summary lines."""
        g = self.goal
        ran = ', '.join(self.stages_run) if self.stages_run else 'none (all cached)'
        return ['Promotion and deployment under the fit (calibration:='
                f'{self.calibration})',
                f'  pipeline stages run: {ran}',
                f'  {self.unpromoted} (gated against the nominal model only): refused, exit 2: '
                f'{self.refused}',
                f'  {self.promoted} (promoted): goal ({g.position[0]:.2f}, {g.position[1]:.2f},'
                f' {g.position[2]:.2f}) m ' + (f'reached in {g.seconds:.1f} s' if g.reached
                                               else 'NOT reached')
                + f', then {g.final * 1e3:.1f} mm away']


@dataclass
class Summary:
    """Everything the final table shows."""

    recovered: list[Recovered]
    replay: Mapping[str, Mapping[str, float]]   # training / held-out -> nominal / fitted mrad
    goals: list[Goal]
    validations: list[Validation]
    durations: Mapping[str, float]
    fitted_seconds: float | None = None   # s of recording the fit used (its provenance)
    pick: Goal | None = None              # the pick-and-place episode: the cube's goal
    dataset: Dataset | None = None        # the LeRobot dataset step
    deployment: Deployment | None = None  # the promotion and the deploy step

    def lines(self) -> list[str]:
        """The summary as aligned text lines (what the terminal shows)."""
        out = ['Parameter recovery against the stand-in\'s hidden truth (mean over joints)',
               f'  {"parameter":<14}{"nominal":>11}{"truth":>11}{"fitted":>11}'
               f'{"max error":>11}  unit']
        for kind in dict.fromkeys(r.kind for r in self.recovered):
            rows = [r for r in self.recovered if r.kind == kind]
            scale = SHOWN.get(kind, 1.0)
            mean = {k: scale * float(np.mean([getattr(r, k) for r in rows]))
                    for k in ('nominal', 'truth', 'fitted')}
            worst = max(r.error for r in rows)
            shown = f'{worst * 1e3:>6.3f} mrad' if rows[0].absolute else f'{worst:>10.1%}'
            out.append(f'  {kind:<14}{mean["nominal"]:>11.4g}{mean["truth"]:>11.4g}'
                       f'{mean["fitted"]:>11.4g}{shown}  {UNITS[kind]}')
        relative = [r for r in self.recovered if not r.absolute]
        worst_row = max(relative, key=lambda r: r.error)
        offsets = [r.error for r in self.recovered if r.absolute]
        out.append(f'  {len(self.recovered)} parameters: worst {worst_row.name} '
                   f'{worst_row.error:.1%}, median {np.median([r.error for r in relative]):.1%}'
                   + (f', encoder offsets within {max(offsets) * 1e3:.3f} mrad' if offsets
                      else '') + f' -> {"within" if within_bar(self.recovered) else "MISSES"} '
                   f'the bar (gains and delay <= {MAX_ERROR:.0%}, median <= '
                   f'{MEDIAN_ERROR:.0%}; offsets <= {MAX_OFFSET_ERROR * 1e3:g} mrad)')
        if self.fitted_seconds is not None:
            out.append(f'  fitted on {self.fitted_seconds:.1f} s of the excitation (fit leaves '
                       'out sequences whose joint states arrived late)')
        out += ['', 'Replay error (joint position RMS, open-loop replay of the recorded commands)',
                f'  {"recording":<30}{"nominal":>12}{"fitted":>12}']
        for label, pair in self.replay.items():
            out.append(f'  {label:<30}{pair["nominal"]:>9.3f} mrad{pair["fitted"]:>7.3f} mrad')
        reached = sum(g.reached for g in self.goals)
        out += ['', f'Policy episode on the stand-in: {reached}/{len(self.goals)} goals reached']
        for g in self.goals:
            out.append(f'  goal ({g.position[0]:.2f}, {g.position[1]:.2f}, {g.position[2]:.2f})'
                       f' m: ' + (f'reached in {g.seconds:.1f} s' if g.reached else
                                  'not reached') + f', then {g.final * 1e3:.1f} mm away')
        if self.pick is not None:
            p = self.pick
            out += ['', 'Pick and place on the stand-in (gripper through franka_gripper): the '
                    'cube ' + (f'reached the goal in {p.seconds:.1f} s' if p.reached else
                               'did NOT reach the goal')
                    + f', then {p.final * 1e3:.1f} mm from ({p.position[0]:.2f}, '
                    f'{p.position[1]:.2f}, {p.position[2]:.2f}) m']
        if self.dataset is not None:
            out += ['', self.dataset.line()]
        if self.deployment is not None:
            out += ['', *self.deployment.lines()]
        out += ['', 'Validation of the shipped policy',
                f'  {"simulator physics":<30}{"verdict":>10}{"mean":>9}{"min":>9}']
        for v in self.validations:
            out.append(f'  {v.physics:<30}{v.verdict.upper():>10}{v.mean_success:>9.0%}'
                       f'{v.min_success:>9.0%}')
        out += ['', 'Wall time: ' + ', '.join(f'{name} {seconds:.0f} s'
                                             for name, seconds in self.durations.items())
                + f'; total {sum(self.durations.values()):.0f} s']
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, per parameter."""
        return {
            'parameters': [asdict(r) | {'error': r.error, 'within': r.within}
                           for r in self.recovered],
            'within_bar': within_bar(self.recovered), 'replay_rms_mrad': dict(self.replay),
            'goals': [asdict(g) for g in self.goals],
            'validation': [asdict(v) for v in self.validations],
            'durations_s': dict(self.durations), 'fitted_seconds': self.fitted_seconds,
            'pick_place': asdict(self.pick) if self.pick is not None else None,
            'dataset': asdict(self.dataset) if self.dataset is not None else None,
            'deployment': asdict(self.deployment) if self.deployment is not None else None,
        }


def replay_errors(provenance: Mapping[str, Any], labels: Mapping[str, str]
                  ) -> dict[str, dict[str, float]]:
    """Position RMS before and after the fit, from the fitted file's provenance.

    ``labels`` maps the provenance keys (``residual_training``, ``residual_holdout``) to
    the names shown.
    """
    out = {}
    for key, label in labels.items():
        if key in provenance:
            rms = provenance[key]['position_rms_mrad']
            out[label] = {'nominal': float(rms['nominal']), 'fitted': float(rms['fitted'])}
    return out


def write_summary(summary: Summary, folder: Path) -> list[Path]:
    """Write summary.txt and summary.json into ``folder``."""
    text, data = folder / 'summary.txt', folder / 'summary.json'
    text.write_text('\n'.join(summary.lines()) + '\n')
    data.write_text(json.dumps(summary.to_dict(), indent=2) + '\n')
    return [text, data]
