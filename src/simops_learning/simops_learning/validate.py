"""``simops-validate``: the validation gate a policy passes before it goes near hardware.

Runs the policy (loaded and checked against its card exactly as the policy node loads it)
in the env over a grid of physics conditions, and with ``--scenarios`` over adversarial
scenarios at the calibrated physics (``config/scenarios.yaml``: a push, a moved goal, lost
joint states or object poses, an e-stop and recovery), each cell for ``--episodes`` episodes
with the same goals, in parallel worker processes. Writes ``validation.json``, ``validation.md`` and
``validation_heatmap.png``; on a marginal or failing verdict also ``dr_suggestion.yaml``, a
randomisation range update that ``simops-train --randomization`` reads.

``--ray ADDRESS`` runs the same tasks on a Ray cluster (``local``: one started on this
machine, loopback only); the verdicts are the same as with local workers. Exit codes:
:data:`EXIT_CODES`.
"""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandLineParser,
    UsageError,
    exit_codes,
    terminate_as_interrupt,
)
from simops_core.executor import (
    Executor,
    ExecutorError,
    LocalExecutor,
    Tally,
    isolate_for_local_ray,
    make_executor,
)
from simops_core.policy_card import CardError, file_sha256, load_policy_card
from simops_core.promotion import PromotionError, file_entry, record_path
from simops_core.robot_spec import SpecError, load_robot_spec
from simops_core.sim_params import SimParamsError, load_sim_params, sensor_model_of
from simops_core.tasks import TASK_NAMES, resolve_task
from simops_learning.promote import promote
from simops_learning.rollout import BATCH, TASK_EPISODES
from simops_learning.validation_report import Outcome, Report, Thresholds, write_reports
from simops_sim.randomization import Conditions, DomainRandomization, parse_randomization
from simops_sim.scenarios import SCENARIOS_FILE, ScenarioError, load_scenarios, scenario
from simops_sim.sim_profiles import (
    SIM_PROFILES_FILE,
    TRAINING,
    VALIDATION,
    SimProfileError,
    sim_profile,
)

EXIT_MARGINAL, EXIT_FAIL = 3, 4
VERDICT_EXIT = {'pass': EXIT_OK, 'marginal': EXIT_MARGINAL, 'fail': EXIT_FAIL}
EXIT_CODES = {EXIT_OK: 'PASS', EXIT_FAILED: 'runtime error',
              EXIT_CONFIG: 'bad command line, policy, card or sim params',
              EXIT_MARGINAL: 'MARGINAL (dr_suggestion.yaml written)',
              EXIT_FAIL: 'FAIL (dr_suggestion.yaml written)',
              EXIT_INTERRUPTED: 'interrupted (every worker stopped)'}
# Link masses up to 1.5x: at 2x, holding the flange at the workspace's far low corner takes
# about 100 N*m on joint 2, beyond its 87 N*m, and the arm falls onto the table whatever the
# policy does (a protective stop in every configuration: a condition no arm can pass).
DEFAULT_GRID = ('friction=0.3,0.8,1.5', 'mass=0.5,1,1.5', 'delay=0,1,2,3')
# Pick-and-place: the object's friction and mass (the arm's own masses are identified) and
# the command delay, 5 x 5 x 4 configurations.
PICK_GRID = ('friction=0.3,0.5,0.8,1.0,1.5', 'object_mass=0.5,0.75,1,1.5,2', 'delay=0,1,2,3')
GRIDS = {'reach': DEFAULT_GRID, 'pick_place': PICK_GRID}   # each task's default grid
AXES = tuple(f.name for f in fields(Conditions))


def parse_grid(items: list[str]) -> dict[str, list[float]]:
    """``['friction=0.3,0.8', 'delay=0,1']`` → ``{'friction': [0.3, 0.8], 'delay': [0, 1]}``."""
    grid: dict[str, list[float]] = {}
    for item in items:
        name, sep, values = item.partition('=')
        if not sep or name not in AXES:
            raise UsageError(f'grid axis {item!r} must be NAME=V1,V2,... with NAME one of '
                             f'{", ".join(AXES)}')
        try:
            numbers = [float(v) for v in values.split(',') if v.strip()]
        except ValueError:
            raise UsageError(f'grid axis {name!r} has a non-numeric value in {values!r}') \
                from None
        if not numbers or any(not np.isfinite(v) or v < 0 for v in numbers):
            raise UsageError(f'grid axis {name!r} needs finite values >= 0, got {values!r}')
        if name == 'delay' and any(v != int(v) for v in numbers):
            raise UsageError(f'delay is in whole control periods, got {values!r}')
        if name in grid:
            raise UsageError(f'grid axis {name!r} is given twice')
        grid[name] = numbers
    return grid


def grid_conditions(grid: dict[str, list[float]]) -> list[Conditions]:
    """Every combination of the grid's values, the last axis varying fastest."""
    out = []
    for values in itertools.product(*grid.values()):
        point: dict[str, Any] = dict(zip(grid, values, strict=True))
        if 'delay' in point:
            point['delay'] = int(point['delay'])
        out.append(Conditions(**point))
    return out


@dataclass(frozen=True)
class Task:
    """Episodes ``episodes`` of grid configuration ``config`` (index into the grid)."""

    config: int
    conditions: Conditions
    episodes: range
    policy: Path
    card: Path
    sim_params: Path | None
    seed: int
    robot: str
    task: str = 'reach'
    profile: str = VALIDATION
    sensor_model: Path | None = None
    sensors: bool = False
    scenario: str = ''   # a scenario of config/scenarios.yaml ('' none)


_WORKER: dict[tuple[Any, ...], tuple[list[Any], Any]] = {}   # per worker process: envs, model


def run_task(task: Task) -> tuple[int, list[Outcome]]:
    """Worker: run the task's episodes, its envs stepped together; (config, results).

    The policy is loaded as the node loads it and infers one observation at a time. A worker
    keeps its envs and model across tasks of the same policy and physics; each episode sets
    its configuration's conditions at reset.
    """
    from dataclasses import astuple

    from simops_learning import env_class
    from simops_learning.rollout import run_episodes_batched
    from simops_policy.model import load_policy

    key = (task.task, task.card, task.sim_params, task.robot, task.policy, task.profile,
           task.sensor_model, task.sensors)
    if key not in _WORKER:
        _WORKER.clear()
        kind = env_class(task.task)
        envs = [kind(card_path=task.card, sim_params_file=task.sim_params, robot=task.robot,
                     profile=task.profile, sensor_model=task.sensor_model,
                     sensors=task.sensors)
                for _ in range(BATCH)]
        _WORKER[key] = envs, load_policy(task.policy, envs[0].card)
    envs, model = _WORKER[key]
    results = run_episodes_batched(envs[:len(task.episodes)], model.infer, task.episodes,
                                   task.seed, task.conditions,
                                   scenario=scenario(task.scenario) if task.scenario else None)
    return task.config, [astuple(r) for r in results]


def validate(policy: Path, card: Path, sim_params: Path | None, grid: dict[str, list[float]],
             episodes: int, workers: int, seed: int, robot: str = 'fr3',
             progress: bool = True, task: str = 'reach',
             executor: Executor | None = None, profile: str = VALIDATION,
             sensor_model: Path | None = None, sensors: bool = False,
             scenarios: tuple[str, ...] = ()) -> Report:
    """Run the grid of ``task`` (:mod:`simops_core.tasks`); return the report, unwritten.

    ``profile``: the simulator the episodes run in (:mod:`simops_sim.sim_profiles`);
    ``sensor_model``: a SimParams file naming the learned sensor model its arm reports
    efforts through (None: the parametric efforts); ``sensors``: the envs read through the
    profile's sensor errors (:mod:`simops_sim.perception`); ``scenarios``: names of
    ``config/scenarios.yaml``, each a cell more at the calibrated physics (no factors).

    Each configuration's episodes run in chunks of up to 60, one task each, on ``executor``
    (default: ``workers`` local processes); every configuration gets every episode exactly
    once, whatever worker died and was retried on the way.
    """
    cells = [(c, '') for c in grid_conditions(grid)] + [(Conditions(), s) for s in scenarios]
    configs = [c for c, _ in cells]
    chunk = max(1, min(episodes, TASK_EPISODES))
    tasks = [Task(i, c, range(start, min(start + chunk, episodes)), policy, card, sim_params,
                  seed, robot, task, profile, sensor_model, sensors, name)
             for i, (c, name) in enumerate(cells) for start in range(0, episodes, chunk)]
    left = [sum(t.config == i for t in tasks) for i in range(len(configs))]
    tally = Tally(len(configs))
    started = time.monotonic()

    def on_result(_: int, result: tuple[int, list[Outcome]]) -> None:
        config, part = result
        left[config] -= 1
        if left[config] == 0:
            tally.done += 1
        tally.units += len(part)
        if progress:
            print(f'\rvalidating ({profile} sim): '
                  f'{tally.line("episodes").replace("tasks", "configurations")}',
                  end='', file=sys.stderr, flush=True)

    parts = (executor or LocalExecutor(workers)).map(run_task, tasks, on_result)
    if progress:
        print(file=sys.stderr)
    results: list[list[Outcome]] = [[] for _ in configs]
    for config, part in parts:
        results[config] += part
    report = Report.build(policy, file_sha256(policy), sim_params, grid, configs, results,
                          episodes, seed, time.monotonic() - started,
                          tuple(load_scenarios()[name] for name in scenarios))
    noise = sim_profile(profile).sensors if sensors else None
    return replace(report, profile=profile, sensor_model=(
        None if sensor_model is None else {**file_entry(sensor_model),
                                           'model_sha256': sensor_model_of(sensor_model).sha256}),
        sensors=None if noise is None else noise.as_dict())


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-validate --help``."""
    terminate_as_interrupt()
    parser = CommandLineParser(
        'simops-validate',
        'Validate a policy over a grid of physics conditions.',
        exit_codes(EXIT_CODES))
    parser.add_argument('--policy', required=True, help='TorchScript .pt or .pt2 policy')
    parser.add_argument('--card', help='policy card (default: policy path with .yaml)')
    parser.add_argument('--sim-params', help='SimParams YAML (calibrated physics)')
    parser.add_argument('--sensor-model', metavar='SIMPARAMS',
                        help='a SimParams YAML naming a learned sensor model (fit --mode torque '
                             '--actuator-model): the validation sim\'s arm reports its efforts '
                             'through it; the calibration stays --sim-params')
    parser.add_argument('--task', choices=TASK_NAMES,
                        help='the task (and env) for a card that names none (default reach); '
                             'a card\'s own task is refused if it differs')
    parser.add_argument('--grid', nargs='+',
                        help=f'NAME=V1,V2,... axes from {", ".join(AXES)} (default reach: '
                             f'{" ".join(DEFAULT_GRID)}; pick_place: {" ".join(PICK_GRID)})')
    parser.add_argument('--scenarios', nargs='+', metavar='NAME', default=[],
                        help='adversarial scenarios of ' + SCENARIOS_FILE + ', each a cell '
                             'more at the calibrated physics: '
                             + ', '.join(load_scenarios()))
    parser.add_argument('--episodes', type=int, default=30, help='episodes per configuration')
    parser.add_argument('--sim-profile', default=VALIDATION,
                        help=f'the simulator that judges: a profile of {SIM_PROFILES_FILE} '
                             f'(default: {VALIDATION}, built for fidelity)')
    parser.add_argument('--sensors', action='store_true',
                        help='read the joints and the object through the profile\'s sensor '
                             'errors (noise, the object pose\'s latency and dropouts; '
                             f'{SIM_PROFILES_FILE}); default: the exact state')
    parser.add_argument('--sim-gap', action='store_true',
                        help=f'also run the grid in the {TRAINING} sim and report the '
                             'sim-to-sim gap per cell (the verdict stays the judging sim\'s)')
    parser.add_argument('--workers', type=int, default=2,
                        help='local worker processes (or CPUs of --ray local)')
    parser.add_argument('--ray', metavar='ADDRESS',
                        help='run the grid on a Ray cluster: HOST:PORT of a running one, or '
                             '"local" to start one on this machine (127.0.0.1 only)')
    parser.add_argument('--seed', type=int, default=0, help='goal seed')
    parser.add_argument('--robot', default='fr3', help='robot spec name or YAML')
    parser.add_argument('--out', help='report directory (default: the policy\'s directory)')
    defaults = Thresholds()
    parser.add_argument('--pass-mean', type=float, default=defaults.pass_mean)
    parser.add_argument('--pass-min', type=float, default=defaults.pass_min)
    parser.add_argument('--marginal-mean', type=float, default=defaults.marginal_mean)
    parser.add_argument('--verdict-exit-zero', action='store_true',
                        help='exit 0 whatever the verdict (it is in validation.json): a '
                             'pipeline stage that ran is done')
    parser.add_argument('--promote', action='store_true',
                        help='on PASS, append the promotion record beside the policy '
                             '(simops-promote), which a real arm requires')
    args = parser.parse_args(argv)
    if args.ray == 'local':
        try:
            isolate_for_local_ray([sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
        except ExecutorError as exc:
            print(f'simops-validate: error: {exc}', file=sys.stderr)
            return EXIT_USAGE
    try:
        policy = Path(args.policy)
        if not policy.is_file():
            raise UsageError(f'policy {policy} does not exist')
        card = Path(args.card) if args.card else policy.with_suffix('.yaml')
        if args.episodes < 1 or args.workers < 1:
            raise UsageError('--episodes and --workers must be >= 1')
        thresholds = Thresholds(args.pass_mean, args.pass_min, args.marginal_mean)
        sim_params = Path(args.sim_params) if args.sim_params else None
        if sim_profile(args.sim_profile).sensors is None and args.sensors:
            raise UsageError(f'--sensors: the {args.sim_profile} profile names no sensors '
                             f'({SIM_PROFILES_FILE})')
        if sim_params is not None:
            load_sim_params(sim_params)
        sensor = Path(args.sensor_model) if args.sensor_model else None
        if sensor is not None:
            sensor_model_of(sensor)
        task, trained = _check_policy(policy, card, args.robot, args.task)
        grid = parse_grid(args.grid or list(GRIDS[task]))
        scenarios = tuple(dict.fromkeys(args.scenarios))
        for name in scenarios:
            scenario(name, task)
    except (UsageError, SimParamsError, SimProfileError, CardError, SpecError,
            ScenarioError, ValueError) as exc:
        print(f'simops-validate: error: {exc}', file=sys.stderr)
        return EXIT_CONFIG
    try:
        executor = make_executor(args.ray, args.workers)
        report = validate(policy, card, sim_params, grid, args.episodes, args.workers,
                          args.seed, args.robot, task=task, executor=executor,
                          profile=args.sim_profile, sensor_model=sensor,
                          sensors=args.sensors, scenarios=scenarios)
        if args.sim_gap:
            report = report.with_training(validate(
                policy, card, sim_params, grid, args.episodes, args.workers, args.seed,
                args.robot, task=task, executor=executor, profile=TRAINING,
                scenarios=scenarios))
        report = report.judge(thresholds)
        out = Path(args.out) if args.out else policy.parent
        paths = write_reports(report, out, trained)
    except ExecutorError as exc:
        print(f'simops-validate: error: {exc}', file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print('simops-validate: interrupted; every worker has been stopped', file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # report any failure in one line with a distinct exit code
        print(f'simops-validate: error: {type(exc).__name__}: {exc}', file=sys.stderr)
        return EXIT_FAILED
    print(report.summary())
    print('wrote ' + ', '.join(str(p) for p in paths))
    if args.promote and report.verdict == 'pass':
        try:
            record = promote(out / 'validation.json', policy, card, sim_params)
        except (UsageError, PromotionError) as exc:
            print(f'simops-validate: error: {exc}', file=sys.stderr)
            return EXIT_CONFIG
        print(f'promoted: record {record.entry["sha256"][:12]} in {record_path(policy)}')
    return EXIT_OK if args.verdict_exit_zero else VERDICT_EXIT[report.verdict]


def _check_policy(policy: Path, card: Path, robot: str, task: str | None
                  ) -> tuple[str, DomainRandomization | None]:
    """Load the card and the model once up front, so a bad pair fails before the grid.

    Returns the task (the card's; ``task``, the ``--task`` option, must not contradict it)
    and the randomisation the card says the policy was trained with, if it says.
    """
    from simops_policy.model import PolicyModelError, load_policy

    spec = load_robot_spec(robot)
    loaded = load_policy_card(card, spec.joint_names, spec.arm_joints)
    if loaded.images:
        raise UsageError(f'{card} takes camera images; the gate\'s envs render none yet')
    try:
        load_policy(policy, loaded)
    except PolicyModelError as exc:
        raise UsageError(str(exc)) from None
    table = loaded.training.get('randomization')
    return (resolve_task(task, loaded.task, card).name,
            parse_randomization(table, f'{card}: training') if table is not None else None)


if __name__ == '__main__':
    sys.exit(main())
