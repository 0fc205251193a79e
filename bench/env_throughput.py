"""Env throughput: SimOps/FR3Reach-v0 and SimOps/FR3PickPlace-v0 control steps per second.

Each control step is one policy-node tick (observation, safety pipeline) and 50 MuJoCo
physics steps (0.05 s at 1 kHz); pick-and-place also samples contact forces and joint
speeds every 10 physics steps. Actions are uniform random; episodes auto-reset. Single env,
then sync and async vector envs.

    .venv/bin/python bench/env_throughput.py [--steps 2000] [--envs 2]
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np

import simops_learning  # noqa: F401 - registers the env
from simops_learning.pick_env import ENV_ID as PICK_ENV_ID
from simops_learning.reach_env import ENV_ID


def single(env_id: str, steps: int) -> float:
    env = gym.make(env_id)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    started = time.perf_counter()
    for _ in range(steps):
        *_, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 8).astype(np.float32))
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - started)
    env.close()
    return rate


def vectorised(env_id: str, steps: int, envs: int, mode: str) -> float:
    vec = gym.make_vec(env_id, num_envs=envs, vectorization_mode=mode)
    rng = np.random.default_rng(0)
    vec.reset(seed=0)
    rounds = max(1, steps // envs)
    started = time.perf_counter()
    for _ in range(rounds):
        vec.step(rng.uniform(-1, 1, (envs, 8)).astype(np.float32))
    rate = rounds * envs / (time.perf_counter() - started)
    vec.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=2000, help='control steps per case')
    parser.add_argument('--envs', type=int, default=2, help='sub-envs of the vector env')
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f'{os.cpu_count()} cores, load average {load:.1f}')
    for env_id in (ENV_ID, PICK_ENV_ID):
        print(env_id)
        rate = single(env_id, args.steps)
        print(f'  single env:             {rate:7.0f} steps/s ({rate * 0.05:.1f}x real time)')
        for mode in ('sync', 'async'):
            rate = vectorised(env_id, args.steps, args.envs, mode)
            print(f'  {mode:5s} vector, {args.envs} envs:  {rate:7.0f} steps/s '
                  f'({rate * 0.05:.1f}x real time)')


if __name__ == '__main__':
    main()
