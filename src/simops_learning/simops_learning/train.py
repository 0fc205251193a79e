"""``simops-train``: DAgger from the IK expert under domain randomisation; exports the policy.

Iteration 0 rolls out the expert (:mod:`simops_learning.expert`); every later iteration rolls
out the learner, executing the expert's action instead with probability ``beta = 0.5 ** i``
per step, and the expert labels every visited state. The randomisation level follows a
linear curriculum over the first half of the iterations. The MLP is refit on the aggregate
after each iteration. Rollouts run in worker processes (one env each, one torch thread).
Same seed, same worker count → same data and the same weights.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simops_learning.domain import DomainRandomization, load_randomization
from simops_learning.expert import ExpertGains, ReachExpert
from simops_learning.network import MlpPolicy, export_policy
from simops_learning.reach_env import FR3ReachEnv

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class TrainConfig:
    """DAgger settings: sizes are counts, ``learning_rate`` per Adam step."""

    seed: int = 0
    iterations: int = 10
    episodes: int = 96                 # per iteration, over all workers
    max_steps: int = 160               # per rollout episode
    hidden: tuple[int, ...] = (256, 256)
    epochs: int = 30                   # passes over the aggregate per iteration (capped)
    max_updates: int = 4000            # Adam steps per iteration at most
    batch: int = 512
    learning_rate: float = 1e-3
    action_noise: float = 0.1          # std of the noise on executed learner actions
    workers: int = 2
    randomization: DomainRandomization = field(default_factory=DomainRandomization)


@dataclass(frozen=True)
class RolloutJob:
    """One worker's share of an iteration."""

    seeds: tuple[int, ...]
    beta: float
    level: float
    max_steps: int
    action_noise: float
    randomization: DomainRandomization
    hidden: tuple[int, ...]
    weights: dict[str, torch.Tensor] | None


@dataclass
class RolloutData:
    """Visited observations (N, obs), expert labels (N, act) and per-episode outcomes."""

    observations: np.ndarray
    labels: np.ndarray
    successes: list[bool]
    steps: int


def collect(job: RolloutJob) -> RolloutData:
    """Run ``job``'s episodes with the mixed policy; label every state with the expert."""
    torch.set_num_threads(1)
    env = FR3ReachEnv(randomization=job.randomization)
    expert = ReachExpert(env.physics.model, env.physics.index, env.spec_robot,
                         env.card.action.scale, ExpertGains())
    learner = None
    if job.weights is not None:
        learner = MlpPolicy(env.card.observation_size, env.card.action.size, job.hidden)
        learner.load_state_dict(job.weights)
        learner.eval()
    observations, labels, successes = [], [], []
    for seed in job.seeds:
        rng = np.random.default_rng(seed)
        obs, info = env.reset(seed=seed, options={'level': job.level})
        for _ in range(job.max_steps):
            label = expert.act(env.pipeline.raw.joint_position, env.goal)
            observations.append(obs)
            labels.append(label)
            action = label
            if learner is not None and rng.random() >= job.beta:
                with torch.inference_mode():
                    action = learner(torch.as_tensor(obs)[None])[0].numpy().astype(float)
                action = action + rng.normal(0.0, job.action_noise, action.shape)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes.append(bool(info['is_success']))
    return RolloutData(np.asarray(observations, np.float32), np.asarray(labels, np.float32),
                       successes, len(observations))


def fit(policy: MlpPolicy, observations: np.ndarray, labels: np.ndarray, config: TrainConfig,
        generator: torch.Generator) -> float:
    """Refit ``policy`` on the aggregate by MSE; return the last epoch's mean loss."""
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    x, y = torch.as_tensor(observations), torch.as_tensor(labels)
    count = len(x)
    updates = min(config.max_updates, config.epochs * max(count // config.batch, 1))
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, updates)
    policy.train()
    losses = []
    for update in range(updates):
        if update % max(count // config.batch, 1) == 0:
            order = torch.randperm(count, generator=generator)
        start = (update % max(count // config.batch, 1)) * config.batch
        batch = order[start:start + config.batch]
        loss = torch.nn.functional.mse_loss(policy(x[batch]), y[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    policy.eval()
    return float(np.mean(losses[-max(count // config.batch, 1):]))


def train(config: TrainConfig, log: Any = print) -> tuple[MlpPolicy, dict[str, Any]]:
    """Run DAgger; return the policy and the training metadata for its card."""
    torch.set_num_threads(1)
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    probe = FR3ReachEnv()
    policy = MlpPolicy(probe.card.observation_size, probe.card.action.size, config.hidden)
    started = time.monotonic()
    observations = np.zeros((0, probe.card.observation_size), np.float32)
    labels = np.zeros((0, probe.card.action.size), np.float32)
    history = []
    context = multiprocessing.get_context('spawn')
    with context.Pool(config.workers) as pool:
        for iteration in range(config.iterations):
            beta = 0.5 ** iteration
            level = min(1.0, iteration / max(config.iterations // 2, 1))
            seeds = [config.seed * 1_000_003 + iteration * 10_000 + i
                     for i in range(config.episodes)]
            weights = None if iteration == 0 else {
                k: v.clone() for k, v in policy.state_dict().items()}
            jobs = [RolloutJob(tuple(seeds[w::config.workers]), beta, level, config.max_steps,
                               config.action_noise, config.randomization, config.hidden,
                               weights) for w in range(config.workers)]
            results = pool.map(collect, jobs)
            observations = np.concatenate([observations, *(r.observations for r in results)])
            labels = np.concatenate([labels, *(r.labels for r in results)])
            successes = [s for r in results for s in r.successes]
            if iteration == 0:
                policy.set_normalization(observations)
            loss = fit(policy, observations, labels, config, generator)
            rate = float(np.mean(successes))
            history.append({'iteration': iteration, 'beta': beta, 'level': level,
                            'samples': len(observations), 'rollout_success': rate,
                            'loss': loss})
            log(f'iteration {iteration + 1}/{config.iterations}: beta {beta:.3f}, level '
                f'{level:.2f}, {len(observations)} samples, rollout success {rate:.0%}, '
                f'loss {loss:.5f}, {time.monotonic() - started:.0f} s')
    metadata = {
        'framework': f'torch {torch.__version__}', 'algorithm': 'dagger',
        'expert': 'ik-dls joint-space (simops_learning.expert)', 'seed': config.seed,
        'iterations': config.iterations, 'episodes_per_iteration': config.episodes,
        'samples': len(observations), 'hidden': list(config.hidden),
        'randomization': asdict(config.randomization),
        'wall_time_s': round(time.monotonic() - started, 1),
        'final_rollout_success': history[-1]['rollout_success'],
    }
    return policy, metadata


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-train --help``."""
    parser = argparse.ArgumentParser(
        prog='simops-train', description='Train the FR3 reach policy by DAgger from the IK '
        'expert and export .pt, .pt2 and the policy card.')
    parser.add_argument('--out', default='models/policy/fr3_reach',
                        help='output stem: writes STEM.pt, STEM.pt2, STEM.yaml, STEM.pt2.yaml')
    defaults = TrainConfig()
    parser.add_argument('--seed', type=int, default=defaults.seed)
    parser.add_argument('--iterations', type=int, default=defaults.iterations)
    parser.add_argument('--episodes', type=int, default=defaults.episodes,
                        help='rollout episodes per iteration')
    parser.add_argument('--workers', type=int, default=defaults.workers)
    parser.add_argument('--max-updates', type=int, default=defaults.max_updates,
                        help='Adam steps per iteration at most')
    parser.add_argument('--randomization', type=Path,
                        help='YAML with a "randomization" mapping (e.g. the dr_suggestion.yaml '
                             'that simops-validate writes); default: the built-in ranges')
    args = parser.parse_args(argv)
    if min(args.iterations, args.episodes, args.workers, args.max_updates) < 1:
        print('simops-train: error: --iterations, --episodes, --workers and --max-updates '
              'must be >= 1', file=sys.stderr)
        return EXIT_USAGE
    try:
        randomization = (load_randomization(args.randomization) if args.randomization
                         else DomainRandomization())
    except ValueError as exc:
        print(f'simops-train: error: {exc}', file=sys.stderr)
        return EXIT_USAGE
    config = TrainConfig(seed=args.seed, iterations=args.iterations, episodes=args.episodes,
                         workers=args.workers, max_updates=args.max_updates,
                         randomization=randomization)
    policy, metadata = train(config, log=lambda line: print(line, flush=True))
    stem = Path(args.out)
    try:
        paths = export_policy(policy, FR3ReachEnv().spec_robot, stem, metadata)
    except OSError as exc:
        print(f'simops-train: error: cannot write {stem}: {exc}', file=sys.stderr)
        return EXIT_FAILED
    print(f'wrote {", ".join(str(p) for p in paths)} in {metadata["wall_time_s"]} s')
    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
