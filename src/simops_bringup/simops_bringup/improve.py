"""The improve stage: after a FAIL or MARGINAL, bounded rounds of analysis, retraining, gating.

DVC runs it as ``simops-pipeline improve FILE --dir RUN`` after the gate. Each round ``k``
writes ``improve/round_<k>/``:

- ``analysis.md`` and ``analysis.json``: the gate's failing cells (success below
  ``pass_min``, or any protective stop or unsafe episode) with how their episodes failed
  (protective stop, unsafe, dropped, timeout, fault), and the totals by mode;
- ``randomization.yaml``: the training ranges of the round: the previous gate's
  ``dr_suggestion.yaml`` (its ranges widened to cover the failing cells,
  :meth:`simops_learning.validation_report.Report.suggestion`) for what the file's
  ``feedback.change`` allows, the previous ranges otherwise;
- the events the training plays (``scenarios``: the failing scenario cells') and the
  penalty terms of PPO's reward (``reward``: each failure mode the gate counted, at the
  weight of a success, :func:`simops_learning.reward_terms.failing_terms`), where
  ``feedback.change`` allows them, kept for every later round;
- ``policy/``: ``simops-train`` with those ranges (the pipeline's command and budget),
  fine-tuned from the last round's policy where the task's training can (pick and place:
  DAgger from its weights at the full ranges), from scratch otherwise (reach);
- ``gate/``: ``simops-validate`` of that policy (the pipeline's gate).

The rounds stop at a PASS, after ``feedback.max_rounds``, or when the suggestion changes
nothing the loop may change (the failures are not the ranges'). ``release/`` then holds the
policy the loop ends with and its gate report, which the promote stage seals or refuses;
``improve/summary.json`` lists the rounds. No rclpy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from simops_bringup.pipeline_commands import (
    GATE,
    IMPROVE,
    POLICY,
    POLICY_SUFFIXES,
    RANDOMIZATION,
    RELEASE,
    gate_command,
    stem,
    train_command,
)
from simops_bringup.pipeline_file import Pipeline
from simops_learning.reward_terms import failing_terms, format_reward_terms

REPORT = 'validation.json'
SUGGESTION = 'dr_suggestion.yaml'


def failing_cells(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The cells of a gate report (``validation.json``) that fail, worst first.

    A cell fails when its success is below the report's ``pass_min`` or when any of its
    episodes ended in a protective stop or was unsafe.
    """
    bar = report['thresholds']['pass_min']
    cells = [c for c in report['configs'] if c['success'] < bar or c['protective_stops']
             or c['unsafe_episodes']]
    return sorted(cells, key=lambda c: (c['success'], -c['unsafe_episodes']))


def analysis(report: dict[str, Any]) -> dict[str, Any]:
    """What failed in ``report``: the verdict, the failing cells on the grid's axes and how."""
    axes = list(report['grid'])
    return {'verdict': report['verdict'], 'mean_success': report['mean_success'],
            'min_success': report['min_success'], 'failures': report['failures'],
            'cells': [{**({'scenario': c['scenario']} if 'scenario' in c
                          else {axis: c[axis] for axis in axes}),
                       'success': c['success'], 'failures': c['failures']}
                      for c in failing_cells(report)]}


def analysis_markdown(found: dict[str, Any], round_: int) -> str:
    """``analysis.md`` of round ``round_``: the cells that failed and how."""
    modes = ', '.join(f'{mode.replace("_", " ")} {n}' for mode, n in found['failures'].items())
    lines = [f'# Round {round_}: what the gate before it said', '',
             f'Verdict {found["verdict"].upper()}: mean success {found["mean_success"]:.1%}, '
             f'min {found["min_success"]:.1%}. Failed episodes by how: {modes or "none"}.', '',
             '| cell | success | failed episodes |', '|---|---|---|']
    for cell in found['cells']:
        where = ' '.join(f'{k}={v}' if isinstance(v, str) else f'{k}={v:g}'
                         for k, v in cell.items() if k not in ('success', 'failures'))
        how = ', '.join(f'{m.replace("_", " ")} {n}' for m, n in cell['failures'].items())
        lines.append(f'| {where} | {cell["success"]:.0%} | {how or "-"} |')
    return '\n'.join(lines) + '\n'


def next_ranges(ranges: dict[str, Any], suggestion: dict[str, Any],
                change: tuple[str, ...]) -> dict[str, Any]:
    """The next round's training ranges: the gate's suggestion where ``change`` allows it."""
    return dict(suggestion['randomization']) if 'randomization' in change else dict(ranges)


def next_scenarios(found: dict[str, Any], trained: list[str], change: tuple[str, ...]
                   ) -> list[str]:
    """The failing scenarios of ``found`` (:func:`analysis`) the training does not play yet.

    None unless ``change`` lets the loop train through scenarios.
    """
    if 'scenarios' not in change:
        return []
    failing = [cell['scenario'] for cell in found['cells'] if 'scenario' in cell]
    return [name for name in dict.fromkeys(failing) if name not in trained]


def next_reward_terms(found: dict[str, Any], terms: dict[str, float],
                      change: tuple[str, ...]) -> dict[str, float]:
    """PPO's penalty terms for the next round: ``terms`` plus the modes ``found`` failed by.

    ``terms`` unchanged unless ``change`` lets the loop change the reward.
    """
    return failing_terms(found['failures'], terms) if 'reward' in change else dict(terms)


def improve(pipeline: Pipeline, folder: Path) -> dict[str, Any]:
    """Run the rounds in ``folder`` (the run folder); return ``improve/summary.json``'s data.

    Raises :class:`subprocess.CalledProcessError` when a round's training or gate fails.
    """
    rounds_dir = folder / IMPROVE
    shutil.rmtree(rounds_dir, ignore_errors=True)
    rounds_dir.mkdir(parents=True)
    policy, gate = f'{POLICY}/{stem(pipeline)}', GATE
    ranges = yaml.safe_load((folder / RANDOMIZATION).read_text())['randomization']
    report = json.loads((folder / gate / REPORT).read_text())
    rounds: list[dict[str, Any]] = []
    trained: list[str] = []   # the scenarios the rounds' training plays, once one failed
    terms: dict[str, float] = {}   # PPO's penalty terms, once a mode failed
    stopped = 'the gate passed' if report['verdict'] == 'pass' else ''
    for k in range(1, pipeline.max_rounds + 1):
        if stopped:
            break
        here = f'{IMPROVE}/round_{k}'
        (folder / here).mkdir()
        found = analysis(report)
        (folder / here / 'analysis.json').write_text(json.dumps(found, indent=2) + '\n')
        (folder / here / 'analysis.md').write_text(analysis_markdown(found, k))
        suggestion = yaml.safe_load((folder / gate / SUGGESTION).read_text())
        widened = next_ranges(ranges, suggestion, pipeline.change)
        added = next_scenarios(found, trained, pipeline.change)
        reward = next_reward_terms(found, terms, pipeline.change)
        if widened == ranges and not added and reward == terms:
            stopped = (f'round {k}: the training ranges already cover the failing cells'
                       + (' and the training plays the failing scenarios'
                          if 'scenarios' in pipeline.change else '')
                       + (' and PPO\'s reward pays for every failure mode'
                          if 'reward' in pipeline.change else '')
                       + '; nothing the loop may change would')
            break
        changed = {name: [ranges[name], value] for name, value in widened.items()
                   if ranges.get(name) != value}
        trained += added
        terms = reward
        print(f'improve: round {k} of {pipeline.max_rounds}: {len(found["cells"])} failing '
              'cells; training ranges ' + (', '.join(f'{n} {a} -> {b}' for n, (a, b)
                                                      in changed.items()) or 'as they were')
              + (f'; training scenarios {", ".join(trained)}' if trained else '')
              + (f'; reward terms {", ".join(format_reward_terms(terms))}' if terms else ''),
              flush=True)
        ranges = widened
        (folder / here / 'randomization.yaml').write_text(
            yaml.safe_dump({'randomization': ranges}, sort_keys=False))
        last, policy, gate = policy, f'{here}/policy/{stem(pipeline)}', f'{here}/gate'
        _run(train_command(pipeline, policy, f'{here}/randomization.yaml', f'{last}.pt',
                           tuple(trained), terms), folder)
        _run(gate_command(pipeline, f'{policy}.pt', gate), folder)
        report = json.loads((folder / gate / REPORT).read_text())
        rounds.append({'round': k, 'changed': changed, 'scenarios': list(trained),
                       'reward_terms': dict(terms),
                       'verdict': report['verdict'],
                       'mean_success': report['mean_success'],
                       'min_success': report['min_success']})
        if report['verdict'] == 'pass':
            stopped = f'round {k}: the gate passed'
    summary = {'verdict': report['verdict'], 'rounds': rounds,
               'stopped': stopped or f'after {pipeline.max_rounds} rounds',
               'policy': f'{policy}.pt'}
    _release(folder, policy, gate)
    (folder / rounds_dir / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
    return summary


def _run(line: str, folder: Path) -> None:
    print(f'improve: {line}', flush=True)
    subprocess.run(line, shell=True, cwd=folder, check=True)


def _release(folder: Path, policy: str, gate: str) -> None:
    """Copy the policy the loop ends with (STEM and its files) and its report to release/."""
    release = folder / RELEASE
    shutil.rmtree(release, ignore_errors=True)
    release.mkdir()
    for suffix in POLICY_SUFFIXES:   # a given policy may come without its export
        source = folder / f'{policy}{suffix}'
        if source.is_file():
            shutil.copy2(source, release / source.name)
    shutil.copy2(folder / gate / REPORT, release / REPORT)
