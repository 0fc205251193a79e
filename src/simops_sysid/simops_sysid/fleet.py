"""``fit-fleet``: one ``fit`` per robot of a fleet, on the shared executor.

``fit-fleet ROOT --out DIR [--workers 2] [--ray ADDRESS] [-- FIT OPTIONS]``: every folder
under ``ROOT`` that holds rosbag2 episodes (``metadata.yaml`` one level down) is one robot;
its bags are fitted together (``fit --bag ... --out DIR/<robot>.yaml --report
DIR/<robot>/``, one MuJoCo thread each), as tasks of :mod:`simops_core.executor`: local
worker processes, or a Ray cluster. Each fit's output goes to ``DIR/<robot>.log``; a table
of exit codes ends the run. Exit codes: :data:`EXIT_CODES`.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from simops_core.command_line import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_core.executor import ExecutorError, isolate_for_local_ray, make_executor, run_tasks

PROG = 'fit-fleet'
EXIT_CODES = {EXIT_OK: 'every fit succeeded', EXIT_FAILED: 'a fit or the workers failed',
              EXIT_USAGE: 'bad command line',
              EXIT_INTERRUPTED: 'interrupted (every worker stopped)'}


@dataclass(frozen=True)
class FleetFit:
    """One robot's fit: its name, bags, output folder and the extra ``fit`` options."""

    robot: str
    bags: tuple[Path, ...]
    out: Path
    options: tuple[str, ...]


def robots(root: Path) -> list[tuple[str, tuple[Path, ...]]]:
    """(robot, its bag folders) for every folder under ``root`` that holds bags."""
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        bags = tuple(sorted(b.parent for b in folder.glob('*/metadata.yaml')))
        if bags:
            found.append((folder.name, bags))
    return found


def fit_robot(job: FleetFit) -> tuple[str, int]:
    """Worker: ``fit`` on one robot's bags, its output in ``<out>/<robot>.log``; exit code."""
    from simops_sysid.fit_cli import main

    argv = [arg for bag in job.bags for arg in ('--bag', str(bag))]
    argv += ['--out', str(job.out / f'{job.robot}.yaml'), '--report',
             str(job.out / job.robot), '--threads', '1', *job.options]
    with (job.out / f'{job.robot}.log').open('w') as log, \
            contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = main(argv)
    return job.robot, code


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``fit-fleet --help``."""
    parser = CommandLineParser(
        PROG, 'Fit the simulator to each robot of a fleet: one fit per folder of bags; options '
              'after -- go to every fit.',
        exit_codes(EXIT_CODES))
    parser.add_argument('root', type=Path, help='a folder of robot folders of bags')
    parser.add_argument('--out', required=True, type=Path, help='where fits and logs go')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--ray', metavar='ADDRESS',
                        help='run on a Ray cluster: HOST:PORT, or "local" (127.0.0.1 only)')
    words = list(sys.argv[1:] if argv is None else argv)
    split = words.index('--') if '--' in words else len(words)
    args = parser.parse_args(words[:split])
    args.fit_options = words[split + 1:]   # after --: options passed to every fit
    if args.ray == 'local':
        try:
            isolate_for_local_ray([sys.argv[0], *words])
        except ExecutorError as exc:
            return fail(PROG, EXIT_USAGE, str(exc))
    if not args.root.is_dir():
        parser.error(f'{args.root} is not a folder')
    fleet = robots(args.root)
    if not fleet:
        parser.error(f'no folder under {args.root} holds a rosbag2 bag (ROOT/ROBOT/BAG/'
                     'metadata.yaml)')
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [FleetFit(name, bags, args.out, tuple(args.fit_options)) for name, bags in fleet]

    def progress(line: str) -> None:
        print(f'{PROG}: {line}', file=sys.stderr, flush=True)

    try:
        results = run_tasks(make_executor(args.ray, args.workers), fit_robot, jobs,
                            unit='fits', progress=progress)
    except ExecutorError as exc:
        return fail(PROG, EXIT_FAILED, str(exc))
    except KeyboardInterrupt:
        print(f'{PROG}: interrupted; every worker has been stopped', file=sys.stderr)
        return EXIT_INTERRUPTED
    for robot, code in results:
        print(f'{robot:<24} exit {code}  {args.out / (robot + ".yaml")}  log: '
              f'{args.out / (robot + ".log")}')
    return EXIT_OK if all(code == 0 for _, code in results) else EXIT_FAILED


def cli() -> None:
    """Console-script wrapper: exit with :func:`main`'s code."""
    sys.exit(main())
