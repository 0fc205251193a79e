"""Validation results, the verdict, and the reports: JSON, Markdown, heatmap, DR suggestion.

Verdict: ``fail`` when any episode ended in a protective stop (the arm stopping itself, as
the real arm would: a policy that trips it must not reach it) or broke the task's safety
limits (pick-and-place: 1.5 rad/s, 20 N of hand contact); else ``pass`` when the mean
success over the cells is at least ``pass_mean`` and every cell reaches ``pass_min``;
``marginal`` when the mean is at least ``marginal_mean``; ``fail`` otherwise. The cells are
the grid's configurations and, after them, one per adversarial scenario (at the calibrated
physics, :mod:`simops_sim.scenarios`), judged alike. Success rates are fractions in [0, 1].
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simops_sim.randomization import Conditions, DomainRandomization, default_randomization
from simops_sim.scenarios import Scenario
from simops_sim.sim_profiles import VALIDATION, profile_entry, sim_profile

WORST_SHOWN = 5
# How an episode failed, first that applies: the arm stopped itself; it broke the task's
# safety limits; it lifted the object, then lost it; it ran out of steps; it ended early
# otherwise (an arm joint beyond its velocity limit: the node would fault).
FAILURE_MODES = ('', 'protective_stop', 'unsafe', 'dropped', 'timeout', 'fault')
Outcome = tuple[bool, float, int, int, int, float, float, int]
"""One episode: success, distance (m), steps, stopped, unsafe, peak joint speed (rad/s),
peak hand contact force (N), failure mode (an index into FAILURE_MODES):
:class:`~simops_learning.rollout.EpisodeResult` as a tuple."""
SUGGESTION_MARGIN = 1.25      # factor beyond the worst values a suggested range reaches


@dataclass(frozen=True)
class Thresholds:
    """Verdict thresholds on success rates (fractions)."""

    pass_mean: float = 0.85
    pass_min: float = 0.60
    marginal_mean: float = 0.70


@dataclass(frozen=True)
class ConfigResult:
    """One grid configuration: its conditions and per-episode outcomes."""

    conditions: Conditions
    success: float                 # fraction of episodes
    mean_distance: float           # m, final flange-goal distance
    mean_steps: float              # control steps per episode
    episodes: int
    stops: int                     # episodes that ended in a protective stop
    unsafe: int = 0                # episodes beyond the task's safety limits
    peak_speed: float = float('nan')   # rad/s, largest arm joint speed of any episode
    peak_force: float = float('nan')   # N, largest hand contact force of any episode
    failures: dict[str, int] = field(default_factory=dict)   # failed episodes by mode
    scenario: str = ''             # the adversarial scenario of the cell ('' a grid cell)


@dataclass(frozen=True)
class Report:
    """A validation run and (after :meth:`judge`) its verdict."""

    policy: str
    sha256: str
    sim_params: str | None
    grid: dict[str, list[float]]
    configs: tuple[ConfigResult, ...]
    seed: int
    wall_time_s: float
    thresholds: Thresholds = field(default_factory=Thresholds)
    verdict: str = 'unjudged'
    profile: str = VALIDATION                        # the simulator (simops_sim.sim_profiles)
    training_success: tuple[float, ...] | None = None   # the same cells in the training sim
    # the learned sensor model the arm reported efforts through: its SimParams file's path
    # and sha256, and the model's (model_sha256); None: the parametric efforts
    sensor_model: dict[str, str] | None = None
    # the sensor errors the envs read through (simops_sim.perception); None: exact readings
    sensors: dict[str, float | int] | None = None
    scenarios: tuple[Scenario, ...] = ()   # the last len(scenarios) cells play one each

    @classmethod
    def build(cls, policy: Path, sha256: str, sim_params: Path | None,
              grid: dict[str, list[float]], conditions: list[Conditions],
              results: list[list[Outcome]], episodes: int, seed: int,
              wall_time: float, scenarios: tuple[Scenario, ...] = ()) -> Report:
        """Aggregate per-episode :data:`Outcome` tuples per cell.

        ``conditions``: the grid's configurations, then one per scenario of ``scenarios``.
        """
        configs = []
        names = [''] * (len(conditions) - len(scenarios)) + [s.name for s in scenarios]
        for cond, outcome, name in zip(conditions, results, names, strict=True):
            if len(outcome) != episodes:
                raise RuntimeError(f'{cond}: {len(outcome)} of {episodes} episodes returned')
            success, distance, steps, stops, unsafe, speed, force, failure = (
                np.array(column, dtype=float) for column in zip(*outcome, strict=True))
            modes = Counter(FAILURE_MODES[int(code)] for code in failure if code)
            configs.append(ConfigResult(
                cond, float(success.mean()), float(distance.mean()), float(steps.mean()),
                episodes, int(stops.sum()), int(unsafe.sum()), _peak(speed), _peak(force),
                {mode: modes[mode] for mode in FAILURE_MODES[1:] if modes[mode]}, name))
        return cls(str(policy), sha256, str(sim_params) if sim_params else None, grid,
                   tuple(configs), seed, round(wall_time, 1), scenarios=scenarios)

    @property
    def grid_configs(self) -> tuple[ConfigResult, ...]:
        """The grid's configurations (the cells that play no scenario)."""
        return tuple(c for c in self.configs if not c.scenario)

    @property
    def mean(self) -> float:
        """Mean success over the configurations."""
        return float(np.mean([c.success for c in self.configs]))

    @property
    def stops(self) -> int:
        """Episodes that ended in a protective stop, over the grid."""
        return sum(c.stops for c in self.configs)

    @property
    def unsafe(self) -> int:
        """Episodes beyond the task's safety limits, over the grid."""
        return sum(c.unsafe for c in self.configs)

    @property
    def failures(self) -> dict[str, int]:
        """Failed episodes over the grid by how they failed (FAILURE_MODES; none left out)."""
        total = Counter()
        for c in self.configs:
            total.update(c.failures)
        return {mode: total[mode] for mode in FAILURE_MODES[1:] if total[mode]}

    @property
    def min(self) -> float:
        """Lowest success of any configuration."""
        return float(min(c.success for c in self.configs))

    def with_training(self, training: Report) -> Report:
        """A copy holding ``training``'s success per cell: the sim-to-sim gap.

        ``training``: the same grid, seeds and episodes run in the training sim. The verdict
        stays this report's.
        """
        if (training.grid != self.grid or training.seed != self.seed
                or training.scenarios != self.scenarios):
            raise ValueError('the training sim\'s run has another grid, seed or scenarios')
        return replace(self, training_success=tuple(c.success for c in training.configs))

    @property
    def sim_gaps(self) -> list[float] | None:
        """Per cell: success in the training sim minus in this (validation) sim."""
        if self.training_success is None:
            return None
        return [t - c.success for t, c in zip(self.training_success, self.configs,
                                                strict=True)]

    def judge(self, thresholds: Thresholds) -> Report:
        """A copy with the verdict under ``thresholds``."""
        t = thresholds
        verdict = ('fail' if self.stops or self.unsafe
                   else 'pass' if self.mean >= t.pass_mean and self.min >= t.pass_min
                   else 'marginal' if self.mean >= t.marginal_mean else 'fail')
        return replace(self, thresholds=thresholds, verdict=verdict)

    def worst(self, count: int = WORST_SHOWN) -> list[ConfigResult]:
        """The ``count`` configurations with the lowest success, worst first."""
        return sorted(self.configs, key=lambda c: (c.success, -c.mean_distance))[:count]

    def summary(self) -> str:
        """One line: verdict, mean and min success."""
        return (f'verdict: {self.verdict.upper()} (mean success {self.mean:.1%}, min '
                f'{self.min:.1%} over {len(self.configs)} configurations x '
                f'{self.configs[0].episodes} episodes, {self.stops} protective stops, '
                f'{self.unsafe} unsafe)')

    def axes_label(self, config: ConfigResult) -> str:
        """``friction=0.3 mass=2 delay=1`` for the grid's axes; ``scenario=push_arm``."""
        if config.scenario:
            return f'scenario={config.scenario}'
        values = config.conditions.as_dict()
        return ' '.join(f'{name}={values[name]:g}' for name in self.grid)

    def suggestion(self, current: DomainRandomization | None = None) -> dict[str, Any]:
        """Randomisation ranges widened to cover the failing configurations, with margin.

        A configuration fails when its success is below ``pass_min``, or (if none is) when it
        is among the worst. Factor axes widen to ``[low / margin, high * margin]`` of the
        failing values; delay and noise to their largest failing value. Scenario cells widen
        nothing (no range holds them); the note names those that fail.
        """
        current = current or default_randomization()
        grid = self.grid_configs
        failing = [c for c in grid if c.success < self.thresholds.pass_min]
        failing = failing or sorted(grid, key=lambda c: (c.success, -c.mean_distance))[
            :WORST_SHOWN]
        ranges = asdict(current)
        for name in self.grid:
            values = [getattr(c.conditions, name) for c in failing]
            if name == 'delay':
                ranges[name] = max(int(ranges[name]), int(max(values)))
            elif name == 'obs_noise':
                ranges[name] = max(float(ranges[name]), float(max(values)))
            else:
                low, high = ranges[name]
                ranges[name] = [float(min(low, min(values) / SUGGESTION_MARGIN)),
                                float(max(high, max(values) * SUGGESTION_MARGIN))]
        ranges['ramp_times'] = list(ranges['ramp_times'])
        widened = ranges != {**asdict(current), 'ramp_times': list(current.ramp_times)}
        note = ('ranges widened to cover the failing configurations; retrain with '
                'simops-train --randomization dr_suggestion.yaml' if widened else
                'the training ranges already cover the failing configurations: retrain '
                'longer (--iterations, --episodes) or calibrate the simulator (sim params)')
        lost = [c.scenario for c in self.configs
                if c.scenario and c.success < self.thresholds.pass_min]
        if lost:
            note += ('; the scenarios ' + ', '.join(lost) + ' fail, which no randomisation '
                     'range covers: train with them')
        return {'randomization': ranges,
                'worst_configs': [{**c.conditions.as_dict(), **_scenario_of(c),
                                   'success': c.success} for c in self.worst()],
                'note': note}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready mapping of the whole report."""
        gaps = self.sim_gaps
        cells = [{} if gaps is None else
                 {'training_success': t, 'sim_gap': g}
                 for t, g in zip(self.training_success or self.configs, gaps or self.configs,
                                 strict=True)]
        return {
            'policy': self.policy, 'sha256': self.sha256, 'sim_params': self.sim_params,
            'sim_profile': profile_entry(self.profile), 'sensor_model': self.sensor_model,
            'sensors': self.sensors,
            'grid': self.grid, 'scenarios': [s.as_dict() for s in self.scenarios],
            'seed': self.seed, 'wall_time_s': self.wall_time_s,
            'thresholds': asdict(self.thresholds), 'verdict': self.verdict,
            'mean_success': self.mean, 'min_success': self.min,
            'protective_stops': self.stops, 'unsafe_episodes': self.unsafe,
            'failures': self.failures,
            **({} if gaps is None else {'sim_gap_mean': float(np.mean(gaps)),
                                        'sim_gap_max': float(np.max(np.abs(gaps)))}),
            'configs': [{**c.conditions.as_dict(), **_scenario_of(c), 'success': c.success,
                         **cell,
                         'mean_distance_m': c.mean_distance, 'mean_steps': c.mean_steps,
                         'episodes': c.episodes, 'protective_stops': c.stops,
                         'unsafe_episodes': c.unsafe, 'failures': c.failures,
                         'peak_joint_speed_rad_s': _json_number(c.peak_speed),
                         'peak_contact_force_n': _json_number(c.peak_force)}
                        for c, cell in zip(self.configs, cells, strict=True)],
        }


def _scenario_of(config: ConfigResult) -> dict[str, str]:
    """``{'scenario': name}`` for a scenario cell, ``{}`` for a grid cell."""
    return {'scenario': config.scenario} if config.scenario else {}


def write_reports(report: Report, directory: Path,
                  trained: DomainRandomization | None = None) -> list[Path]:
    """Write validation.json, validation.md, validation_heatmap.png (and the suggestion).

    ``trained``: the ranges the policy was trained with (its card's training metadata),
    which the suggestion widens; default: the built-in ranges.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / 'validation.json', directory / 'validation.md',
             directory / 'validation_heatmap.png']
    paths[0].write_text(json.dumps(report.to_dict(), indent=2) + '\n')
    write_heatmap(report, paths[2])
    suggestion = None
    if report.verdict in ('fail', 'marginal'):
        suggestion = directory / 'dr_suggestion.yaml'
        suggestion.write_text(yaml.safe_dump(report.suggestion(trained), sort_keys=False))
        paths.append(suggestion)
    paths[1].write_text(markdown(report, paths[2].name, suggestion))
    return paths


def markdown(report: Report, heatmap: str, suggestion: Path | None) -> str:
    """The human-readable report."""
    t = report.thresholds
    gaps = report.sim_gaps
    options = ', '.join(f'{k} {v}' for k, v in sim_profile(report.profile).as_dict().items())
    lines = [
        '# Policy validation', '',
        f'- policy: `{report.policy}` (sha256 `{report.sha256[:16]}…`)',
        f'- simulator: the {report.profile} profile ({options})',
        *([f'- torque sensors: the learned model of `{report.sensor_model["path"]}` '
            f'(model sha256 `{report.sensor_model["model_sha256"][:16]}…`)']
          if report.sensor_model else []),
        *([f'- readings: joints with {report.sensors["joint_noise"]:g} rad noise, '
           f'{1000 * report.sensors.get("joint_latency", 0.0):g} ms old; the object '
           f'with {1000 * report.sensors["object_noise"]:g} mm noise, '
           f'{report.sensors["object_latency"]} period(s) late, '
           f'{report.sensors["object_dropout"]:.0%} of periods lost']
          if report.sensors else []),
        f'- physics: {report.sim_params or "model nominal"}; grid '
        + ', '.join(f'{k} = {", ".join(f"{v:g}" for v in vs)}' for k, vs in report.grid.items()),
        f'- {len(report.grid_configs)} configurations'
        + (f' and {len(report.scenarios)} scenarios' if report.scenarios else '')
        + f' × {report.configs[0].episodes} episodes '
        f'(goal seed {report.seed}, same goals in every configuration), '
        f'{report.wall_time_s:.0f} s',
        f'- thresholds: pass when mean ≥ {t.pass_mean:.0%} and min ≥ {t.pass_min:.0%}; '
        f'marginal when mean ≥ {t.marginal_mean:.0%}',
        '', f'**Verdict: {report.verdict.upper()}** — mean success {report.mean:.1%}, '
        f'min {report.min:.1%}, {report.stops} protective stops, {report.unsafe} unsafe '
        'episodes (any stop or unsafe episode fails)', '',
        f'![success heatmap]({heatmap})', '',
        *_cell_table(report, list(report.grid), lambda c: [
            f'{c.conditions.as_dict()[k]:g}' for k in report.grid], scenarios=False),
    ]
    if report.scenarios:
        lines += ['', '## Scenarios', '',
                  'Each at the calibrated physics (no factors), one event per episode '
                  '(config/scenarios.yaml):', '',
                  *_cell_table(report, ['scenario', 'event'], lambda c: [
                      c.scenario, _event(report, c.scenario)], scenarios=True)]
    if gaps is not None:
        lines += ['', f'Sim-to-sim gap (success in the training sim minus in this one): '
                  f'mean {100 * np.mean(gaps):+.1f} pt, largest {100 * np.max(np.abs(gaps)):.0f}'
                  ' pt.']
    lines += ['', f'Failed episodes by how they failed: {_modes(report.failures)}.']
    lines += ['', '## Worst configurations', '']
    lines += [f'- {report.axes_label(c)}: {c.success:.0%}' for c in report.worst()]
    if suggestion is not None:
        lines += ['', f'Suggested randomisation update: `{suggestion.name}` '
                  f'({report.suggestion()["note"]}).']
    return '\n'.join(lines) + '\n'


def _cell_table(report: Report, labels: list[str],
                label: Callable[[ConfigResult], list[str]], scenarios: bool) -> list[str]:
    """The Markdown table of the grid's cells or (``scenarios``) of the scenario cells."""
    gaps, training = report.sim_gaps, report.training_success
    lines = ['| ' + ' | '.join(labels) + ' | success | '
             + ('training sim | sim-to-sim gap | ' if gaps is not None else '')
             + 'final distance (mm) | steps | stops | unsafe | failures | peak joint speed '
             '(rad/s) | peak contact force (N) |',
             '|' + '---|' * (len(labels) + 8 + (2 if gaps is not None else 0))]
    for i, c in enumerate(report.configs):
        if bool(c.scenario) != scenarios:
            continue
        gap = ('' if gaps is None or training is None else
               f'{training[i]:.0%} | {100 * gaps[i]:+.0f} pt | ')
        lines.append('| ' + ' | '.join(label(c))
                     + f' | {c.success:.0%} | {gap}{1000 * c.mean_distance:.1f} | '
                     f'{c.mean_steps:.0f} | {c.stops} | {c.unsafe} | '
                     f'{_modes(c.failures)} | {c.peak_speed:.2f} | {c.peak_force:.1f} |')
    return lines


def _event(report: Report, name: str) -> str:
    """What scenario ``name`` of ``report`` does, in a few words."""
    found = next(s for s in report.scenarios if s.name == name)
    text = found.event.replace('_', ' ').replace('estop', 'e-stop').replace('arm stop',
                                                                            "the arm's stop")
    if found.event == 'push':
        text += f' {found.force:g} N on the {found.body}'
    text += f' at {found.at:g} s' + (f' for {found.duration:g} s' if found.duration else '')
    if found.event == 'estop':
        text += f', ~/enable {found.enable_after:g} s after its release'
    elif found.event == 'arm_stop':
        text += f' until its recovery, ~/enable {found.enable_after:g} s after'
    return text


def _modes(failures: dict[str, int]) -> str:
    """``timeout 3, dropped 1``, or ``none``."""
    return ', '.join(f'{mode.replace("_", " ")} {n}' for mode, n in failures.items()) or 'none'


def _peak(values: np.ndarray) -> float:
    """Largest of per-episode peaks; NaN where none was measured."""
    return float(np.nanmax(values)) if np.any(np.isfinite(values)) else float('nan')


def _json_number(value: float) -> float | None:
    return None if np.isnan(value) else value


def write_heatmap(report: Report, path: Path) -> None:
    """Success heatmap: columns = the last grid axis, rows = the others' combinations."""
    import matplotlib

    matplotlib.use('Agg')
    from matplotlib import pyplot as plt

    axes = list(report.grid)
    columns = report.grid[axes[-1]]
    cells = report.grid_configs
    rows = len(cells) // len(columns)
    values = np.array([c.success for c in cells]).reshape(rows, len(columns))
    labels = [' '.join(f'{k}={c.conditions.as_dict()[k]:g}' for k in axes[:-1]) or 'all'
              for c in cells[::len(columns)]]
    figure, ax = plt.subplots(figsize=(1.2 * len(columns) + 3, 0.35 * rows + 1.5))
    image = ax.imshow(values, vmin=0.0, vmax=1.0, cmap='RdYlGn', aspect='auto')
    ax.set_xticks(range(len(columns)), [f'{v:g}' for v in columns])
    ax.set_yticks(range(rows), labels, fontsize=8)
    ax.set_xlabel(axes[-1])
    for (i, j), value in np.ndenumerate(values):
        ax.text(j, i, f'{value:.0%}', ha='center', va='center', fontsize=7)
    ax.set_title(f'success rate: {report.verdict} (mean {report.mean:.0%}, '
                 f'min {report.min:.0%})')
    figure.colorbar(image, ax=ax, fraction=0.05)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
