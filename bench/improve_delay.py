"""The improve stage on the gate's delay cells: pick and place trained without action delay.

Writes a pipeline file for ``fr3/pick_place`` whose training ranges leave out action delay
(``randomization: {delay: 0}``, the rest the task's), whose gate is the delay axis of the
shipped grid (0-3 control periods, ``--episodes`` each, the shipped thresholds) and whose
feedback allows ``--rounds`` rounds, then runs ``simops-pipeline run`` on it in ``--dir``
(nominal physics: no calibration). It prints the first gate's cells and each round's
verdict; the last line reads ``verdict X after N rounds``.

    .venv/bin/python bench/improve_delay.py [--dir DIR] [--episodes 30] [--rounds 3]

About 11 minutes on two cores (the first training and each round's fine-tune about 5).
Its verdicts are within the gate's noise: see ``bench/delay_sensitivity.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dir', type=Path, help='run folder (default: a temporary one)')
    parser.add_argument('--episodes', type=int, default=30, help='gate episodes per cell')
    parser.add_argument('--rounds', type=int, default=3, help='feedback.max_rounds')
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix='improve_delay_'))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / 'fr3_pick_place.yaml'
    path.write_text(yaml.safe_dump({
        'version': 1, 'robot': 'fr3', 'task': 'pick_place',
        'train': {'seed': 0, 'workers': 2},
        'randomization': {'delay': 0},
        'gate': {'grid': {'delay': [0, 1, 2, 3]}, 'episodes': args.episodes, 'seed': 0,
                 'thresholds': {'pass_mean': 0.85, 'pass_min': 0.6, 'marginal_mean': 0.7},
                 'workers': 2},
        'feedback': {'max_rounds': args.rounds, 'change': ['randomization']},
        'promote': True}, sort_keys=False))
    run = folder / 'run'
    result = subprocess.run([str(REPO / '.venv/bin/simops-pipeline'), 'run', str(path),
                             '--dir', str(run)], cwd=REPO)
    first = json.loads((run / 'gate/validation.json').read_text())
    print(f'first gate: {first["verdict"].upper()}, ' + ', '.join(
        f'delay {c["delay"]}: {c["success"]:.0%} ({c["protective_stops"]} stops, '
        f'{c["unsafe_episodes"]} unsafe)' for c in first['configs']))
    summary_file = run / 'improve/summary.json'
    if not summary_file.is_file():
        print(f'simops-pipeline exited {result.returncode} before the improve stage ended')
        return 1
    summary = json.loads(summary_file.read_text())
    for entry in summary['rounds']:
        changed = ', '.join(f'{name} {a} -> {b}' for name, (a, b) in entry['changed'].items())
        print(f'round {entry["round"]}: {changed}; {entry["verdict"].upper()} (mean '
              f'{entry["mean_success"]:.1%}, min {entry["min_success"]:.1%})')
    print(f'{summary["stopped"]}; pipeline exit {result.returncode}')
    print(f'verdict {summary["verdict"].upper()} after {len(summary["rounds"])} rounds')
    return 0


if __name__ == '__main__':
    sys.exit(main())
