"""The command lines a pipeline's stages run, written once for DVC and the improve stage.

Paths are relative to the run folder (DVC runs every stage there). No rclpy.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from simops_bringup.pipeline_file import Pipeline
from simops_learning.reward_terms import format_reward_terms
from simops_learning.training_options import FINE_TUNED_TASK

PARAMS = 'pipeline.yaml'    # the pipeline file's sections, DVC's params file in the run folder
CALIBRATION = 'calibration.yaml'
SENSOR = 'sensor.yaml'   # the torque-mode fit naming the learned sensor model
RANDOMIZATION = 'randomization.yaml'   # the training ranges: the task's with the file's
GATE = 'gate'
POLICY = 'policy'
IMPROVE = 'improve'      # the improve stage's rounds: analysis, ranges, policy, gate each
RELEASE = 'release'      # the policy the loop ends with, and its gate report
EPISODES = 'episodes'    # the datasets' bags, exported as one LeRobot dataset
POLICY_SUFFIXES = ('.pt', '.yaml', '.pt2', '.pt2.yaml')   # the model, its card, the export


@dataclass(frozen=True)
class Inputs:
    """What the train and gate stages read.

    ``physics``: the physics file (none: nominal); ``sensor``: the learned sensor model's
    files (none: the simulator's own sensors).
    """

    physics: tuple[str, ...] = ()
    sensor: tuple[str, ...] = ()


def stem(pipeline: Pipeline) -> str:
    """``<robot>_<task>``: the policy's file stem."""
    return f'{pipeline.robot}_{pipeline.task}'


def policy_suffixes(pipeline: Pipeline) -> tuple[str, ...]:
    """The suffixes of the policy's files: a given policy's that exist, else all."""
    if pipeline.policy is None:
        return POLICY_SUFFIXES
    base = str(pipeline.policy).removesuffix('.pt')
    return tuple(s for s in POLICY_SUFFIXES if Path(base + s).is_file())


def policy_files(pipeline: Pipeline, folder: str = POLICY) -> list[str]:
    """The policy, its card and its export, under ``folder`` of the run folder."""
    return [f'{folder}/{stem(pipeline)}{suffix}' for suffix in policy_suffixes(pipeline)]


def given_policy_files(pipeline: Pipeline) -> list[str]:
    """The file's trained policy, its card and its export where there is one (absolute)."""
    assert pipeline.policy is not None
    base = str(pipeline.policy).removesuffix('.pt')
    return [base + suffix for suffix in policy_suffixes(pipeline)]


def adopt_command(pipeline: Pipeline) -> str:
    """Copy the file's trained policy (and its card and export) into :data:`POLICY`."""
    copies = ' && '.join(f'cp {quoted(source)} {target}' for source, target in
                         zip(given_policy_files(pipeline), policy_files(pipeline), strict=True))
    return f'mkdir -p {POLICY} && {copies}'


def inputs(pipeline: Pipeline) -> Inputs:
    """The physics and sensor files the calibration gives (or the file's SimParams)."""
    if pipeline.bags:
        sensor = ((SENSOR, SENSOR.replace('.yaml', '.actuator.pt'),
                   SENSOR.replace('.yaml', '.actuator.yaml'))
                  if pipeline.actuator_model != 'none' else ())
        return Inputs((CALIBRATION,), sensor)
    if pipeline.sim_params is not None:
        return Inputs((str(pipeline.sim_params),))
    return Inputs()


def train_command(pipeline: Pipeline, out_stem: str, ranges: str = RANDOMIZATION,
                  init: str | None = None, scenarios: tuple[str, ...] = (),
                  reward_terms: Mapping[str, float] | None = None) -> str:
    """``simops-train`` into ``out_stem`` (.pt and its card) with the training ranges file.

    ``init``: the policy to fine-tune from, for the task simops-train fine-tunes
    (:data:`~simops_learning.training_options.FINE_TUNED_TASK`; the others train from
    scratch); ``scenarios``: events its rounds play (``--scenarios``);
    ``reward_terms``: PPO's penalties by failure mode (``--reward-terms``). ``train.in_flight``
    asks a new policy for ``--in-flight``; a fine-tune keeps its init policy's kind.
    """
    physics = inputs(pipeline).physics
    options = ' '.join(f'--{key.replace("_", "-")} {value}'
                       for key, value in pipeline.train.items())
    datasets = pipeline.datasets
    if init is None and datasets is not None and datasets.init_policy is not None:
        init = quoted(datasets.init_policy)
    if pipeline.in_flight and init is None:
        options += ' --in-flight'
    return command('simops-train', f'--task {pipeline.task} --robot {pipeline.robot} '
                   f'--out {out_stem}' + (f' --sim-params {quoted(physics[0])}' if physics
                                          else '')
                   + f' --sim-profile {pipeline.training_sim} --randomization {ranges}'
                   + (f' --init-policy {init}' if init and pipeline.task == FINE_TUNED_TASK
                      else '')
                   + dataset_options(pipeline)
                   + (f' --scenarios {" ".join(scenarios)}' if scenarios else '')
                   + (f' --reward-terms {" ".join(format_reward_terms(reward_terms))}'
                      if reward_terms else ''),
                   options)


def dataset_options(pipeline: Pipeline) -> str:
    """``simops-train``'s options for the file's datasets (' --dataset ...'; '' without).

    With expert rounds, the datasets share ``share`` of the batches equally and the
    expert-labelled states the rest.
    """
    datasets = pipeline.datasets
    if datasets is None:
        return ''
    folders = [*map(str, datasets.paths), *([EPISODES] if datasets.bags else [])]
    options = ''.join(f' --dataset {quoted(folder)}' for folder in folders)
    if datasets.expert_rounds:
        weight = datasets.share / len(folders)
        options += ''.join(f' --weight {weight!r}' for _ in folders)
        options += (f' --expert-rounds {datasets.expert_rounds} '
                    f'--expert-weight {1.0 - datasets.share!r}')
    return options + f' --twist-at-cap {datasets.twist_at_cap}'


def training_data(pipeline: Pipeline) -> list[str]:
    """The files the training reads besides the physics: datasets, a policy to refine.

    The bags' export (:data:`EPISODES`) is one of the datasets.
    """
    datasets = pipeline.datasets
    if datasets is None:
        return []
    init = datasets.init_policy
    return [*map(str, datasets.paths), *([EPISODES] if datasets.bags else []),
            *((str(init), str(init.with_suffix('.yaml'))) if init is not None else ())]


def export_command(pipeline: Pipeline) -> str:
    """``simops-dataset export`` of the datasets' bags into :data:`EPISODES`."""
    datasets = pipeline.datasets
    assert datasets is not None and datasets.card is not None
    return command('simops-dataset', 'export', *map(quoted, datasets.episodes),
                   f'--card {quoted(datasets.card)} --out {EPISODES}')


def gate_command(pipeline: Pipeline, policy: str, out: str) -> str:
    """``simops-validate`` of ``policy`` into the folder ``out`` (its verdict exits 0)."""
    given = inputs(pipeline)
    thresholds = ' '.join(f'--{key.replace("_", "-")} {value:g}'
                          for key, value in pipeline.thresholds.items())
    grid = f'--grid {" ".join(pipeline.grid)}' if pipeline.grid else ''
    scenarios = f'--scenarios {" ".join(pipeline.scenarios)}' if pipeline.scenarios else ''
    return command('simops-validate', f'--policy {policy} --robot {pipeline.robot}'
                   + (f' --sim-params {quoted(given.physics[0])}' if given.physics else '')
                   + f' --episodes {pipeline.episodes} --seed {pipeline.gate_seed} '
                   f'--workers {pipeline.gate_workers} --out {out} --verdict-exit-zero '
                   f'--sim-profile {pipeline.validation_sim}'
                   + (f' --sensor-model {SENSOR}' if given.sensor else '')
                   + (' --sensors' if pipeline.sensors else '')
                   + (' --sim-gap' if pipeline.sim_gap else ''), grid, scenarios, thresholds)


def command(tool: str, *parts: str) -> str:
    """A shell command line running ``tool`` (beside this Python, else on PATH)."""
    path = tool_path(tool)
    if path is None:
        raise LookupError(f'{tool} is not installed (make build)')
    return ' '.join([quoted(path), *(p for p in parts if p)])


def tool_path(name: str) -> str | None:
    """The executable ``name`` beside this Python (the venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def quoted(value: object) -> str:
    """``value`` as one shell word."""
    text = str(value)
    return text if text and all(c.isalnum() or c in '/._-=,' for c in text) else repr(text)


def write_if_changed(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless it holds it already (DVC then sees no change)."""
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
