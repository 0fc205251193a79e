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
   ``policy/<robot>_<task>.pt`` and its card;
3. ``gate``: ``simops-validate`` against the same physics into ``gate/`` (its verdict is
   data: the stage is done whatever it says);
4. ``promote``: ``simops-promote``, which seals a PASS into the policy's promotion record
   (``policy/<robot>_<task>.promotion.jsonl``, binding this pipeline file) and refuses
   anything else.

DVC (`dvc.org <https://dvc.org>`_: ``dvc.yaml`` stages, ``dvc repro``, ``dvc status``)
hashes every stage's commands, dependencies (the bags, the physics, the policy) and
parameters (the file's sections, copied to ``pipeline.yaml`` in the folder): a rerun with
nothing changed runs nothing, and a changed bag re-runs ``fit`` and everything after it.
Each stage prints as it runs. ``status`` says which stages are stale and why. Ctrl-C ends
the running stage and everything it started, and exits 130.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from simops_bringup.arguments import robot_names
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
PARAMS = 'pipeline.yaml'    # the pipeline file's sections, DVC's params file in the run folder
CALIBRATION = 'calibration.yaml'
SENSOR = 'sensor.yaml'   # the torque-mode fit naming the learned sensor model
GATE = 'gate'
# DVC reports nothing to anyone: no telemetry from a lab machine.
DVC_ENV = {'DVC_NO_ANALYTICS': '1'}
GRACE = 10.0   # s a stopped stage has to end before SIGKILL


def main(argv: list[str] | None = None) -> int:
    """Parse the command line; run or report the pipeline."""
    parser = CommandLineParser(PROG, 'Run a task\'s loop (calibrate, train, gate, promote) '
                               'from its pipeline file, each stage cached by DVC.',
                               exit_codes(EXIT_CODES))
    parser.add_argument('action', choices=('run', 'status'))
    parser.add_argument('pipeline', help='the pipeline file (pipelines/<robot>_<task>.yaml)')
    parser.add_argument('--dir', help='the run folder (default runs/<pipeline name>)')
    args = parser.parse_args(argv)
    try:
        pipeline = load_pipeline(args.pipeline, robot_names())
    except PipelineError as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    dvc = _tool('dvc')
    if dvc is None:
        return fail(PROG, EXIT_CONFIG, 'dvc is not installed; make build installs it '
                                       '(requirements-python.txt)')
    folder = Path(args.dir or Path('runs') / pipeline.name).resolve()
    try:
        prepare(pipeline, folder, dvc)
    except (OSError, subprocess.CalledProcessError, LookupError) as exc:
        return fail(PROG, EXIT_CONFIG, f'cannot prepare the run folder {folder}: {exc}')
    if args.action == 'status':
        return _status(dvc, folder)
    return _run(dvc, folder, pipeline)


def stages(pipeline: Pipeline) -> dict[str, Any]:
    """The ``dvc.yaml`` mapping of ``pipeline``'s stages (paths relative to the run folder)."""
    stem = f'{pipeline.robot}_{pipeline.task}'
    policy = [f'policy/{stem}{suffix}' for suffix in ('.pt', '.yaml', '.pt2', '.pt2.yaml')]
    out: dict[str, Any] = {}
    physics: list[str] = []
    sensor: list[str] = []   # the learned sensor model the validation sim reports through
    if pipeline.bags:
        recordings = (*(f'--bag {_q(b)}' for b in pipeline.bags),
                      *(f'--holdout {_q(h)}' for h in pipeline.holdout))
        commands = [_command('fit', *recordings,
                             f'--out {CALIBRATION} --report calibration_report')]
        if pipeline.actuator_model != 'none':
            commands.append(_command('fit', *recordings, '--mode torque --actuator-model '
                                     f'{pipeline.actuator_model} --out {SENSOR} '
                                     '--report sensor_report'))
            sensor = [SENSOR, SENSOR.replace('.yaml', '.actuator.pt'),
                      SENSOR.replace('.yaml', '.actuator.yaml')]
        out['calibrate'] = {
            'cmd': commands[0] if len(commands) == 1 else commands,
            'deps': [str(b) for b in (*pipeline.bags, *pipeline.holdout)],
            'params': [{PARAMS: ['robot', 'calibration']}],
            'outs': [CALIBRATION, 'calibration_report',
                     *([*sensor, 'sensor_report'] if sensor else [])]}
        physics = [CALIBRATION]
    elif pipeline.sim_params is not None:
        physics = [str(pipeline.sim_params)]
    sim = f' --sim-params {_q(physics[0])}' if physics else ''
    profiles = str(resolve_resource(SIM_PROFILES_FILE))   # the simulators' options
    train = ' '.join(f'--{key.replace("_", "-")} {value}'
                     for key, value in pipeline.train.items())
    out['train'] = {
        'cmd': _command('simops-train', f'--task {pipeline.task} --robot {pipeline.robot} '
                        f'--out policy/{stem}{sim} --sim-profile {pipeline.training_sim}',
                        train),
        'deps': [*physics, profiles],
        'params': [{PARAMS: ['robot', 'task', 'sims', 'train']}],
        'outs': policy}
    thresholds = ' '.join(f'--{key.replace("_", "-")} {value:g}'
                          for key, value in pipeline.thresholds.items())
    grid = f'--grid {" ".join(pipeline.grid)}' if pipeline.grid else ''
    out['gate'] = {
        'cmd': _command('simops-validate', f'--policy {policy[0]} --robot {pipeline.robot}'
                        f'{sim} --episodes {pipeline.episodes} --seed {pipeline.gate_seed} '
                        f'--workers {pipeline.gate_workers} --out {GATE} --verdict-exit-zero '
                        f'--sim-profile {pipeline.validation_sim}'
                        + (f' --sensor-model {SENSOR}' if sensor else '')
                        + (' --sim-gap' if pipeline.sim_gap else ''), grid, thresholds),
        'deps': [*policy, *physics, *sensor, profiles],
        'params': [{PARAMS: ['sims', 'gate']}],
        'outs': [f'{GATE}/validation.md', f'{GATE}/validation_heatmap.png'],
        'metrics': [{f'{GATE}/validation.json': {'cache': False}}]}
    if pipeline.promote:
        out['promote'] = {
            'cmd': _command('simops-promote', f'--policy {policy[0]} --report '
                            f'{GATE}/validation.json{sim} --pipeline {PARAMS}'),
            'deps': [*policy, f'{GATE}/validation.json', *physics],
            'outs': [f'policy/{stem}.promotion.jsonl']}
    for stage in out.values():   # DVC wants no empty lists
        for key in [k for k, v in stage.items() if v == []]:
            del stage[key]
    return {'stages': out}


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
                              'actuator_model': pipeline.actuator_model},
              'sims': {'training': pipeline.training_sim,
                       'validation': pipeline.validation_sim, 'gap': pipeline.sim_gap},
              'train': dict(pipeline.train),
              'gate': {'grid': list(pipeline.grid), 'episodes': pipeline.episodes,
                       'seed': pipeline.gate_seed, 'workers': pipeline.gate_workers,
                       'thresholds': dict(pipeline.thresholds)},
              'promote': pipeline.promote}
    _write(folder / PARAMS, yaml.safe_dump(params, sort_keys=False))
    _write(folder / 'dvc.yaml', yaml.safe_dump(stages(pipeline), sort_keys=False))


def _run(dvc: str, folder: Path, pipeline: Pipeline) -> int:
    print(f'{PROG}: {pipeline.name} in {folder}', flush=True)
    # DVC and the stages run in a session of their own: Ctrl-C reaches this process alone,
    # which ends them all with SIGTERM (a tool taking SIGINT while it still imports, or in
    # a worker, would print a traceback), and DVC's own stage lock is freed with them.
    proc = subprocess.Popen([dvc, 'repro'], cwd=folder, env=_env(), start_new_session=True)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        print(f'{PROG}: interrupted; the running stage was stopped', file=sys.stderr)
        return EXIT_INTERRUPTED
    report = folder / GATE / 'validation.json'
    # the gate's report counts once the gate stage is done (a failed train leaves an old one)
    summary = (json.loads(report.read_text()) if report.is_file()
               and (code == 0 or _done(dvc, folder, 'gate')) else None)
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
          + (f', promoted: {folder / "policy"}' if pipeline.promote else ''), flush=True)
    return EXIT_OK


def _stop(proc: subprocess.Popen) -> None:
    """End DVC's session, and return once no process of it is left.

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
                os.killpg(proc.pid, 0)   # anyone left in the session?
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


def _command(tool: str, *parts: str) -> str:
    path = _tool(tool)
    if path is None:
        raise LookupError(f'{tool} is not installed (make build)')
    return ' '.join([_q(path), *(p for p in parts if p)])


def _tool(name: str) -> str | None:
    """The executable ``name`` beside this Python (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _q(value: object) -> str:
    text = str(value)
    return text if text and all(c.isalnum() or c in '/._-=,' for c in text) else repr(text)


def _env() -> dict[str, str]:
    return {**os.environ, **DVC_ENV}


def _write(path: Path, text: str) -> None:
    """Write ``text`` unless the file holds it already (DVC sees no change then)."""
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


if __name__ == '__main__':
    sys.exit(main())
