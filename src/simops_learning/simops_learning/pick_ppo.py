"""PPO fine-tuning of the pick-and-place policy with RSL-RL (``rsl-rl-lib``), on top of DAgger.

RSL-RL's :class:`~rsl_rl.runners.OnPolicyRunner` trains the policy's decision network (the
MLP of :class:`~simops_learning.pick_network.PickPolicy`) as its actor: RSL-RL's
``MLPModel`` with the same layers and activation, its weights copied in from the cloned
network and back out after training, and a Gaussian of ``init_std`` around it. The
environment is :class:`DecisionEnv`: ``num_envs`` copies of ``SimOps/FR3PickPlace-v0`` in
this process at full randomisation (its reward with the improve stage's penalty terms, if
any: :mod:`simops_learning.reward_terms`), observed through the network's standardised inputs and
acted on through its decision (the grasp point's step and the gripper command), which the
policy's own task-space law turns into joint deltas. What PPO changes is therefore exactly
what the exported module runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

import numpy as np
import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict

from simops_learning.pick_env import MAX_EPISODE_STEPS, FR3PickPlaceEnv
from simops_learning.pick_network import MOVE_UNIT, PickPolicy
from simops_learning.ppo_settings import PPOConfig
from simops_learning.seeding import seeded_torch
from simops_sim.randomization import DomainRandomization
from simops_sim.sim_profiles import TRAINING

DECISION_SIZE = 4   # the grasp point's step (3, in MOVE_UNIT) and the gripper command


class DecisionEnv(VecEnv):
    """Pick-and-place envs seen through ``policy``'s decision; see the module docstring.

    Observations: group ``policy``, (num_envs, 15) standardised network inputs. Actions:
    (num_envs, 4). Episodes reset themselves, seeded from ``seed`` on.
    """

    def __init__(self, policy: PickPolicy, num_envs: int, randomization: DomainRandomization,
                 seed: int, robot: str = 'fr3', sim_params: str | None = None,
                 profile: str = TRAINING, reward_terms: Mapping[str, float] | None = None
                 ) -> None:
        self.policy = policy
        self.envs = [FR3PickPlaceEnv(randomization=randomization, robot=robot,
                                     sim_params_file=sim_params, profile=profile,
                                     reward_terms=reward_terms, history=policy.history)
                     for _ in range(num_envs)]
        self.num_envs, self.num_actions = num_envs, DECISION_SIZE
        self.max_episode_length = MAX_EPISODE_STEPS
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.device, self.cfg = 'cpu', {}
        self._seeds = itertools.count(seed)
        self.successes: list[bool] = []
        self._observations = np.stack([self._reset(env) for env in self.envs])
        self.get_observations()

    def _reset(self, env: FR3PickPlaceEnv) -> np.ndarray:
        return env.reset(seed=next(self._seeds), options={'level': 1.0})[0]

    def get_observations(self) -> TensorDict:
        """The network's standardised inputs of every env (what :meth:`step` acts from)."""
        with torch.no_grad():
            features, self._q, self._cube_yaw = self.policy.inputs(
                torch.as_tensor(self._observations))
        standard = (features - self.policy.input_mean) / self.policy.input_std
        return TensorDict({'policy': standard}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply decisions (num_envs, 4); reset finished episodes."""
        with torch.no_grad():   # at the joints and cube of the last get_observations()
            arm = self.policy.law(self._q, actions[:, :3] * MOVE_UNIT, self._cube_yaw)
            full = torch.cat([arm, torch.clamp(actions[:, 3:], -1.0, 1.0)], dim=1).numpy()
        rewards = torch.zeros(self.num_envs)
        dones = torch.zeros(self.num_envs, dtype=torch.long)
        timeouts = torch.zeros(self.num_envs)
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(full[i].astype(float))
            rewards[i] = reward
            self.episode_length_buf[i] += 1
            if terminated or truncated:
                dones[i], timeouts[i] = 1, float(truncated and not terminated)
                self.successes.append(bool(info['is_success']))
                obs = self._reset(env)
                self.episode_length_buf[i] = 0
            self._observations[i] = obs
        recent = self.successes[-100:]
        log = {'/pick_place/success': float(np.mean(recent)) if recent else 0.0}
        return self.get_observations(), rewards, dones, {'time_outs': timeouts, 'log': log}


def fine_tune(policy: PickPolicy, iterations: int, randomization: DomainRandomization,
              hidden: tuple[int, ...], seed: int, config: PPOConfig | None = None,
              log: Callable[[str], None] = print, sim_params: str | None = None,
              profile: str = TRAINING, reward_terms: Mapping[str, float] | None = None
              ) -> float:
    """Fine-tune ``policy``'s network in place for ``iterations`` PPO iterations.

    ``sim_params``: the SimParams YAML of the training physics (None: nominal); ``profile``
    the simulator's options (:mod:`simops_sim.sim_profiles`); ``reward_terms``: penalty
    weights by failure mode added to the env's reward (:mod:`simops_learning.reward_terms`).

    ``config.critic_warmup`` iterations first train only the critic.

    Returns the success rate of the episodes that ended during training.
    """
    c = config or PPOConfig()
    seeded_torch(seed)   # RSL-RL samples its actions from torch's global stream
    env = DecisionEnv(policy, c.num_envs, randomization, seed * 1_000_003 + 700_000,
                      sim_params=sim_params, profile=profile, reward_terms=reward_terms)
    cfg = {
        'algorithm': {'class_name': 'PPO', 'learning_rate': c.learning_rate,
                      'num_learning_epochs': c.num_learning_epochs,
                      'num_mini_batches': c.num_mini_batches, 'entropy_coef': c.entropy_coef,
                      'desired_kl': c.desired_kl, 'schedule': 'fixed'},
        'actor': {'class_name': 'MLPModel', 'hidden_dims': list(hidden), 'activation': 'tanh',
                  'distribution_cfg': {'class_name': 'GaussianDistribution',
                                       'init_std': c.init_std}},
        'critic': {'class_name': 'MLPModel', 'hidden_dims': list(c.critic_hidden),
                   'activation': 'tanh'},
        'obs_groups': {'actor': ['policy'], 'critic': ['policy']},
        'num_steps_per_env': c.num_steps_per_env, 'save_interval': max(1, iterations),
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device='cpu')
    actor = runner.alg.get_policy()
    actor.mlp.load_state_dict(policy.body.state_dict())
    # The critic starts untrained: its first advantages would drag the cloned actor off, so it
    # learns the returns of the cloned policy first (a frozen actor gets no Adam steps).
    actor.requires_grad_(False)
    runner.learn(c.critic_warmup)
    actor.requires_grad_(True)
    runner.learn(iterations)
    policy.body.load_state_dict(actor.mlp.state_dict())
    success = float(np.mean(env.successes)) if env.successes else 0.0
    log(f'PPO (rsl-rl-lib): {c.critic_warmup} critic and {iterations} PPO iterations x '
        f'{c.num_envs} envs x '
        f'{c.num_steps_per_env} steps, {len(env.successes)} episodes ended, {success:.0%} '
        'succeeded during training')
    return success
