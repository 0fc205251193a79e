"""Run a loaded policy in an env for a batch of episodes (validation, parity, tests).

Each episode's task is fixed by the run's seed and its index (the env's ``episode_options``:
the reach goal from ``reach_env.episode_goal``; the pick-and-place cube and goal from the
reset seed), so every configuration of a validation grid sees the same tasks (paired).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simops_learning.reach_env import FR3ReachEnv
from simops_sim.randomization import Conditions

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EpisodeResult:
    """One episode: success, final task distance (m), control steps taken, stops, safety.

    ``stops`` is 1 when the arm stopped itself (a protective stop ends the episode), else 0;
    ``unsafe`` 1 when the episode broke the task's safety limits; ``peak_speed`` (rad/s) and
    ``peak_force`` (N) the largest arm joint speed and hand contact force (NaN where the env
    does not measure them).
    """

    success: bool
    distance: float
    steps: int
    stops: int
    unsafe: int = 0
    peak_speed: float = float('nan')
    peak_force: float = float('nan')


def run_episodes(env: FR3ReachEnv, policy: Policy, episodes: range, seed: int,
                 conditions: Conditions | None = None) -> list[EpisodeResult]:
    """Roll ``policy`` (observation → raw action) out for the given episode indices.

    Each episode's task comes from :meth:`FR3ReachEnv.episode_options`.
    """
    results = []
    for episode in episodes:
        options = env.episode_options(seed, episode)
        if conditions is not None:
            options['conditions'] = conditions
        obs, info = env.reset(seed=seed * 1_000_003 + episode, options=options)
        steps = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            if terminated or truncated:
                break
        results.append(EpisodeResult(
            bool(info['is_success']), info['distance'], steps,
            int(info['protective_stop'] != ''), int(info.get('unsafe', False)),
            float(info.get('peak_joint_speed', float('nan'))),
            float(info.get('peak_contact_force', float('nan')))))
    return results
