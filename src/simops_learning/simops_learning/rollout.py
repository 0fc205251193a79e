"""Run a loaded policy in an env for a batch of episodes (validation, parity, tests).

Each episode's task is fixed by the run's seed and its index (the env's ``episode_options``:
the reach goal from ``reach_env.episode_goal``; the pick-and-place cube and goal from the
reset seed), so every configuration of a validation grid sees the same tasks (paired).

:func:`run_episodes` steps one env; :func:`run_episodes_batched` steps many envs of one
kind in lockstep, their physics advanced together
(:func:`simops_sim.physics_batch.step_together`), a new episode starting in an env as soon
as its last one ends. Both give the same results for the same seeds, bit for bit: the
policy still infers one observation at a time, as the policy node does (a batched forward
pass differs from it in the last bits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simops_learning.reach_env import FR3ReachEnv
from simops_learning.validation_report import FAILURE_MODES
from simops_sim.physics_batch import step_together
from simops_sim.randomization import Conditions
from simops_sim.scenarios import Scenario

BATCH = 20          # envs stepped together by default (the gate's workers, simops-rollout)
TASK_EPISODES = 60  # episodes one task runs (a new one starts in an env as one ends)
Policy = Callable[[np.ndarray], np.ndarray]
INPUTS = ('joint_position', 'joint_velocity', 'object_position', 'object_quaternion',
          'goal_position')
StepHook = Callable[[FR3ReachEnv, int, dict[str, np.ndarray], np.ndarray, dict[str, Any]],
                    None]
"""(env, episode, inputs, raw action, the step's info), after each env step.

``inputs`` are copies of what the policy step built the acted-on observation from:
``joint_position``, ``joint_velocity`` (n,), ``object_position`` (3,), ``object_quaternion``
(4,) x, y, z, w, ``goal_position`` (3,) (``env.policy_step.raw`` before the step).
"""


Capture = Callable[[FR3ReachEnv, int], dict[str, Any]]
"""(env, episode) -> more inputs (camera images), taken with ``inputs`` before the step."""


@dataclass(frozen=True)
class EpisodeResult:
    """One episode: success, final task distance (m), control steps taken, stops, safety.

    ``stops`` is 1 when the arm stopped itself (a protective stop ends the episode), else 0;
    ``unsafe`` 1 when the episode broke the task's safety limits; ``peak_speed`` (rad/s) and
    ``peak_force`` (N) the largest arm joint speed and hand contact force (NaN where the env
    does not measure them); ``failure`` how an unsuccessful episode failed, an index into
    :data:`FAILURE_MODES` (0: it succeeded).
    """

    success: bool
    distance: float
    steps: int
    stops: int
    unsafe: int = 0
    peak_speed: float = float('nan')
    peak_force: float = float('nan')
    failure: int = 0


def run_episodes(env: FR3ReachEnv, policy: Policy, episodes: range, seed: int,
                 conditions: Conditions | None = None,
                 scenario: Scenario | None = None) -> list[EpisodeResult]:
    """Roll ``policy`` (observation → raw action) out for the given episode indices.

    Each episode's task comes from :meth:`FR3ReachEnv.episode_options`; ``scenario``
    plays in every episode.
    """
    results = []
    for episode in episodes:
        obs, _ = _start(env, episode, seed, conditions, scenario=scenario)
        steps = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            if terminated or truncated:
                break
        results.append(episode_result(info, steps, truncated))
    return results


def run_episodes_batched(envs: Sequence[FR3ReachEnv], policy: Policy, episodes: range,
                         seed: int, conditions: Conditions | None = None,
                         on_step: StepHook | None = None,
                         level: float | None = None,
                         capture: Capture | None = None,
                         scenario: Scenario | None = None) -> list[EpisodeResult]:
    """:func:`run_episodes` over ``len(envs)`` envs of one kind stepped together.

    ``on_step`` (:data:`StepHook`) is called after every step of every env, in no
    particular order across envs; ``capture`` (:data:`Capture`) adds to its inputs.
    ``level``: the curriculum level of randomised envs; ``scenario`` plays in every
    episode.
    """
    pending = list(episodes)
    running: dict[int, list] = {}     # env slot -> [episode, observation, steps]
    results: dict[int, EpisodeResult] = {}

    def start(slot: int) -> None:
        episode = pending.pop(0)
        obs, _ = _start(envs[slot], episode, seed, conditions, level, scenario)
        running[slot] = [episode, obs, 0]

    for slot in range(min(len(envs), len(pending))):
        start(slot)
    while running:
        slots = list(running)
        actions, inputs = {}, {}
        for slot in slots:
            if on_step is not None:
                raw = envs[slot].policy_step.raw
                inputs[slot] = {name: getattr(raw, name).copy() for name in INPUTS}
                if capture is not None:
                    inputs[slot] |= capture(envs[slot], running[slot][0])
            actions[slot] = policy(running[slot][1])
            envs[slot].begin_step(actions[slot])
        first = envs[slots[0]]
        for chunk in first.chunks():
            step_together([envs[slot].physics for slot in slots], chunk)
            for slot in slots:
                envs[slot]._sample(chunk)
        for slot in slots:
            episode, _, steps = running[slot]
            obs, _, terminated, truncated, info = envs[slot].finish_step()
            if on_step is not None:
                on_step(envs[slot], episode, inputs[slot], actions[slot], info)
            running[slot][1:] = [obs, steps + 1]
            if terminated or truncated:
                results[episode] = episode_result(info, steps + 1, truncated)
                del running[slot]
                if pending:
                    start(slot)
    return [results[episode] for episode in episodes]


def _start(env: FR3ReachEnv, episode: int, seed: int, conditions: Conditions | None,
           level: float | None = None, scenario: Scenario | None = None
           ) -> tuple[np.ndarray, dict[str, Any]]:
    options = env.episode_options(seed, episode)
    if conditions is not None:
        options['conditions'] = conditions
    if scenario is not None:
        options['scenario'] = scenario
    if level is not None:
        options['level'] = level
    return env.reset(seed=seed * 1_000_003 + episode, options=options)


def episode_result(info: dict[str, Any], steps: int, truncated: bool) -> EpisodeResult:
    """The :class:`EpisodeResult` of an episode that ended with ``info`` after ``steps``.

    ``truncated``: it ended because it ran out of steps.
    """
    return EpisodeResult(
        bool(info['is_success']), info['distance'], steps,
        int(info['protective_stop'] != ''), int(info.get('unsafe', False)),
        float(info.get('peak_joint_speed', float('nan'))),
        float(info.get('peak_contact_force', float('nan'))), failure_mode(info, truncated))


def failure_mode(info: dict[str, Any], truncated: bool) -> int:
    """How the episode that ended with ``info`` failed: an index into FAILURE_MODES."""
    if info['is_success']:
        mode = ''
    elif info['protective_stop']:
        mode = 'protective_stop'
    elif info.get('unsafe', False):
        mode = 'unsafe'
    elif info.get('dropped', False):
        mode = 'dropped'
    else:
        mode = 'timeout' if truncated else 'fault'
    return FAILURE_MODES.index(mode)
