"""The training sim against the validation sim: env steps per second on the same task.

Both profiles of ``config/sim_profiles.yaml`` run the same env, the same shipped policy and
the same episodes (seeded goals and cubes); only the MuJoCo options differ. Per profile:
single-env control steps/s (the time in ``env.step`` alone: the simulator's cost, the
policy's inference left out; with it, as training pays it, too), the policy's success over
the episodes, and the gate's batched path (episodes/s, 20 envs stepped together, inference
included). The last line is the ratio of the env-alone rates.

    .venv/bin/python bench/sim_profiles.py [--task pick_place] [--episodes 20]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from simops_core.paths import resolve_resource
from simops_learning import env_class
from simops_learning.rollout import BATCH, run_episodes, run_episodes_batched
from simops_policy.model import load_policy
from simops_sim.sim_profiles import TRAINING, VALIDATION, sim_profile

POLICIES = {'reach': 'models/policy/fr3_reach.pt', 'pick_place': 'models/policy/fr3_pick_place.pt'}


def measure(task: str, profile: str, episodes: int) -> tuple[float, float, float, float]:
    """(env steps/s, with inference, success fraction, batched episodes/s) of ``profile``."""
    policy = resolve_resource(POLICIES[task])
    kind = env_class(task)
    env = kind(card_path=policy.with_suffix('.yaml'), profile=profile)
    model = load_policy(policy, env.card)
    stepping = 0.0

    def step(action: np.ndarray) -> tuple:
        nonlocal stepping
        begun = time.perf_counter()
        out = original(action)
        stepping += time.perf_counter() - begun
        return out

    original, env.step = env.step, step
    started = time.perf_counter()
    results = run_episodes(env, model.infer, range(episodes), seed=0)
    steps = sum(r.steps for r in results)
    rate, overall = steps / stepping, steps / (time.perf_counter() - started)
    success = sum(r.success for r in results) / episodes
    envs = [kind(card_path=policy.with_suffix('.yaml'), profile=profile)
            for _ in range(BATCH)]
    started = time.perf_counter()
    run_episodes_batched(envs, model.infer, range(2 * BATCH), seed=1)
    return rate, overall, success, 2 * BATCH / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--task', choices=tuple(POLICIES), default='pick_place')
    parser.add_argument('--episodes', type=int, default=20, help='single-env episodes')
    args = parser.parse_args()
    print(f'{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; task {args.task}, '
          f'the shipped policy')
    rates = {}
    for profile in (TRAINING, VALIDATION):
        options = ', '.join(f'{k} {v}' for k, v in sim_profile(profile).as_dict().items())
        rate, overall, success, batched = measure(args.task, profile, args.episodes)
        rates[profile] = rate
        print(f'{profile} ({options}):\n  {rate:6.0f} env steps/s ({overall:.0f} with the '
              f'policy\'s inference), success {success:.0%} of {args.episodes} episodes, gate '
              f'batch {batched:.1f} episodes/s')
    print(f'training/validation steps/s ratio {rates[TRAINING] / rates[VALIDATION]:.2f}')


if __name__ == '__main__':
    main()
