"""Gate throughput: physics steps per second inside `simops-validate` against raw stepping.

Raw stepping is the arm scene's ``mj_step`` with nothing around it, once in C
(``mujoco.rollout``, one thread) and once from a Python loop. The gate figure counts the
physics steps its episodes simulated (50 per 20 Hz control step) over its wall time,
process start-up included, with one worker and with one per core; the share of raw C
stepping per core is what batching (#18) is meant to raise.

    .venv/bin/python bench/validate_throughput.py [--episodes 10] [--steps 20000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import mujoco
import numpy as np
from mujoco import rollout

from simops_core.paths import resolve_resource
from simops_learning.validate import validate

POLICY = Path('models/policy/fr3_reach.pt')
GRID = {'friction': [0.3, 1.5], 'delay': [0.0, 2.0]}   # 4 configurations
PHYSICS_PER_CONTROL = 50   # 1 kHz physics, 20 Hz control


def raw_rates(steps: int) -> tuple[float, float]:
    """Physics steps/s of the bare scene: in C (mujoco.rollout) and from a Python loop."""
    model = mujoco.MjModel.from_xml_path(str(resolve_resource('models/fr3/scene.xml')))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key('home').id)
    mujoco.mj_forward(model, data)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    control = np.tile(data.ctrl, (steps, 1))[None]
    started = time.perf_counter()
    rollout.rollout(model, data, state[None], control)
    in_c = steps / (time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return in_c, steps / (time.perf_counter() - started)


def gate_rate(episodes: int, workers: int) -> tuple[float, float]:
    """Physics steps/s of the gate over GRID with ``workers`` processes; and its wall s."""
    report = validate(POLICY, POLICY.with_suffix('.yaml'), None, GRID, episodes, workers,
                      seed=0, progress=False)
    control_steps = sum(c.mean_steps * c.episodes for c in report.configs)
    return control_steps * PHYSICS_PER_CONTROL / report.wall_time_s, report.wall_time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=10, help='episodes per configuration')
    parser.add_argument('--steps', type=int, default=20000, help='raw physics steps')
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f'{cores} cores, load average {os.getloadavg()[0]:.1f}')
    in_c, in_python = raw_rates(args.steps)
    print(f'raw mj_step, C (mujoco.rollout, 1 thread): {in_c:9.0f} steps/s')
    print(f'raw mj_step, Python loop:                  {in_python:9.0f} steps/s')
    for workers in sorted({1, cores}):
        rate, wall = gate_rate(args.episodes, workers)
        print(f'gate, {workers} worker(s), {len(GRID["friction"]) * len(GRID["delay"])} '
              f'configs x {args.episodes} episodes: {rate:9.0f} physics steps/s in {wall:.1f} s, '
              f'{rate / workers / in_c:5.1%} of raw C stepping per core')


if __name__ == '__main__':
    main()
