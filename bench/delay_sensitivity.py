"""How much does training with action delay help pick and place on the gate's delay cells?

Two pick-and-place policies, both ``simops-train --task pick_place`` at the task's budget
(10 DAgger rounds of 80 episodes, 5000 updates each) and the task's ranges of
``config/randomization.yaml``, nominal physics:

- **naive**: trained with ``delay: 0`` (what the improve stage's bench starts from);
- **tuned**: fine-tuned from the naive one (``--init-policy``) with ``delay: --delay``
  (the improve stage's round 1 on a failing ``delay=3`` cell).

With ``--in-flight`` the naive policy is an in-flight one (``simops-train --in-flight``: it
reads its last actions, and the expert labels each state for where the commands still in the
command delay take the arm); its fine-tune stays one.

Each is gated by ``simops-validate`` on the delay axis (``--delays``, control periods of
50 ms) over ``--episodes`` episodes per cell, once per goal seed of ``--seeds``. Per policy
and delay it prints the success and the protective stops summed over the seeds (a gate
fails a cell at any stop); the last line reads ``stops over delays 0-D: naive N, tuned M``
for the trained range (0 to ``--delay``).

    .venv/bin/python bench/delay_sensitivity.py [--naive PT] [--tuned PT] [--dir DIR]

``--naive``/``--tuned`` reuse trained policies (each about 6 minutes to train on two
cores); the gates take about 15 s per seed and policy.
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
BUDGET = ('--rounds', '10', '--episodes', '80', '--updates', '5000', '--workers', '2',
          '--seed', '0')


def ranges_file(folder: Path, delay: int) -> Path:
    """A ``--randomization`` file of ``delay`` (control periods), written in ``folder``.

    simops-train takes every other range from the task's in ``config/randomization.yaml``.
    """
    path = folder / f'ranges_delay{delay}.yaml'
    path.write_text(yaml.safe_dump({'randomization': {'delay': delay}}))
    return path


def train(folder: Path, name: str, delay: int, init: Path | None, options: tuple[str, ...] = ()
          ) -> Path:
    """``simops-train`` into ``folder/name/fr3_pick_place.pt`` with ``options``; its path."""
    out = folder / name / 'fr3_pick_place'
    subprocess.run([str(REPO / '.venv/bin/simops-train'), '--task', 'pick_place',
                    '--robot', 'fr3', '--out', str(out), '--eval-episodes', '20',
                    '--randomization', str(ranges_file(folder, delay)), *BUDGET,
                    *(('--init-policy', str(init)) if init else options)], cwd=REPO,
                   check=True)
    return out.with_suffix('.pt')


def gate(policy: Path, out: Path, delays: list[int], episodes: int, seed: int
         ) -> list[dict]:
    """The cells of ``simops-validate`` of ``policy`` on the delay axis."""
    subprocess.run([str(REPO / '.venv/bin/simops-validate'), '--policy', str(policy),
                    '--robot', 'fr3', '--grid', 'delay=' + ','.join(map(str, delays)),
                    '--episodes', str(episodes), '--seed', str(seed), '--workers', '2',
                    '--out', str(out), '--verdict-exit-zero'], cwd=REPO, check=True,
                   capture_output=True)
    return json.loads((out / 'validation.json').read_text())['configs']


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--naive', type=Path, help='a policy trained without delay')
    parser.add_argument('--tuned', type=Path, help='that policy fine-tuned with --delay')
    parser.add_argument('--delay', type=int, default=3, help='the fine-tune\'s delay range')
    parser.add_argument('--delays', type=int, nargs='+', default=[0, 2, 3, 4, 5])
    parser.add_argument('--episodes', type=int, default=30, help='gate episodes per cell')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1])
    parser.add_argument('--in-flight', action='store_true',
                        help='train an in-flight naive policy (and so fine-tune one)')
    parser.add_argument('--dir', type=Path, help='work folder (default: a temporary one)')
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix='delay_sensitivity_'))
    folder.mkdir(parents=True, exist_ok=True)
    naive = args.naive or train(folder, 'naive', 0, None,
                                ('--in-flight',) if args.in_flight else ())
    tuned = args.tuned or train(folder, 'tuned', args.delay, naive)
    stops = {}
    print(f'{"policy":6} {"delay":>5} {"success":>8} {"stops":>6}  ({len(args.seeds)} seeds x '
          f'{args.episodes} episodes)')
    for name, policy in (('naive', naive), ('tuned', tuned)):
        cells = []
        for seed in args.seeds:
            print(f'gating {name} (goal seed {seed}) ...', file=sys.stderr, flush=True)
            cells.append(gate(policy, folder / f'gate_{name}_{seed}', args.delays,
                              args.episodes, seed))
        stops[name] = 0
        for i, delay in enumerate(args.delays):
            success = sum(run[i]['success'] for run in cells) / len(cells)
            stopped = sum(run[i]['protective_stops'] for run in cells)
            stops[name] += stopped if delay <= args.delay else 0
            print(f'{name:6} {delay:5d} {success:8.1%} {stopped:6d}')
    print(f'stops over delays 0-{args.delay}: naive {stops["naive"]}, tuned {stops["tuned"]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
