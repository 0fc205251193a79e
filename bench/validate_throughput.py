"""Gate throughput: physics steps per second inside `simops-validate` against raw stepping.

Raw stepping is the arm scene's ``mj_step`` with nothing around it, once in C
(``mujoco.rollout``, one thread) and once from a Python loop. In one process, the gate's
episodes (policy, safety pipeline, the controller's law, reflexes: everything) run one env
at a time (``run_episodes``, the path before #18) and ``--batch`` envs stepped together
(``run_episodes_batched``). Then the whole gate (``validate``) with local worker processes
and on a Ray cluster started on 127.0.0.1, 1 and 2 workers, process start-up included.
Physics steps are counted as 50 per 20 Hz control step. The in-process runs are repeated
with a learned sensor model (``bench/learned_sensor.py``: the fitted model's shape, a 40 ms
window at 1 kHz) named by the physics, which the envs run in the actuator law (one forward
pass for all batched envs per step); the target is at most 30 % fewer steps/s.

    .venv/bin/python bench/validate_throughput.py [--episodes 10] [--steps 20000] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
from learned_sensor import write_bench_model
from mujoco import rollout

from simops_core.executor import LocalExecutor, RayExecutor, isolate_for_local_ray
from simops_core.paths import resolve_resource
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.rollout import BATCH, run_episodes, run_episodes_batched
from simops_learning.validate import validate
from simops_policy.model import load_policy
from simops_sim.randomization import Conditions
from simops_sim.sim_profiles import VALIDATION, apply_profile

POLICY = Path('models/policy/fr3_reach.pt')
GRID = {'friction': [0.3, 1.5], 'delay': [0.0, 2.0]}   # 4 configurations
PHYSICS_PER_CONTROL = 50   # 1 kHz physics, 20 Hz control


def raw_rates(steps: int) -> tuple[float, float]:
    """Physics steps/s of the bare scene in C (mujoco.rollout) and from a Python loop.

    The scene runs with the gate's options (the validation sim).
    """
    model = apply_profile(mujoco.MjModel.from_xml_path(
        str(resolve_resource('models/fr3/scene.xml'))), VALIDATION)
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


def in_process(episodes: int, batch: int, sim_params: Path | None = None
               ) -> tuple[float, float]:
    """Physics steps/s of the gate's episodes in this process: one env, and ``batch`` envs.

    ``sim_params``: the physics (None: nominal), e.g. one naming a learned sensor model.
    """
    conditions = Conditions(friction=0.8, delay=1)
    envs = [FR3ReachEnv(card_path=POLICY.with_suffix('.yaml'), conditions=conditions,
                        sim_params_file=sim_params)
            for _ in range(batch)]
    model = load_policy(POLICY, envs[0].card)
    rates = []
    for run in (lambda: run_episodes(envs[0], model.infer, range(episodes), 0),
                lambda: run_episodes_batched(envs, model.infer, range(episodes), 0)):
        started = time.perf_counter()
        results = run()
        rates.append(sum(r.steps for r in results) * PHYSICS_PER_CONTROL
                     / (time.perf_counter() - started))
    return rates[0], rates[1]


def gate_rate(episodes: int, executor: LocalExecutor | RayExecutor) -> tuple[float, float]:
    """Physics steps/s of the gate over GRID on ``executor``; and its wall s."""
    report = validate(POLICY, POLICY.with_suffix('.yaml'), None, GRID, episodes, 1,
                      seed=0, progress=False, executor=executor)
    control_steps = sum(c.mean_steps * c.episodes for c in report.configs)
    return control_steps * PHYSICS_PER_CONTROL / report.wall_time_s, report.wall_time_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=10, help='episodes per configuration')
    parser.add_argument('--steps', type=int, default=20000, help='raw physics steps')
    parser.add_argument('--batch', type=int, default=BATCH, help='envs stepped together')
    parser.add_argument('--no-ray', action='store_true', help='skip the Ray cluster runs')
    args = parser.parse_args()
    if not args.no_ray:   # Ray listens on every interface: run in a private network namespace
        isolate_for_local_ray(sys.argv)
    cores = os.cpu_count() or 1
    print(f'{cores} cores, load average {os.getloadavg()[0]:.1f}')
    in_c, in_python = raw_rates(args.steps)
    print(f'raw mj_step, C (mujoco.rollout, 1 thread): {in_c:9.0f} steps/s')
    print(f'raw mj_step, Python loop:                  {in_python:9.0f} steps/s')
    alone, together = in_process(4 * args.episodes, args.batch)
    print(f'gate episodes in one process, one env:     {alone:9.0f} physics steps/s '
          f'({alone / in_c:5.1%} of raw C)')
    print(f'gate episodes in one process, {args.batch:2d} envs:    {together:9.0f} physics '
          f'steps/s ({together / in_c:5.1%} of raw C)')
    with tempfile.TemporaryDirectory() as folder:
        alone_m, together_m = in_process(4 * args.episodes, args.batch,
                                         write_bench_model(Path(folder)))
    for label, rate, base in (('one env', alone_m, alone),
                              (f'{args.batch:2d} envs', together_m, together)):
        print(f'  with a learned sensor model, {label}: {rate:9.0f} physics steps/s '
              f'({rate / base - 1:+.1%} against without; target >= -30 %)')
    configs = len(GRID['friction']) * len(GRID['delay'])
    for workers in sorted({1, cores}):
        rate, wall = gate_rate(args.episodes, LocalExecutor(workers))
        print(f'gate, {workers} local worker(s), {configs} configs x {args.episodes} episodes, '
              f'process start-up included: {rate:9.0f} physics steps/s in {wall:.1f} s, '
              f'{rate / workers / in_c:5.1%} of raw C per core')
    if args.no_ray:
        return
    import ray
    for workers in sorted({1, cores}):
        # a cluster on 127.0.0.1 with this many CPUs, its workers warmed by a first small run
        ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address='127.0.0.1',
                 log_to_driver=False, configure_logging=False)
        try:
            gate_rate(1, RayExecutor('local'))
            rate, wall = gate_rate(args.episodes, RayExecutor('local'))
        finally:
            ray.shutdown()
        print(f'gate, Ray cluster on 127.0.0.1 with {workers} worker(s), warm, {configs} '
              f'configs x {args.episodes} episodes: {rate:9.0f} physics steps/s in {wall:.1f} '
              f's, {rate / workers / in_c:5.1%} of raw C per core')


if __name__ == '__main__':
    main()
