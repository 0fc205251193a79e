"""Gymnasium environments, training and export of the policies, and the validation gate.

Importing the package registers each task's env (:mod:`simops_core.tasks`):
``SimOps/FR3Reach-v0`` and ``SimOps/FR3PickPlace-v0``;
``gymnasium.make('simops_learning:SimOps/FR3PickPlace-v0')`` imports it on demand.
``gymnasium.make_vec(ID, num_envs=N, vectorization_mode='vector_entry_point')`` steps the
N envs' physics together (:mod:`simops_learning.stepped_vector`).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium

from simops_core.command_line import run_executable
from simops_core.tasks import TASKS

ENTRY_POINTS = {   # task -> (env class, vector entry point)
    'reach': ('simops_learning.reach_env:FR3ReachEnv',
              'simops_learning.stepped_vector:reach_vector'),
    'pick_place': ('simops_learning.pick_env:FR3PickPlaceEnv',
                   'simops_learning.stepped_vector:pick_vector'),
}

for _task, (_entry, _vector) in ENTRY_POINTS.items():
    if TASKS[_task].env_id not in gymnasium.registry:
        gymnasium.register(id=TASKS[_task].env_id, entry_point=_entry,
                           vector_entry_point=_vector)


def env_class(task: str) -> Any:
    """The env class of ``task`` (a name of :mod:`simops_core.tasks`), imported on demand."""
    module, _, name = ENTRY_POINTS[task][0].partition(':')
    return getattr(importlib.import_module(module), name)


# The executables (setup.py's console scripts): each imports its module only when run.


def run_train() -> int | None:
    """``simops-train``: :mod:`simops_learning.train`."""
    return run_executable('simops_learning.train:main')


def run_validate() -> int | None:
    """``simops-validate``: :mod:`simops_learning.validate`."""
    return run_executable('simops_learning.validate:main')


def run_promote() -> int | None:
    """``simops-promote``: :mod:`simops_learning.promote`."""
    return run_executable('simops_learning.promote:main')


def run_dataset() -> int | None:
    """``simops-dataset`` and ``dataset``: :mod:`simops_learning.dataset_cli`."""
    return run_executable('simops_learning.dataset_cli:cli')


def run_rollout() -> int | None:
    """``simops-rollout``: :mod:`simops_learning.rollout_cli`."""
    return run_executable('simops_learning.rollout_cli:cli')
