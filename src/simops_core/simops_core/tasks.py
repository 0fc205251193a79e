"""The tasks a SimOps policy can do: one name each, and what the name means everywhere.

A task's name is the one spelling every tool takes (``task:=pick_place`` in the launch files,
``--task pick_place`` on the command lines, ``task: pick_place`` in a policy card). It names:

- ``env_id``: the Gymnasium env that trains and gates the task (registered by
  ``simops_learning``);
- ``randomization``: the profile of ``config/randomization.yaml`` its training, rollouts and
  gate draw from;
- ``tracked``: the pose whose closest approach to ``goal_pose`` decides success (a key of
  ``config/topics.yaml``; within the env's success radius, m, in the robot's base frame);
- the default policy file, :data:`POLICY_PATH` (``models/policy/<robot>_<name>.pt``).

A policy card names its task; :func:`resolve_task` refuses a command line that contradicts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from simops_core.command_line import UsageError

POLICY_PATH = 'models/policy/{robot}_{task}.pt'   # a task's default policy (a resource)


@dataclass(frozen=True)
class Task:
    """One task: its name, a one-line summary and what the name stands for (module docstring)."""

    name: str
    summary: str
    env_id: str
    randomization: str
    tracked: str

    @property
    def tracked_thing(self) -> str:
        """What the tracked pose is the pose of, in words: ``flange`` or ``object``."""
        return 'flange' if self.tracked == 'ee_pose' else 'object'

    def policy_path(self, robot: str) -> str:
        """The task's default policy for ``robot`` (a resource path)."""
        return POLICY_PATH.format(robot=robot, task=self.name)


TASKS = {task.name: task for task in (
    Task('reach', 'reach the goal with the flange', 'SimOps/FR3Reach-v0', 'randomization',
         'ee_pose'),
    Task('pick_place', 'pick up the cube and place it at the goal', 'SimOps/FR3PickPlace-v0',
         'pick_place', 'object_pose'),
)}
TASK_NAMES = tuple(TASKS)
DEFAULT_TASK = 'reach'   # what a card without a task field was trained for


def task_named(name: str) -> Task:
    """The task called ``name``; :class:`UsageError` naming the known tasks otherwise."""
    try:
        return TASKS[name]
    except KeyError:
        raise UsageError(f'unknown task {name!r}; the tasks are '
                         f'{", ".join(TASK_NAMES)}') from None


def resolve_task(option: str | None, card_task: str | None, card: object = 'the card') -> Task:
    """The task of a run: the card's, or ``option`` (``--task``) when the card names none.

    ``card_task``: the policy card's ``task`` (None for a card from before cards named it,
    then :data:`DEFAULT_TASK` unless ``option`` says otherwise). Raises :class:`UsageError`
    when ``option`` contradicts the card.
    """
    if card_task is not None and option is not None and option != card_task:
        raise UsageError(f'{card} is a {card_task} policy, but --task says {option}; drop '
                         f'--task or give a {option} policy')
    return task_named(card_task or option or DEFAULT_TASK)
