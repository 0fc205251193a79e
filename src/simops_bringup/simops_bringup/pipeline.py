"""``simops-pipeline``: a task's loop from its pipeline file, each stage cached by DVC.

    simops-pipeline run pipelines/fr3_reach.yaml [--dir runs/fr3_reach]
    simops-pipeline status pipelines/fr3_reach.yaml [--dir runs/fr3_reach]

``run`` writes the stages of the pipeline file (:mod:`simops_bringup.pipeline_file`) as a
``dvc.yaml`` over the existing commands in the run folder and runs ``dvc repro`` there:

1. ``calibrate``: ``fit`` on the file's bags into ``calibration.yaml`` (with bags only);
   with ``calibration.actuator_model``, also ``fit --mode torque --actuator-model`` into
   ``sensor.yaml`` and its learned model, which the gate's validation sim reports its
   efforts through (``simops-validate --sensor-model``);
2. ``train``: ``simops-train`` in that physics (or the file's SimParams, or nominal) into
   ``policy/<robot>_<task>.pt`` and its card, cloning the file's ``datasets`` if it names
   any (their bags exported first by ``simops-dataset export`` into ``episodes/``, the
   ``export`` stage); with the file's ``policy``, a copy of that trained policy instead;
3. ``gate``: ``simops-validate`` against the same physics into ``gate/`` (its verdict is
   data: the stage is done whatever it says);
4. ``improve`` (with ``feedback.max_rounds``): after a FAIL or MARGINAL, bounded rounds of
   failure analysis, training ranges widened to the failing cells, training and gating
   (:mod:`simops_bringup.improve`, run as ``simops-pipeline improve``) into ``improve/``;
   the policy the loop ends with and its report go to ``release/``;
5. ``promote``: ``simops-promote``, which seals a PASS of the last gate into the policy's
   promotion record (``<robot>_<task>.promotion.jsonl`` beside it, binding this pipeline
   file) and refuses anything else.

DVC (`dvc.org <https://dvc.org>`_: ``dvc.yaml`` stages, ``dvc repro``, ``dvc status``)
hashes every stage's commands, dependencies (the bags, the physics, the policy) and
parameters (the file's sections, copied to ``pipeline.yaml`` in the folder): a rerun with
nothing changed runs nothing, a changed bag re-runs ``fit`` and everything after it, and a
changed dataset re-runs training and everything after it.
Each stage prints as it runs. ``status`` says which stages are stale and why. Ctrl-C ends
the running stage and everything it started, and exits 130.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from simops_bringup.arguments import robot_names
from simops_bringup.improve import improve
from simops_bringup.pipeline_commands import (
    CALIBRATION,
    EPISODES,
    GATE,
    IMPROVE,
    PARAMS,
    POLICY,
    RANDOMIZATION,
    RELEASE,
    SENSOR,
    adopt_command,
    command,
    export_command,
    gate_command,
    given_policy_files,
    inputs,
    policy_files,
    quoted,
    stem,
    tool_path,
    train_command,
    training_data,
    write_if_changed,
)
from simops_bringup.pipeline_file import Pipeline, PipelineError, load_pipeline
from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_core.paths import resolve_resource
from simops_sim.scenarios import SCENARIOS_FILE
from simops_sim.sim_profiles import SIM_PROFILES_FILE

PROG = 'simops-pipeline'
EXIT_MARGINAL, EXIT_FAIL = 3, 4   # simops-validate's verdict codes: nothing was promoted
EXIT_CODES = {EXIT_OK: 'run: every stage is done and the policy promoted (or promote: false '
                       'and the gate passed); status: nothing is stale',
              EXIT_FAILED: 'a stage failed (DVC names it; its output is above); status: '
                           'something is stale',
              EXIT_CONFIG: 'bad command line or pipeline file (one line), or DVC is missing',
              EXIT_MARGINAL: 'the gate said MARGINAL: nothing promoted',
              EXIT_FAIL: 'the gate said FAIL: nothing promoted',
              EXIT_INTERRUPTED: 'interrupted (Ctrl-C): the running stage was stopped'}
# DVC reports nothing to anyone: no telemetry from a lab machine.
DVC_ENV = {'DVC_NO_ANALYTICS': '1'}
GRACE = 10.0   # s a stopped stage has to end before SIGKILL


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run or report the pipeline."""
    parser = CommandLineParser(PROG, 'Run a task\'s loop (calibrate, train, gate, improve, '
                               'promote) from its pipeline file, each stage cached by DVC.',
                               exit_codes(EXIT_CODES))
    parser.add_argument('action', choices=('run', 'status', 'improve'),
                        help='improve: the improve stage itself, as DVC runs it')
    parser.add_argument('pipeline', help='the pipeline file (pipelines/<robot>_<task>.yaml)')
    parser.add_argument('--dir', help='the run folder (default runs/<pipeline name>)')
    args = parser.parse_args(argv)
    try:
        pipeline = load_pipeline(args.pipeline, robot_names())
    except PipelineError as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    folder = Path(args.dir or Path('runs') / pipeline.name).resolve()
    if args.action == 'improve':
        try:
            summary = improve(pipeline, folder)
        except subprocess.CalledProcessError as exc:
            return fail(PROG, EXIT_FAILED, f'improve: a round\'s command failed (exit '
                                           f'{exc.returncode}); its output is above')
        except (OSError, LookupError, KeyError) as exc:
            return fail(PROG, EXIT_FAILED, f'improve: cannot read the gate\'s report or '
                                           f'ranges in {folder}: {exc}')
        print(f'improve: {summary["stopped"]}; verdict {summary["verdict"].upper()}',
              flush=True)
        return EXIT_OK
    dvc = tool_path('dvc')
    if dvc is None:
        return fail(PROG, EXIT_CONFIG, 'dvc is not installed; make build installs it '
                                       '(requirements-python.txt)')
    try:
        prepare(pipeline, folder, dvc)
    except (OSError, subprocess.CalledProcessError, LookupError) as exc:
        return fail(PROG, EXIT_CONFIG, f'cannot prepare the run folder {folder}: {exc}')
    if args.action == 'status':
        return _status(dvc, folder)
    return _run(dvc, folder, pipeline)


def stages(pipeline: Pipeline) -> dict[str, Any]:
    """The ``dvc.yaml`` mapping of ``pipeline``'s stages (paths relative to the run folder)."""
    policy = policy_files(pipeline)
    out: dict[str, Any] = {}
    given = inputs(pipeline)
    physics, sensor = list(given.physics), list(given.sensor)
    if pipeline.bags:
        recordings = (*(f'--bag {quoted(b)}' for b in pipeline.bags),
                      *(f'--holdout {quoted(h)}' for h in pipeline.holdout))
        options = ' '.join(f'--{key.replace("_", "-")} {value}'
                           for key, value in pipeline.fit.items())
        commands = [command('fit', *recordings,
                            f'--out {CALIBRATION} --report calibration_report', options)]
        if sensor:
            commands.append(command('fit', *recordings, '--mode torque --actuator-model '
                                    f'{pipeline.actuator_model} --out {SENSOR} '
                                    '--report sensor_report'))
        out['calibrate'] = {
            'cmd': commands[0] if len(commands) == 1 else commands,
            'deps': [str(b) for b in (*pipeline.bags, *pipeline.holdout)],
            'params': [{PARAMS: ['robot', 'calibration']}],
            'outs': [CALIBRATION, 'calibration_report',
                     *([*sensor, 'sensor_report'] if sensor else [])]}
    datasets = pipeline.datasets
    if datasets is not None and datasets.bags:
        out['export'] = {'cmd': export_command(pipeline),
                         'deps': [*map(str, datasets.bags), str(datasets.card)],
                         'outs': [EPISODES]}
    profiles = str(resolve_resource(SIM_PROFILES_FILE))   # the simulators' options
    scenarios = [str(resolve_resource(SCENARIOS_FILE))] if pipeline.scenarios else []
    if pipeline.policy is None:
        out['train'] = {
            'cmd': train_command(pipeline, f'{POLICY}/{stem(pipeline)}'),
            'deps': [*physics, RANDOMIZATION, profiles, *training_data(pipeline)],
            'params': [{PARAMS: ['robot', 'task', 'sims', 'train', 'datasets']}],
            'outs': policy}
    else:   # a trained policy: the stage takes a copy, which the gate and promotion bind
        out['train'] = {'cmd': adopt_command(pipeline), 'deps': given_policy_files(pipeline),
                        'outs': policy}
    out['gate'] = {
        'cmd': gate_command(pipeline, policy[0], GATE),
        'deps': [*policy, *physics, *sensor, profiles, *scenarios],
        'params': [{PARAMS: ['sims', 'gate']}],
        'outs': [f'{GATE}/validation.md', f'{GATE}/validation_heatmap.png'],
        'metrics': [{f'{GATE}/validation.json': {'cache': False}}]}
    final, report = policy, f'{GATE}/validation.json'
    if pipeline.max_rounds:
        final, report = policy_files(pipeline, RELEASE), f'{RELEASE}/validation.json'
        out['improve'] = {
            'cmd': command(PROG, f'improve {quoted(pipeline.path)} --dir .'),
            'deps': [*policy, f'{GATE}/validation.json', RANDOMIZATION, *physics, *sensor,
                     profiles, *scenarios, *training_data(pipeline)],
            'params': [{PARAMS: ['sims', 'train', 'datasets', 'gate', 'feedback']}],
            'outs': [IMPROVE, *final],
            'metrics': [{report: {'cache': False}}]}
    if pipeline.promote:
        out['promote'] = {
            'cmd': command('simops-promote', f'--policy {final[0]} --report {report}'
                           + (f' --sim-params {quoted(physics[0])}' if physics else '')
                           + f' --pipeline {PARAMS}'),
            'deps': [*final, report, *physics],
            'outs': [f'{final[0].removesuffix(".pt")}.promotion.jsonl']}
    for stage in out.values():   # DVC wants no empty lists
        for key in [k for k, v in stage.items() if v == []]:
            del stage[key]
    return {'stages': out}


def _datasets_params(pipeline: Pipeline) -> dict[str, Any]:
    """The file's ``datasets`` section as DVC's params see it (no paths: none)."""
    datasets = pipeline.datasets
    if datasets is None:
        return {'paths': []}
    return {'paths': [str(p) for p in datasets.paths], 'bags': [str(b) for b in datasets.bags],
            'expert_rounds': datasets.expert_rounds,
            'share': datasets.share, 'twist_at_cap': datasets.twist_at_cap,
            'init_policy': str(datasets.init_policy or '')}


def prepare(pipeline: Pipeline, folder: Path, dvc: str) -> None:
    """The run folder: a DVC repository (no Git) holding ``dvc.yaml`` and ``pipeline.yaml``."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / '.dvc').is_dir():
        for command in (['init', '--no-scm', '-q'], ['config', 'core.analytics', 'false']):
            subprocess.run([dvc, *command], cwd=folder, check=True, env=_env(),
                           capture_output=True)
    params = {'robot': pipeline.robot, 'task': pipeline.task,
              'calibration': {'bags': [str(b) for b in pipeline.bags],
                              'holdout': [str(h) for h in pipeline.holdout],
                              'sim_params': str(pipeline.sim_params or ''),
                              'actuator_model': pipeline.actuator_model,
                              'fit': dict(pipeline.fit)},
              'sims': {'training': pipeline.training_sim,
                       'validation': pipeline.validation_sim, 'gap': pipeline.sim_gap,
                       'sensors': pipeline.sensors},
              'policy': str(pipeline.policy or ''),
              'train': dict(pipeline.train),
              'gate': {'grid': list(pipeline.grid), 'episodes': pipeline.episodes,
                       'seed': pipeline.gate_seed, 'workers': pipeline.gate_workers,
                       'thresholds': dict(pipeline.thresholds),
                       **({'scenarios': list(pipeline.scenarios)} if pipeline.scenarios
                          else {})},
              'randomization': pipeline.randomization,
              'datasets': _datasets_params(pipeline),
              'feedback': {'max_rounds': pipeline.max_rounds, 'change': list(pipeline.change)},
              'promote': pipeline.promote}
    write_if_changed(folder / PARAMS, yaml.safe_dump(params, sort_keys=False))
    write_if_changed(folder / RANDOMIZATION, yaml.safe_dump(
        {'randomization': pipeline.randomization}, sort_keys=False))
    write_if_changed(folder / 'dvc.yaml', yaml.safe_dump(stages(pipeline), sort_keys=False))


def _run(dvc: str, folder: Path, pipeline: Pipeline) -> int:
    print(f'{PROG}: {pipeline.name} in {folder}', flush=True)
    # DVC and the stages run in a process group of their own: Ctrl-C (to the terminal's
    # foreground group) reaches this process alone, which ends them all with SIGTERM (a tool
    # taking SIGINT while it still imports, or in a worker, would print a traceback), and
    # DVC's own stage lock is freed with them. They stay in the caller's session, so they
    # run at its priority: a session of their own would be an autogroup of its own, at
    # full priority whatever `nice simops-pipeline run` asked, on kernels with autogroups.
    proc = subprocess.Popen([dvc, 'repro'], cwd=folder, env=_env(), stdin=subprocess.DEVNULL,
                            process_group=0)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        print(f'{PROG}: interrupted; the running stage was stopped', file=sys.stderr)
        return EXIT_INTERRUPTED
    last = 'improve' if pipeline.max_rounds else 'gate'
    report = folder / (RELEASE if pipeline.max_rounds else GATE) / 'validation.json'
    # the last gate's report counts once its stage is done (a failed train leaves an old one)
    summary = (json.loads(report.read_text()) if report.is_file()
               and (code == 0 or _done(dvc, folder, last)) else None)
    if summary is not None and summary['verdict'] != 'pass':
        print(f'{PROG}: the gate said {summary["verdict"].upper()} (mean success '
              f'{summary["mean_success"]:.1%}, min {summary["min_success"]:.1%}, '
              f'{summary["protective_stops"]} stops): nothing promoted; see {report.parent}',
              file=sys.stderr)
        return EXIT_MARGINAL if summary['verdict'] == 'marginal' else EXIT_FAIL
    if code:
        print(f'{PROG}: a stage failed (above); rerun to retry from it', file=sys.stderr)
        return EXIT_FAILED
    print(f'{PROG}: done; the gate said PASS'
          + (f', promoted: {folder / (RELEASE if pipeline.max_rounds else POLICY)}'
             if pipeline.promote else ''), flush=True)
    return EXIT_OK


def _stop(proc: subprocess.Popen) -> None:
    """End DVC's process group, and return once no process of it is left.

    SIGTERM to every process in it (the tools end as on Ctrl-C), then SIGKILL to what is
    left after :data:`GRACE` s.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        end = time.monotonic() + GRACE
        while time.monotonic() < end:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.1)
            try:
                os.killpg(proc.pid, 0)   # anyone left in the group?
            except ProcessLookupError:
                return


def _done(dvc: str, folder: Path, stage: str) -> bool:
    """Whether DVC has ``stage`` done and up to date."""
    result = subprocess.run([dvc, 'status', stage], cwd=folder, env=_env(),
                            capture_output=True, text=True)
    return result.returncode == 0 and 'up to date' in result.stdout


def _status(dvc: str, folder: Path) -> int:
    result = subprocess.run([dvc, 'status'], cwd=folder, env=_env(), capture_output=True,
                            text=True)
    print(result.stdout.rstrip() or result.stderr.rstrip(), flush=True)
    if result.returncode:
        return EXIT_FAILED
    return EXIT_OK if 'up to date' in result.stdout else EXIT_FAILED


def _env() -> dict[str, str]:
    return {**os.environ, **DVC_ENV}



if __name__ == '__main__':
    sys.exit(main())
