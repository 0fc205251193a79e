"""The training sim against the validation sim: env steps per second on the same task.

Both profiles of ``config/sim_profiles.yaml`` run the same env, the same shipped policy and
the same episodes (seeded goals and cubes); only the profiles' options differ (MuJoCo's,
and how often the pick env samples its safety figures). Per profile:
single-env control steps/s (the time in ``env.step`` alone: the simulator's cost, the
policy's inference left out; with it, as training pays it, too), the policy's success over
the episodes, and the gate's batched path (episodes/s, 20 envs stepped together, inference
included). The profiles take turns, episode by episode (and batch by batch), so a machine
whose speed drifts during the run slows both alike. The last line is the ratio of the
env-alone rates.

    .venv/bin/python bench/sim_profiles.py [--task pick_place] [--episodes 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from simops_core.paths import resolve_resource
from simops_learning import env_class
from simops_learning.rollout import BATCH, run_episodes, run_episodes_batched
from simops_policy.model import load_policy
from simops_sim.sim_profiles import TRAINING, VALIDATION, sim_profile

POLICIES = {'reach': 'models/policy/fr3_reach.pt', 'pick_place': 'models/policy/fr3_pick_place.pt'}


def processor() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what ``platform`` knows)."""
    cpuinfo = Path('/proc/cpuinfo')
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith('model name'):
                return line.partition(':')[2].strip()
    return platform.processor() or 'an unknown CPU'


class Profiled:
    """One profile's env, policy and tallies: env-alone and overall time (s), steps, wins."""

    def __init__(self, task: str, profile: str) -> None:
        policy = resolve_resource(POLICIES[task])
        self.kind, self.card, self.profile = env_class(task), policy.with_suffix('.yaml'), profile
        self.env = self.kind(card_path=self.card, profile=profile)
        self.model = load_policy(policy, self.env.card)
        self.stepping = self.overall = self.batched = 0.0
        self.steps = self.successes = self.episodes = self.batched_episodes = 0
        original = self.env.step

        def step(action: np.ndarray) -> tuple:
            begun = time.perf_counter()
            out = original(action)
            self.stepping += time.perf_counter() - begun
            return out

        self.env.step = step
        self.batch = [self.kind(card_path=self.card, profile=profile) for _ in range(BATCH)]

    def episode(self, index: int) -> None:
        """Episode ``index`` (seed 0) in the single env."""
        started = time.perf_counter()
        (result,) = run_episodes(self.env, self.model.infer, range(index, index + 1), seed=0)
        self.overall += time.perf_counter() - started
        self.steps += result.steps
        self.successes += result.success
        self.episodes += 1

    def batch_round(self, index: int) -> None:
        """``BATCH`` episodes (seed 1) from ``index`` on, the gate's envs stepped together."""
        started = time.perf_counter()
        run_episodes_batched(self.batch, self.model.infer, range(index, index + BATCH), seed=1)
        self.batched += time.perf_counter() - started
        self.batched_episodes += BATCH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--task', choices=tuple(POLICIES), default='pick_place')
    parser.add_argument('--episodes', type=int, default=20, help='single-env episodes')
    args = parser.parse_args()
    print(f'{processor()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; '
          f'task {args.task}, the shipped policy; the two profiles take turns, episode by episode')
    runs = [Profiled(args.task, profile) for profile in (TRAINING, VALIDATION)]
    for index in range(args.episodes):
        for run in runs:
            run.episode(index)
    for index in range(0, 2 * BATCH, BATCH):
        for run in runs:
            run.batch_round(index)
    for run in runs:
        options = ', '.join(f'{k} {v}' for k, v in sim_profile(run.profile).as_dict().items())
        print(f'{run.profile} ({options}):\n  {run.steps / run.stepping:6.0f} env steps/s '
              f'({run.steps / run.overall:.0f} with the policy\'s inference), success '
              f'{run.successes / run.episodes:.0%} of {run.episodes} episodes, gate batch '
              f'{run.batched_episodes / run.batched:.1f} episodes/s')
    training, validation = (run.steps / run.stepping for run in runs)
    print(f'training/validation steps/s ratio {training / validation:.2f}')


if __name__ == '__main__':
    main()
