"""The PPO fine-tune's settings (RSL-RL's names), apart from :mod:`simops_learning.pick_ppo`.

Kept here so that reading a training configuration does not import RSL-RL: ``rsl_rl`` and
``tensordict`` (with sympy) take about 2.6 s to import on two shared cores, which every
``simops-train`` run paid, a refused argument included, although only ``--ppo-iterations``
uses them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PPOConfig:
    """PPO settings (RSL-RL's names): rollout length per env and iteration, and the update."""

    num_envs: int = 8
    num_steps_per_env: int = 64
    critic_warmup: int = 20          # iterations that train only the critic, the actor frozen
    learning_rate: float = 1e-5
    num_learning_epochs: int = 4
    num_mini_batches: int = 4
    entropy_coef: float = 0.0
    desired_kl: float = 0.01
    init_std: float = 0.05
    critic_hidden: tuple[int, ...] = (256, 256)
