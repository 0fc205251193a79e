"""The validation gate's adversarial scenarios: one event in an episode (no rclpy).

A :class:`Scenario` is what ``config/scenarios.yaml``, their one source, names: a push on the
arm or the cube, a goal moved mid-episode, joint states that stop coming, an object pose that
stops coming, the node's e-stop followed by recovery, the arm's own protective stop, or
its user stop pressed, then released and recovered. The env plays it
(:class:`~simops_learning.reach_env.FR3ReachEnv`, ``reset(options={'scenario': ...})``) at
control ticks: :meth:`Scenario.ticks` turns its times into tick indices (tick ``k`` is at
``k * period`` s after the episode's start, when the node reads its inputs and commands).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.command_line import ConfigError
from simops_core.motion_supervisor import MotionSupervisor
from simops_core.tasks import TASK_NAMES
from simops_core.yaml_fields import Fields, named_tables

SCENARIOS_FILE = 'config/scenarios.yaml'
PUSH, GOAL_MOVED, STALE_JOINT_STATES, OBJECT_POSE_DROPOUT, ESTOP, ARM_STOP, USER_STOP = (
    'push', 'goal_moved', 'stale_joint_states', 'object_pose_dropout', 'estop', 'arm_stop',
    'user_stop')
EVENTS = (PUSH, GOAL_MOVED, STALE_JOINT_STATES, OBJECT_POSE_DROPOUT, ESTOP, ARM_STOP,
          USER_STOP)
ARM_STOPS = (ARM_STOP, USER_STOP)   # events that stop the arm itself, until its recovery
OPERATED = (ESTOP, *ARM_STOPS)      # events after which the operator calls ~/enable
BODIES = ('flange', 'object')
SCENARIO_FIELDS = ('event', 'at', 'tasks', 'duration', 'force', 'body', 'enable_after')
TICK_TOLERANCE = 1e-9   # s: a time this close above a tick counts as that tick


class ScenarioError(ConfigError):
    """The scenarios file is malformed, or a scenario it lacks was asked for."""

    hint = 'fix config/scenarios.yaml'


@dataclass(frozen=True)
class Ticks:
    """A scenario's control ticks.

    The event lasts from ``start`` (inclusive) to ``end`` (exclusive); ``enable``: the tick
    the operator calls ``~/enable`` (the e-stop and the arm's stop, else -1).
    """

    start: int
    end: int
    enable: int = -1

    def active(self, tick: int) -> bool:
        """Whether the event lasts at ``tick``."""
        return self.start <= tick < self.end


@dataclass(frozen=True)
class Scenario:
    """One adversarial event; see ``config/scenarios.yaml``.

    ``at`` s after the episode starts; ``duration`` s (a push, missing inputs, the e-stop,
    the arm's stop until its error recovery); ``force`` N, horizontal, on ``body`` (a push);
    ``enable_after`` s from the e-stop's release or the arm's recovery to ``~/enable``;
    ``tasks``: the tasks it applies to.
    """

    name: str
    event: str
    at: float
    tasks: tuple[str, ...]
    duration: float = 0.0
    force: float = 0.0
    body: str = 'flange'
    enable_after: float = 0.0

    def ticks(self, period: float) -> Ticks:
        """The event's ticks at control ``period`` s; each time rounds up to a tick."""
        def tick(seconds: float) -> int:
            return math.ceil(seconds / period - TICK_TOLERANCE / period)

        start = tick(self.at)
        end = max(tick(self.at + self.duration), start + 1)   # every event lasts a tick
        enable = (tick(self.at + self.duration + self.enable_after) if self.event in OPERATED
                  else -1)
        return Ticks(start, end, max(enable, end) if enable >= 0 else -1)

    def direction(self, rng: np.random.Generator) -> np.ndarray:
        """A push's direction (3,): a horizontal unit vector in the base frame, drawn."""
        angle = rng.uniform(-np.pi, np.pi)
        return np.array([np.cos(angle), np.sin(angle), 0.0])

    def as_dict(self) -> dict[str, object]:
        """Field → value, as a report records the scenario."""
        return {**asdict(self), 'tasks': list(self.tasks)}


def scenario(name: str, task: str | None = None) -> Scenario:
    """Scenario ``name`` of ``config/scenarios.yaml``; with ``task``, one that applies to it."""
    scenarios = load_scenarios()
    if name not in scenarios:
        raise ScenarioError(f'{SCENARIOS_FILE} has no scenario {name!r} (it has '
                            f'{", ".join(scenarios)})')
    found = scenarios[name]
    if task is not None and task not in found.tasks:
        raise ScenarioError(f'scenario {name!r} is not for the {task} task (only '
                            f'{", ".join(found.tasks)}: {SCENARIOS_FILE})')
    return found


def drawn(names: tuple[str, ...], share: float, seed: int, task: str) -> Scenario | None:
    """The scenario that training episode ``seed`` plays, or None: one rule for every task.

    Drawn from the seed alone, so a worker split or a rerun plays the same ones: ``share``
    (0..1] of the episodes play one of ``names``, each equally likely.
    """
    if not names:
        return None
    draw = np.random.default_rng([seed, 2])
    if draw.random() >= share:
        return None
    return scenario(names[int(draw.integers(len(names)))], task)


@cache
def load_scenarios(path: str | Path = SCENARIOS_FILE) -> dict[str, Scenario]:
    """Every scenario of the file at ``path``, by name; each field checked."""
    return named_tables(path, ScenarioError, 'scenarios', 'scenarios', SCENARIO_FIELDS,
                        _scenario)[1]


def _scenario(check: Fields, name: str, where: str, table: dict[str, Any]) -> Scenario:
    """One table of the scenarios file."""
    event = check.choice(table, 'event', EVENTS, f'{where}.event')
    tasks = table.get('tasks')
    if not isinstance(tasks, list) or not tasks or any(t not in TASK_NAMES for t in tasks):
        check.fail(f'{where}.tasks', f'must list tasks of {", ".join(TASK_NAMES)}, got '
                                     f'{tasks!r}')
    values: dict[str, Any] = {
        'at': check.number(table, 'at', f'{where}.at', 0.0), 'tasks': tuple(tasks)}
    needed = {PUSH: ('duration', 'force', 'body'), STALE_JOINT_STATES: ('duration',),
              OBJECT_POSE_DROPOUT: ('duration',), ESTOP: ('duration', 'enable_after'),
              ARM_STOP: ('duration', 'enable_after'), USER_STOP: ('duration', 'enable_after'),
              GOAL_MOVED: ()}[event]
    for key in ('duration', 'force', 'body', 'enable_after'):
        if key in table and key not in needed:
            check.fail(f'{where}.{key}', f'means nothing to a {event} event')
        if key not in needed:
            continue
        if key == 'body':
            values[key] = check.choice(table, key, BODIES, f'{where}.{key}')
        else:
            values[key] = check.number(table, key, f'{where}.{key}', 0.0,
                                       strict=key != 'enable_after')
    if event == PUSH and values['body'] == 'object' and 'reach' in tasks:
        check.fail(f'{where}.tasks', 'lists reach, which has no object to push')
    return Scenario(name, event, **values)


class ScenarioRun:
    """One episode's play of ``scenario`` (None: no event) at control ``period`` s.

    ``rng``: the episode's own generator for what the scenario draws (a push's direction, a
    moved goal). Each query takes the tick ``k`` the env is at.
    """

    def __init__(self, scenario: Scenario | None, period: float,
                 rng: np.random.Generator | None = None) -> None:
        self.scenario = scenario
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.ticks = scenario.ticks(period) if scenario is not None else Ticks(-1, -1)
        self.event = scenario.event if scenario is not None else ''
        self.force = (scenario.force * scenario.direction(self.rng)
                      if scenario is not None and scenario.event == PUSH else None)
        self.pushes_object = self.force is not None and scenario.body == 'object'

    def push_force(self, tick: int) -> np.ndarray | None:
        """The push (3,) N, base frame, over the period from ``tick``.

        Zeros once it has ended; None without a push scenario (nothing to set).
        """
        if self.force is None:
            return None
        return self.force if self.ticks.active(tick) else np.zeros(3)

    def moves_goal(self, tick: int) -> bool:
        """Whether the goal jumps at ``tick`` (draw it from :attr:`rng`)."""
        return self.event == GOAL_MOVED and tick == self.ticks.start

    def joint_states_lost(self, tick: int) -> bool:
        """Whether no joint state came since the last tick."""
        return self.event == STALE_JOINT_STATES and self.ticks.active(tick)

    def object_pose_lost(self, tick: int) -> bool:
        """Whether no object pose came since the last tick."""
        return self.event == OBJECT_POSE_DROPOUT and self.ticks.active(tick)

    def arm_stopped(self, tick: int) -> bool:
        """Whether the arm is stopped at ``tick``, until its recovery.

        Its own protective stop (``arm_stop``), or its user stop pressed (``user_stop``).
        """
        return self.event in ARM_STOPS and self.ticks.active(tick)

    def arm_recovers(self, tick: int) -> bool:
        """Whether the arm's error recovery clears its stop at ``tick``.

        A user stop is released first, in the same tick.
        """
        return self.event in ARM_STOPS and tick == self.ticks.end

    def drive(self, supervisor: MotionSupervisor, tick: int) -> None:
        """The e-stop and the operator at ``tick``: pressed, released, then ``~/enable``.

        After the arm's own stop, the operator's ``~/enable`` once it has recovered (the
        FAULT it latched is the node's: see :meth:`arm_stopped`).
        """
        if self.event == ESTOP and tick == self.ticks.start:
            supervisor.set_estop(True)
        elif self.event == ESTOP and tick == self.ticks.end:
            supervisor.set_estop(False)
        if self.event in OPERATED and tick == self.ticks.enable:
            supervisor.enable(True)
