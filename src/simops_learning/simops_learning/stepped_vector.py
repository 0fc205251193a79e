"""A Gymnasium vector env whose sub-envs' physics step together (no rclpy).

``gymnasium.make_vec('SimOps/FR3Reach-v0', num_envs=16, vectorization_mode='vector_entry_point')``
(or the pick-and-place id) builds :class:`SteppedTogetherVectorEnv`: ``num_envs`` envs in this
process, each step one policy tick per env and one control period of all their physics
advanced together (:func:`simops_sim.physics_batch.step_together`), so each sub-env moves
exactly as it would alone. Autoreset is ``SAME_STEP``: a finished sub-env is reset in the
step that ended it; its last observation and info are in ``infos['final_obs']`` and
``infos['final_info']``.

Shapes: observations (num_envs, card.observation_size) float32, actions
(num_envs, card.action.size), rewards (num_envs,) float64, flags (num_envs,) bool.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from simops_learning.reach_env import FR3ReachEnv
from simops_sim.physics_batch import step_together


class SteppedTogetherVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs of class ``kind`` (built with ``kwargs``); see the module docstring."""

    metadata: dict[str, Any] = {'autoreset_mode': AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, num_envs: int, kind: type[FR3ReachEnv] = FR3ReachEnv,
                 **kwargs: Any) -> None:
        self.envs = [kind(**kwargs) for _ in range(num_envs)]
        self.num_envs = num_envs
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(first.observation_space, num_envs)
        self.action_space = batch_space(first.action_space, num_envs)

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env (``seed`` + i for sub-env i when ``seed`` is an int)."""
        seeds = (seed if isinstance(seed, list) else
                 [None if seed is None else seed + i for i in range(self.num_envs)])
        observations, infos = [], {}
        for i, (env, env_seed) in enumerate(zip(self.envs, seeds, strict=True)):
            obs, info = env.reset(seed=env_seed, options=options)
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return np.stack(observations), infos

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                 np.ndarray, dict[str, Any]]:
        """One tick per sub-env and one control period of all their physics."""
        for env, action in zip(self.envs, actions, strict=True):
            env.begin_step(np.asarray(action))
        for chunk in self.envs[0].chunks():
            step_together([env.physics for env in self.envs], chunk)
            for env in self.envs:
                env._sample(chunk)
        n = self.num_envs
        observations = []
        rewards, terminated, truncated = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            obs, rewards[i], terminated[i], truncated[i], info = env.finish_step()
            if terminated[i] or truncated[i]:
                info = {'final_obs': obs, 'final_info': info}
                obs, _ = env.reset()
            observations.append(obs)
            infos = self._add_info(infos, info, i)
        return np.stack(observations), rewards, terminated, truncated, infos


def reach_vector(num_envs: int, **kwargs: Any) -> SteppedTogetherVectorEnv:
    """``SimOps/FR3Reach-v0``'s vector entry point."""
    return SteppedTogetherVectorEnv(num_envs, FR3ReachEnv, **kwargs)


def pick_vector(num_envs: int, **kwargs: Any) -> SteppedTogetherVectorEnv:
    """``SimOps/FR3PickPlace-v0``'s vector entry point."""
    from simops_learning.pick_env import FR3PickPlaceEnv
    return SteppedTogetherVectorEnv(num_envs, FR3PickPlaceEnv, **kwargs)
