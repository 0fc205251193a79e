"""Run a loaded policy in the env for a batch of episodes (validation, parity, tests).

Goals are drawn per episode from ``episode_goal(seed, episode)``, so every physics
configuration of a validation grid sees the same goals (paired comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simops_learning.reach_env import WORKSPACE_HIGH, WORKSPACE_LOW, FR3ReachEnv
from simops_sim.randomization import Conditions

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class EpisodeResult:
    """One episode: success, final flange-goal distance (m), control steps taken, stops.

    ``stops`` is 1 when the arm stopped itself (a protective stop ends the episode), else 0.
    """

    success: bool
    distance: float
    steps: int
    stops: int


def episode_goal(seed: int, episode: int) -> np.ndarray:
    """The goal (3,) m of episode ``episode`` of a run seeded ``seed`` (uniform workspace)."""
    return np.random.default_rng([seed, episode]).uniform(WORKSPACE_LOW, WORKSPACE_HIGH)


def run_episodes(env: FR3ReachEnv, policy: Policy, episodes: range, seed: int,
                 conditions: Conditions | None = None) -> list[EpisodeResult]:
    """Roll ``policy`` (observation → raw action) out for the given episode indices."""
    results = []
    for episode in episodes:
        options = {'goal': episode_goal(seed, episode)}
        if conditions is not None:
            options['conditions'] = conditions
        obs, info = env.reset(seed=seed * 1_000_003 + episode, options=options)
        steps = 0
        while True:
            obs, _, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            if terminated or truncated:
                break
        results.append(EpisodeResult(bool(info['is_success']), info['distance'], steps,
                                     int(info['protective_stop'] != '')))
    return results
