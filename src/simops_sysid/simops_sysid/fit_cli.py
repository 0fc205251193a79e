"""``ros2 run simops_sysid fit``: fit the simulator's physics to recorded bags.

Two modes, chosen by ``--mode`` (``auto``: trajectory when the bags hold commands, else
torque):

- ``trajectory``: reads joint states and commands (:mod:`simops_sysid.recording`), fits by
  open-loop replay with mujoco.sysid (:mod:`simops_sysid.optimize`): controller gains,
  friction, sensor offsets, command delay;
- ``torque``: reads joint states with efforts only, fits friction and torque offsets to the
  rigid-body inverse dynamics (:mod:`simops_sysid.torque_run`).

Both write a SimParams YAML with provenance; ``--report`` adds a report directory
(:mod:`simops_sysid.fit_report` in trajectory mode, :mod:`simops_sysid.torque_report` in
torque mode). The robot is the one whose arm joints
the bag's joint states name, unless ``--robot`` says; the model is its shipped scene.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from mujoco import sysid

from simops_core.bag_reader import BagError, bag_sha256
from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_DATA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CommandLineParser,
    ConfigError,
    UsageError,
    exit_codes,
    fail,
    terminate_as_interrupt,
)
from simops_core.paths import ROBOT_SCENE, resolve_resource
from simops_core.robot_spec import RobotSpec, load_robot_spec
from simops_core.sim_params import (
    END_EFFECTORS,
    ActuatorModelRef,
    SimParams,
    SimParamsError,
    parse_sim_params,
    save_sim_params,
    sim_params_to_dict,
)
from simops_core.topics import TopicSpec, load_topics
from simops_sim.delay import delay_steps
from simops_sim.model_index import ModelError
from simops_sysid import (
    controller_models,
    evaluation,
    fit_parameters,
    optimize,
    precheck,
    recording_checks,
    residual,
    sysid_model,
)
from simops_sysid.actuator_fit import ActuatorFitError
from simops_sysid.fit_report import diagnose, write_report
from simops_sysid.fit_weights import WEIGHTS
from simops_sysid.lag import estimate_delay
from simops_sysid.recording import (
    DataError,
    Recording,
    SequenceData,
    command_topics,
    detect_robot,
    load_recording,
    load_states,
    split_sequences,
)
from simops_sysid.torque_fit import TorqueDataError
from simops_sysid.torque_report import HeldOutTraces, write_torque_report
from simops_sysid.torque_run import ACTUATOR_MODELS, LearnedSensor, run_torque

PROG = 'fit'
EXIT_FIT = 5          # the fit produced no usable result
EXIT_SAVED_ELSEWHERE = 6   # fitted, but --out or --report could not be written at the end
EXIT_CHECK = 7        # the check before the fit failed: the data cannot give the parameters
EXIT_CODES = {
    EXIT_OK: 'fitted; the SimParams file (and the report) are written (with --check-only: '
             'the check passed or warned)',
    EXIT_CONFIG: 'bad command line; the robot spec, model or topics file cannot be used; or an '
                 'output path\n     cannot be written (checked before any data is read)',
    EXIT_DATA: 'a bag cannot be used (not a bag, empty, missing topics, joint names that do '
               'not match,\n     NaN/Inf values, values outside the joint limits, '
               'non-monotonic stamps, too little data)',
    EXIT_FIT: 'the fit produced no usable result (non-finite, or outside the physical '
              'ranges of SimParams),\n     or the learned actuator model was refused (worse '
              'held out than the parametric one, or too little data)',
    EXIT_SAVED_ELSEWHERE: 'fitted, but writing --out or --report failed at the end; the '
                          'result was saved where the last line says',
    EXIT_CHECK: 'the check before the fit failed: a fitted joint barely moved, or a parameter '
                'does not change the replay\n     (--skip-check fits anyway)',
    EXIT_INTERRUPTED: 'interrupted (Ctrl-C); nothing written',
}
MAX_THREADS = 256
MODES = ('auto', 'trajectory', 'torque')
REWEIGHTS = 4               # at most this many fits again with the errors' own weights
REWEIGHT_TOLERANCE = 0.1    # until no signal's weight changes by more than this fraction
DEFAULT_KINDS = controller_models.DEFAULT_KINDS['joint_trajectory']
HISTORY = 0.06        # s of command history kept before each sequence (> the delay bound)
DELAY_GRID = 0.005    # s between two delays of the profile the delay starts from


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    parser = CommandLineParser(
        PROG, 'Fit the simulator\'s physics (SimParams) to recorded bags: by open-loop replay '
              'of the recorded commands (mujoco.sysid), or from the joint torques alone.',
        exit_codes(EXIT_CODES))
    parser.add_argument('--bag', action='append', required=True, type=Path, metavar='DIR',
                        help='rosbag2 directory to fit (repeat for several)')
    parser.add_argument('--holdout', action='append', default=[], type=Path, metavar='DIR',
                        help='rosbag2 directory only evaluated, never fitted (repeatable)')
    parser.add_argument('--mode', choices=MODES, default='auto',
                        help='trajectory (replay the commands), torque (efforts only) or auto '
                             '(trajectory when the bags hold commands; default)')
    parser.add_argument('--robot', default='',
                        help='robot spec name or YAML (default: the spec whose arm joints the '
                             'bag names)')
    parser.add_argument('--model', default='',
                        help='MJCF the simulator runs (default models/<robot>/scene.xml)')
    parser.add_argument('--actuator-model', choices=ACTUATOR_MODELS, default='none',
                        help='torque mode: also learn what the torque sensors read beyond the '
                             'rigid body and friction, as a causal linear filter per joint '
                             '(linear) or that filter plus a small network per joint (mlp), '
                             'scored on held-out raw efforts; none (default)')
    parser.add_argument('--end-effector', choices=END_EFFECTORS, default=END_EFFECTORS[0],
                        help='what the recorded arm carries on its flange: the Franka Hand '
                             'of the model (default) or none; a tool is --params payload')
    parser.add_argument('--controller', choices=('auto', *controller_models.CONTROLLERS),
                        default='auto',
                        help='the controller that tracked the commands: joint_trajectory '
                             '(franka_ros2\'s effort JTC), joint_impedance (the arm\'s own loop '
                             'behind a position interface), or auto (by the command topic: a '
                             'forward controller\'s <name>/commands is the position '
                             'interface; default)')
    parser.add_argument('--params', default=None,
                        help=f'comma-separated kinds from {",".join(fit_parameters.KINDS)} '
                             f'(default {DEFAULT_KINDS}; with joint_impedance, gain_scale for '
                             'kp,kv)')
    parser.add_argument('--joints', default='',
                        help='comma-separated arm joints to fit (default: all)')
    parser.add_argument('--out', default='config/sim_params.yaml', type=Path,
                        help='SimParams YAML to write (default config/sim_params.yaml)')
    parser.add_argument('--report', type=Path, metavar='DIR',
                        help='write plots and summary.md (torque mode: torque.md) into DIR')
    parser.add_argument('--sequence-length', type=float, default=5.0, metavar='S',
                        help='split recordings into sequences of about S s (5-20; default 5)')
    parser.add_argument('--rate', type=float, default=100.0, metavar='HZ',
                        help='measurement rate the residual uses (default 100 Hz)')
    parser.add_argument('--grouped-iters', type=int, default=8, metavar='N',
                        help='LM iterations with the Jacobian finite-differenced per '
                             'parameter kind (default 8)')
    parser.add_argument('--full-iters', type=int, default=1, metavar='N',
                        help='then LM iterations with it finite-differenced per parameter '
                             '(>= 1, default 1)')
    parser.add_argument('--effort-scale', type=float, default=residual.Scales.effort,
                        metavar='NM', help='N*m of effort error weighed like 1 mrad of '
                        f'position (default {residual.Scales.effort:g})')
    parser.add_argument('--weights', choices=WEIGHTS, default=WEIGHTS[0],
                        help='recording: after a fit, weigh velocity and effort errors by '
                             'their typical size (robust to transients) in proportion to the '
                             'position error\'s (never more than the fixed scales do) and fit '
                             'again (default); fixed: the fixed scales, one fit')
    parser.add_argument('--threads', type=int, default=os.cpu_count() or 1,
                        help=f'rollout threads, 1-{MAX_THREADS} (default: all cores)')
    checking = parser.add_mutually_exclusive_group()
    checking.add_argument('--check-only', action='store_true',
                          help='run the check before the fit (excitation per joint, '
                               'identifiability, correlated pairs) and stop')
    checking.add_argument('--skip-check', action='store_true',
                          help='fit even when the check fails')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fit; return one of the exit codes listed in ``--help``."""
    terminate_as_interrupt()
    parser = build_parser()
    options = parser.parse_args(argv)
    logging.getLogger('absl').setLevel(logging.ERROR)  # mujoco.sysid's per-sequence notes
    try:
        return _run(options)
    except UsageError as exc:
        return _fail(EXIT_CONFIG, str(exc))
    except (DataError, BagError) as exc:
        return _fail(EXIT_DATA, str(exc))
    except (ConfigError, FileNotFoundError) as exc:
        return _fail(EXIT_CONFIG, str(exc))
    except KeyboardInterrupt:   # Ctrl-C: nothing was written (outputs come at the end)
        return _fail(EXIT_INTERRUPTED, 'interrupted; nothing written')


def _fail(code: int, message: str) -> int:
    return fail(PROG, code, message)


def _check_outputs(out: Path, report: Path | None) -> None:
    """Raise :class:`UsageError` unless ``out`` (a file) and ``report`` (a folder) can be written.

    Checked before any data is read, so a long fit is never lost to a typo in a path.
    """
    if out.is_dir():
        raise UsageError(f'--out {out} is a directory; give a file path such as '
                         f'{out / "sim_params.yaml"}')
    _check_creatable('--out', out.parent)
    if out.exists() and not os.access(out, os.W_OK):
        raise UsageError(f'--out {out} exists and is not writable; choose another path')
    if report is not None:
        if report.exists() and not report.is_dir():
            raise UsageError(f'--report {report} exists and is not a directory; give a folder')
        _check_creatable('--report', report if report.is_dir() else report.parent)


def _check_creatable(option: str, folder: Path) -> None:
    """Raise :class:`UsageError` unless files can be created in ``folder`` or its parents."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f'{option}: {existing} is a file, not a directory; choose another path')
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f'{option}: cannot write into {existing} (permission denied); choose '
                         'another path')


def _save(params: SimParams, out: Path) -> Path | None:
    """Write ``params`` to ``out``; if that fails, to a temporary file. Return the fallback.

    Returns None when ``out`` was written. If even the fallback cannot be written, the YAML
    goes to stdout, and the path returned is ``-``.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_sim_params(params, out)
        return None
    except OSError as exc:
        print(f'{PROG}: cannot write {out}: {exc.strerror or exc}', file=sys.stderr)
    try:
        handle, name = tempfile.mkstemp(prefix='simops_fit_', suffix='.yaml')
        os.close(handle)
        save_sim_params(params, name)
        return Path(name)
    except OSError:
        import yaml

        print(yaml.safe_dump(sim_params_to_dict(params), sort_keys=False))
        return Path('-')


@dataclass(frozen=True)
class Plan:
    """What a run fits, checked before any data is read but the first bag's joint names.

    ``kinds``: the parameter kinds; ``joint_names`` and ``joints``: the fitted arm joints by
    name and spec index; ``model``: the MJCF; ``hashes``: each bag's sha256; ``mode``:
    ``trajectory`` or ``torque``.
    """

    robot: RobotSpec
    topics: dict[str, TopicSpec]
    kinds: tuple[str, ...]
    joint_names: list[str]
    joints: list[int]
    model: Path
    hashes: dict[Path, str]
    mode: str


@dataclass(frozen=True)
class TrajectoryFit:
    """A trajectory fit's outcome: the SimParams to write, with provenance, and its report.

    The report shows the optimiser's result, the parameter layout, the fitted joints, the
    nominal and fitted replay errors on the training and held-out sequences; ``dt`` s is
    the physics step.
    """

    params: SimParams
    result: optimize.FitResult
    layout: sysid.ParameterDict
    joint_names: list[str]
    delay_profile: dict[str, list[float]] | None
    checks: list[str]
    train: tuple[evaluation.Evaluation, evaluation.Evaluation]
    held: tuple[evaluation.Evaluation, evaluation.Evaluation] | None
    dt: float


class RefusedError(Exception):
    """The run stops with ``code`` (an exit code) and one line, ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _run(options: argparse.Namespace) -> int:
    plan = plan_fit(options)
    try:
        if plan.mode == 'torque':
            params, learned, traces = fit_torque(plan, options)
            moved = False
            if learned is not None:
                ref, moved = export_learned(options.out, plan, learned)
                params = replace(params, actuator_model=ref)
            rate = 1.0 / traces.period
            learned_record = params.provenance.get('actuator_model', {})
            code = save_outputs(options, params, '', lambda folder: write_torque_report(
                folder, plan.robot.arm_joints, params.provenance['torque_rms_nm'], traces,
                rate, learned_record.get('holdout_beyond_training_range')))
            if moved and code == EXIT_OK:
                return _fail(EXIT_SAVED_ELSEWHERE, 'the learned model is in '
                             f'{Path(params.actuator_model.path).parent}')
            return code
        fitted = fit_trajectory(plan, options)
    except RefusedError as exc:
        return _fail(exc.code, str(exc))
    if fitted is None:
        return EXIT_OK
    result = fitted.result
    return save_outputs(
        options, fitted.params, f' ({result.iterations} iterations, {result.wall:.1f} s)',
        lambda folder: write_report(folder, result, fitted.layout, fitted.joint_names,
                                    fitted.train, fitted.held, fitted.dt,
                                    fitted.delay_profile, fitted.checks))


def plan_fit(options: argparse.Namespace) -> Plan:
    """Check the options and the outputs, find the robot and the mode; see :class:`Plan`.

    Raises :class:`UsageError` for an option out of range or an output that cannot be
    written, :class:`ConfigError` for a robot spec, topics file or parameter kind.
    """
    if not 5.0 <= options.sequence_length <= 20.0:
        raise UsageError(f'--sequence-length {options.sequence_length} s is outside 5-20 s')
    if not 10.0 <= options.rate <= 1000.0:
        raise UsageError(f'--rate {options.rate} Hz is outside 10-1000 Hz')
    if not options.effort_scale > 0:
        raise UsageError(f'--effort-scale must be > 0 N*m, got {options.effort_scale}')
    if options.grouped_iters < 0 or options.full_iters < 1:
        raise UsageError('--grouped-iters must be >= 0 and --full-iters >= 1')
    if not 1 <= options.threads <= MAX_THREADS:
        raise UsageError(f'--threads must be in 1-{MAX_THREADS}, got {options.threads}')
    _check_outputs(options.out, options.report)
    try:
        kinds = tuple(fit_parameters.parse_kinds(options.params or DEFAULT_KINDS))
    except fit_parameters.ParameterError as exc:
        raise UsageError(str(exc)) from None
    topics = load_topics()
    robot = (load_robot_spec(options.robot) if options.robot
             else detect_robot(options.bag[0], topics))
    options.robot = robot.name
    joint_names = [j.strip() for j in options.joints.split(',') if j.strip()] or list(
        robot.arm_joints)
    unknown = [j for j in joint_names if j not in robot.arm_joints]
    if unknown:
        raise UsageError(f'--joints names {unknown[0]!r}, not an arm joint of {robot.name} '
                         f'({", ".join(robot.arm_joints)})')
    model = resolve_resource(options.model or ROBOT_SCENE.format(robot=robot.name))
    hashes = {bag: bag_sha256(bag) for bag in [*options.bag, *options.holdout]}
    mode = options.mode
    if mode == 'auto':
        commanded = command_topics(options.bag[0], topics)
        mode = 'trajectory' if commanded else 'torque'
        print(f'mode {mode}: {options.bag[0]} has '
              + ('commands' if mode == 'trajectory' else 'no commands, so the efforts alone'),
              flush=True)
    if options.actuator_model != 'none' and mode != 'torque':
        raise UsageError('--actuator-model is fitted in torque mode: add --mode torque')
    return Plan(robot, topics, kinds, joint_names,
                [robot.arm_joints.index(j) for j in joint_names], model, hashes, mode)


def export_learned(out: Path, plan: Plan, learned: LearnedSensor
                   ) -> tuple[ActuatorModelRef, bool]:
    """Write the learned model beside ``out`` (``STEM.actuator.pt`` and its card).

    If that fails, into a temporary folder (the reference then absolute); returns the
    reference and whether it went there.
    """
    # torch only now: imported, it slows the trajectory fit's threaded rollouts
    from simops_sysid.actuator_export import export_actuator_model

    def export(stem: Path) -> ActuatorModelRef:
        ref = export_actuator_model(learned.model, stem, plan.robot.arm_joints,
                                    learned.training)
        print(f'wrote {stem.parent / ref.path} and its card (sha256 {ref.sha256[:12]})',
              flush=True)
        return ref

    try:
        return export(out.with_suffix('')), False
    except OSError as exc:
        print(f'{PROG}: cannot write the learned model beside {out}: {exc.strerror or exc}',
              file=sys.stderr)
    folder = Path(tempfile.mkdtemp(prefix='simops_fit_'))
    ref = export(folder / out.stem)
    return replace(ref, path=str(folder / ref.path)), True


def fit_torque(plan: Plan, options: argparse.Namespace
               ) -> tuple[SimParams, LearnedSensor | None, HeldOutTraces]:
    """Torque mode: friction and offsets from the efforts, and any learned model asked for.

    Returns the SimParams (with provenance), the learned model (None unless
    ``--actuator-model`` asks for one) and the held-out efforts for the report.
    """
    loaded = [load_states(bag, plan.robot, plan.topics) for bag in options.bag]
    warning = recording_checks.flange_load(plan.model, plan.robot, loaded, options.end_effector)
    if warning:
        print(f'check: warning: {warning}', flush=True)
    try:
        return run_torque(options.bag, options.holdout, plan.robot, plan.model, plan.topics,
                          plan.hashes, options.end_effector, 'payload' in plan.kinds,
                          options.actuator_model)
    except TorqueDataError as exc:
        raise DataError(str(exc)) from None
    except ActuatorFitError as exc:
        raise RefusedError(EXIT_FIT, str(exc)) from None


def fit_trajectory(plan: Plan, options: argparse.Namespace) -> TrajectoryFit | None:
    """Trajectory mode: sequences, the delay's start, the check, the fit and its evaluation.

    Returns None with ``--check-only``; raises :class:`RefusedError` when the check fails, the
    fit diverges or its result is outside SimParams' ranges.
    """
    try:
        fit_model = sysid_model.load_fit_model(plan.model, plan.robot)
    except ValueError as exc:  # MuJoCo's MJCF parser
        raise ModelError(' '.join(str(exc).split())) from None
    dt = float(fit_model.model.opt.timestep)
    history = int(np.ceil(HISTORY / dt))

    def sequences(bags: Sequence[Path]) -> tuple[list[SequenceData], list[Recording]]:
        out, recordings = [], []
        for bag in bags:
            recording = load_recording(bag, plan.robot, plan.topics)
            recordings.append(recording)
            kept, lagging, untimed = split_sequences(recording, dt, options.sequence_length,
                                                     options.rate, history, plan.joints)
            out += kept
            notes = [*([f'{lagging} left out: joint states arrived late'] if lagging else []),
                     *([f'{untimed:.1f} s not compared: after {len(recording.untimed)} '
                        'commands taken while the arm ran late'] if untimed else [])]
            print(f'{bag}: {recording.joint_states_topic} + {recording.commands.source}: '
                  f'{len(kept)} sequences, {sum(s.duration for s in kept):.1f} s'
                  + (f' ({"; ".join(notes)})' if notes else ''), flush=True)
        return out, recordings

    train, recordings = sequences(options.bag)
    held, _ = sequences(options.holdout)
    controller, why = ((options.controller, '--controller') if options.controller != 'auto'
                       else controller_models.choose([r.commands for r in recordings],
                                                     plan.topics['joint_commands'].name))
    print(f'controller {controller}: {why}', flush=True)
    base = controller_models.nominal_gains(controller, replace(
        sysid_model.nominal(fit_model), end_effector=options.end_effector), plan.robot)
    kinds = plan.kinds if options.params else fit_parameters.parse_kinds(
        controller_models.DEFAULT_KINDS[controller])
    params = fit_parameters.build_parameters(base, list(kinds), plan.joint_names,
                                             fit_model.index.mass_bodies)
    scales = floors = residual.Scales(effort=options.effort_scale)

    def problem_of(chosen: Sequence[SequenceData]) -> residual.Problem:
        return residual.make_problem(fit_model, chosen, plan.joints, base, scales,
                                     options.threads, controller == 'joint_impedance')

    problem = problem_of(train)
    seconds = sum(s.duration for s in train)
    span = np.cumsum([s.duration for s in train])
    sample = problem_of(train[:max(1, int(np.searchsorted(span, precheck.JACOBIAN_SPAN,
                                                          side='right')))])
    profile, starts = (_start_delay(sample, params, base, recordings, plan.robot, dt)
                       if fit_parameters.DELAY in params else (None, [None]))
    started = time.perf_counter()
    found = precheck.check(sample, train, params, plan.joint_names)
    report = found.lines()
    report[0] += f' ({time.perf_counter() - started:.1f} s)'
    effort_jtc = controller == 'joint_trajectory'
    checks = [line for line in (
        recording_checks.flange_load(plan.model, plan.robot, recordings, options.end_effector),
        recording_checks.command_rate(recordings) if effort_jtc else None,
        recording_checks.tracking(recordings, min(profile['position_rms_mrad']) * 1e-3,
                                  fit_parameters.MAX_DELAY)
        if effort_jtc and profile is not None else None) if line]
    report += [f'  warning: {line}' for line in checks]
    print('\n'.join(report), flush=True)
    if found.verdict == 'fail' and not options.skip_check:
        raise RefusedError(EXIT_CHECK, f'check failed: {found.reason()}; --skip-check fits anyway')
    if options.check_only:
        return None
    print(f'fitting {params.size} parameters ({",".join(kinds)}) to {len(train)} '
          f'sequences, {seconds:.1f} s', flush=True)

    def progress(iteration: int, objective: float, elapsed: float) -> None:
        print(f'iteration {iteration:3d}  objective {objective:.6g}  {elapsed:7.1f} s',
              flush=True)

    runs = []
    for start in starts:   # one LM run per valley of the delay's profile, the best kept
        trial = params.copy()
        if start is not None:
            trial[fit_parameters.DELAY].update_from_vector(np.array([start]))
            if len(starts) > 1:
                print(f'command delay from {start * 1e3:g} ms:', flush=True)
        runs.append((optimize.fit(problem, trial, base,
                                  (options.grouped_iters, options.full_iters), progress), trial))
    result, params = min(runs, key=lambda run: float(np.nan_to_num(run[0].objective[-1],
                                                                    nan=np.inf)))
    for _ in range(REWEIGHTS if options.weights == 'recording' else 0):
        if not np.all(np.isfinite(result.params.as_vector())):
            break
        before = scales
        scales = evaluation.recording_scales(evaluation.evaluate(problem, params,
                                                                 result.values), floors)
        change = max(abs(np.log(getattr(scales, signal) / getattr(before, signal)))
                     for signal in ('q', 'qd', 'effort'))
        if change < np.log(1.0 + REWEIGHT_TOLERANCE):
            break
        print(f'weights from the replay errors: 1 mrad of position weighs like '
              f'{scales.qd * 1e3:.3g} mrad/s of velocity and {scales.effort:.3g} N*m of effort '
              f'(fixed: {floors.qd * 1e3:.3g} and {floors.effort:.3g}); fitting again',
              flush=True)
        problem = problem_of(train)
        first = result
        result = optimize.fit(problem, result.params.copy(), base,
                              (options.grouped_iters, options.full_iters), progress)
        result = replace(result, iterations=first.iterations + result.iterations,
                         wall=first.wall + result.wall)
    if not np.all(np.isfinite(result.params.as_vector())) or not np.isfinite(
            result.objective[-1]):
        raise RefusedError(EXIT_FIT, 'the fit diverged (non-finite parameters or objective); '
                                'check the bags and --params')
    step = (_best_whole_step(problem, params, result.values, dt)
            if fit_parameters.DELAY in result.params else None)
    if step is not None and step != delay_steps(result.values.command_delay or 0.0, dt):
        print(f'command delay: {step * dt * 1e3:g} ms replays the training data better than '
              f'the fitted {result.values.command_delay * 1e3:.2f} ms; fitting again from it',
              flush=True)
        trial = result.params.copy()
        trial[fit_parameters.DELAY].update_from_vector(np.array([step * dt]))
        again = optimize.fit(problem, trial, base, (options.grouped_iters, options.full_iters),
                             progress)
        result = replace(again, iterations=result.iterations + again.iterations,
                         wall=result.wall + again.wall)
    fitted = fit_parameters.whole_step_delay(result.values, dt)
    if fit_parameters.DELAY in result.params:
        print(f'command delay: fitted {result.values.command_delay * 1e3:.2f} ms, written as '
              f'{fitted.command_delay * 1e3:g} ms (whole {dt * 1e3:g} ms physics steps)')

    def errors(of: residual.Problem) -> tuple[evaluation.Evaluation, evaluation.Evaluation]:
        return evaluation.evaluate(of, params, base), evaluation.evaluate(of, params, fitted)

    train_eval = errors(problem)
    held_eval = errors(problem_of(held)) if held else None
    out = replace(fitted, controller=controller).with_provenance(
        **_provenance(options, plan.model, result, train_eval, held_eval, seconds, plan.hashes,
                      profile), parameters=','.join(kinds))
    try:
        parse_sim_params(sim_params_to_dict(out), source='the fitted parameters')
    except SimParamsError as exc:
        raise RefusedError(EXIT_FIT, f'{exc}; the data do not constrain this fit: check the bags '
                                'and --params') from None
    at_bounds = diagnose(result).at_bounds
    if at_bounds:
        print(f'at a bound (the data push past the range; widen it or check the model): '
              f'{", ".join(at_bounds)}')
    for label, pair in (('training', train_eval), ('held-out', held_eval)):
        if pair is not None:
            print(f'{label} position RMS: nominal {pair[0].rms_q_total * 1e3:.3f} mrad, '
                  f'fitted {pair[1].rms_q_total * 1e3:.3f} mrad')
    return TrajectoryFit(out, result, params, plan.joint_names, profile, checks, train_eval,
                         held_eval, dt)


def save_outputs(options: argparse.Namespace, params: SimParams, note: str,
                 report: Callable[[Path], Path]) -> int:
    """Write ``params`` to ``--out`` and, with ``--report``, the report (``report(folder)``).

    ``note`` follows the written file's name. An output that cannot be written at the end
    loses nothing: the parameters go to a temporary file (or stdout), named on the last
    line, with :data:`EXIT_SAVED_ELSEWHERE`.
    """
    fallback = _save(params, options.out)
    if fallback is None:
        print(f'wrote {options.out}{note}')
    if options.report is not None:
        try:
            print(f'wrote {report(options.report)}')
        except OSError as exc:
            print(f'{PROG}: cannot write the report into {options.report}: '
                  f'{exc.strerror or exc}', file=sys.stderr)
            fallback = fallback or options.out
    if fallback is not None:
        return _fail(EXIT_SAVED_ELSEWHERE, f'the fitted parameters are in {fallback}'
                     + (' (printed above)' if str(fallback) == '-' else ''))
    return EXIT_OK


def _start_delay(sample: residual.Problem, params: sysid.ParameterDict, base: SimParams,
                 recordings: Sequence[Recording], robot: RobotSpec, dt: float
                 ) -> tuple[dict[str, list[float]], list[float]]:
    """The delay's profile (ms, mrad) and the delays (s) the fit starts from, lowest first.

    The profile (:func:`evaluation.delay_profile`, on the check's sample of the training data)
    runs over 0 to the bound every :data:`DELAY_GRID` s, plus the controller law's guess from
    the efforts (:func:`estimate_delay`) where they carry a trace of the commands, else
    every physics step ``dt`` around its valleys (:func:`evaluation.refined_delays`); the
    starts are the valleys of the whole (:func:`evaluation.delay_starts`). ``params`` starts
    at the lowest.
    """
    guesses = [g for r in recordings if np.any(r.effort[:, :7])
               and (g := estimate_delay(r, dt, fit_parameters.MAX_DELAY, robot.gain_p,
                                        robot.gain_d)) is not None]
    delays = np.arange(0.0, fit_parameters.MAX_DELAY + 1e-9, DELAY_GRID)
    if guesses:
        delays = np.unique(np.append(delays, float(np.median(guesses))))
    values = fit_parameters.to_sim_params(params, base)
    coarse = evaluation.delay_profile(sample, params, values, delays)
    relative = ' '.join(f'{d * 1e3:g}:{c / coarse.min():.2f}'
                        for d, c in zip(delays, coarse, strict=True))
    # without the efforts' guess (which places the delay to a step where they carry a trace
    # of the commands), the profile is refined to a step around its valleys
    fine = (np.zeros(0) if guesses else
            evaluation.refined_delays(delays, coarse, dt, fit_parameters.MAX_DELAY))
    costs = np.concatenate((coarse, evaluation.delay_profile(sample, params, values, fine)))
    order = np.argsort(np.concatenate((delays, fine)))
    delays, costs = np.concatenate((delays, fine))[order], costs[order]
    starts = evaluation.delay_starts(delays, costs)   # a valley's fine points: its lowest
    starts = [d for i, d in enumerate(starts)
              if all(abs(d - e) >= DELAY_GRID - 1e-12 for e in starts[:i])]
    best = starts[0]
    params[fit_parameters.DELAY].update_from_vector(np.array([best]))
    print(f'command delay starts from {best * 1e3:.1f} ms, the lowest of its profile '
          f'(ms:position error relative to the coarse lowest, {relative}'
          + (f'; then every {dt * 1e3:g} ms around its valleys' if fine.size else '') + ')'
          + ('' if guesses else '; the efforts carry no trace of the commands')
          + ('' if len(starts) == 1 else '; the fit starts from each valley: '
             + ', '.join(f'{d * 1e3:g} ms' for d in starts)), flush=True)
    return ({'delay_ms': [round(float(d) * 1e3, 3) for d in delays],
             'position_rms_mrad': [round(float(c) * 1e3, 4) for c in costs]}, starts)


def _best_whole_step(problem: residual.Problem, params: sysid.ParameterDict,
                     values: SimParams, dt: float) -> int:
    """The whole physics step of delay, within two of ``values``', that replays best.

    The replay blends the two whole-step shifts around a fractional delay, so the objective
    is smooth within a step but kinked at each whole one, where Levenberg-Marquardt can stop
    a step from the minimum: a 1 kHz stream that jitters by a millisecond makes the kinks
    sharp (on the stand-in LM stayed at its 4 ms start against the true 3 ms). The node
    runs whole steps, so they are compared on the training objective, the other parameters
    as fitted.
    """
    fitted = (values.command_delay or 0.0) / dt
    steps = range(max(0, int(np.floor(fitted)) - 2),
                  min(int(np.ceil(fitted)) + 2, round(fit_parameters.MAX_DELAY / dt)) + 1)
    costs = [evaluation.evaluate(problem, params, replace(values, command_delay=k * dt)).cost
             for k in steps]
    return steps[int(np.argmin(costs))]


def _provenance(options: argparse.Namespace, model: Path, result: optimize.FitResult,
                train: tuple[evaluation.Evaluation, evaluation.Evaluation],
                held: tuple[evaluation.Evaluation, evaluation.Evaluation] | None,
                seconds: float, hashes: dict[Path, str],
                profile: dict[str, list[float]] | None) -> dict[str, object]:
    def residuals(pair: tuple[evaluation.Evaluation, evaluation.Evaluation]) -> dict[str, object]:
        before, after = pair
        return {'position_rms_mrad': {'nominal': round(before.rms_q_total * 1e3, 4),
                                      'fitted': round(after.rms_q_total * 1e3, 4)},
                'effort_rms_nm': {
                    'nominal': round(float(np.sqrt(np.mean(before.rms_effort ** 2))), 4),
                    'fitted': round(float(np.sqrt(np.mean(after.rms_effort ** 2))), 4)}}

    entries: dict[str, object] = {
        'fitted_by': 'simops_sysid fit (mujoco.sysid)',
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'model': str(model), 'robot': options.robot,
        'bags': [{'path': str(b), 'sha256': hashes[b]} for b in options.bag],
        'data_s': round(seconds, 2), 'iterations': result.iterations,
        'fit_wall_s': round(result.wall, 1), 'residual_training': residuals(train)}
    if held is not None:
        entries['holdout'] = [{'path': str(b), 'sha256': hashes[b]} for b in options.holdout]
        entries['residual_holdout'] = residuals(held)
    if profile is not None:
        entries['delay_profile'] = profile
    return entries


def cli() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == '__main__':
    cli()
