"""Does the gate predict reality? Policies of graded quality, measured and predicted.

Five reach policies of graded quality: four training checkpoints (``simops-train`` with
growing budgets, :data:`BUDGETS`) and the shipped policy. For each:

- **measured**: ``simops-launch real_robot standin:=true allow_unvalidated:=true`` (the
  checkpoints carry no promotion record; the override is what it is for), in a DDS domain
  of its own on loopback. Per episode the policy is disabled, the stand-in reset to its home
  keyframe (``/standin/reset``), a goal published (``episode_goal``, the same ones the sim
  runs) and the policy enabled; success: the flange within the env's success radius before
  the env's episode length (10 s). The stand-in's hidden physics play the real arm.
- **predicted**: ``simops-validate`` in the nominal validation sim and in the calibrated
  one (``--sim-params``, a fit of the stand-in such as ``make demo``'s
  ``demo_out/pipeline/calibration.yaml``), one cell (the nominal conditions), the same
  number of episodes.

Prints each policy's measured and predicted success, then per sim Pearson's r and the MMRV
(mean maximum rank violation) of SIMPLER (Li et al. 2024, arXiv 2405.05941:
``MMRV = 1/N sum_i max_j |R_i - R_j| 1[(S_i < S_j) != (R_i < R_j)]``, R real and S sim
success). Lower MMRV and higher r predict better.

    .venv/bin/python bench/gate_prediction.py --sim-params demo_out/pipeline/calibration.yaml \
        [--episodes 20] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from std_srvs.srv import Trigger

from simops_bringup.demo.ros_operator import Operator
from simops_bringup.demo.steps import Child
from simops_core.dds_isolation import claim_domain_id, isolated_env
from simops_core.robot_spec import load_robot_spec
from simops_core.waiting import wait_until
from simops_learning.reach_env import MAX_EPISODE_STEPS, SUCCESS_RADIUS, episode_goal

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SHIPPED = REPO / 'models/policy/fr3_reach.pt'
BUDGETS = ((20, 20), (60, 60), (200, 200), (800, 1000))   # simops-train (goals, updates)
PERIOD = 0.05           # s, the control period
EPISODE = MAX_EPISODE_STEPS * PERIOD   # s: the env's episode length
STARTUP = 60.0          # s for the launch to come up
SEED = 0                # the goals' seed, in the sim and on the stand-in


def train_checkpoints(folder: Path) -> list[Path]:
    """The four training checkpoints (tiny to modest budgets), then the shipped policy."""
    policies = []
    for goals, updates in BUDGETS:
        out = folder / f'reach_g{goals}_u{updates}'
        if not out.with_suffix('.pt').is_file():
            subprocess.run([str(BIN / 'simops-train'), '--task', 'reach', '--goals', str(goals),
                            '--updates', str(updates), '--eval-episodes', '1', '--workers', '2',
                            '--seed', '0', '--out', str(out)], check=True,
                           stdout=subprocess.DEVNULL)
        print(f'  checkpoint {out.name}', flush=True)
        policies.append(out.with_suffix('.pt'))
    return [*policies, SHIPPED]


def predicted(policy: Path, episodes: int, folder: Path, sim_params: Path | None) -> float:
    """simops-validate's mean success on one nominal cell (with ``sim_params``: calibrated)."""
    out = folder / ('calibrated' if sim_params else 'nominal') / policy.stem
    report = out / 'validation.json'
    if not report.is_file():
        subprocess.run([str(BIN / 'simops-validate'), '--policy', str(policy), '--grid',
                        'servo_gain=1', '--episodes', str(episodes), '--seed', str(SEED),
                        '--workers', '2', '--out', str(out), '--verdict-exit-zero',
                        *(['--sim-params', str(sim_params)] if sim_params else [])],
                       check=True, stdout=subprocess.DEVNULL)
    return float(json.loads(report.read_text())['mean_success'])


def measured(policy: Path, episodes: int, env: dict[str, str], log: Path) -> float:
    """The policy's success over ``episodes`` reset episodes on the stand-in."""
    launch = [str(BIN / 'simops-launch'), 'real_robot', 'standin:=true', 'record:=false',
              f'policy:={policy}', 'allow_unvalidated:=true']
    spec = load_robot_spec('fr3')
    successes = 0
    with Child(launch, log, env) as graph:
        operator = Operator(spec.base_frame)
        try:
            if not operator.wait_for_arm(STARTUP) or not graph.running():
                raise RuntimeError(f'the stand-in did not come up; see {log}')
            for episode in range(episodes):
                operator.enable(False)
                # the policy brakes to rest first: a braking command that arrived after the
                # reset would ask the arm to jump back (a protective stop)
                if not operator.wait_state('DISABLED', 10.0):
                    raise RuntimeError(f'the policy did not come to rest ({operator.state}); '
                                       f'see {log}')
                operator.call(Trigger, '/standin/reset', Trigger.Request())
                time.sleep(0.5)   # the reset's first joint states reach the policy
                goal = episode_goal(SEED, episode)
                operator.publish_goal(goal)
                operator.enable(True)
                reached = wait_until(lambda g=goal: operator.distance(g) < SUCCESS_RADIUS,
                                     EPISODE, interval=0.01)
                successes += bool(reached)
        finally:
            operator.enable(False)
            operator.close()
    return successes / episodes


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two (N,) arrays (nan when either is constant)."""
    if np.std(x) == 0.0 or np.std(y) == 0.0:
        return float('nan')
    return float(np.corrcoef(x, y)[0, 1])


def mmrv(real: np.ndarray, sim: np.ndarray) -> float:
    """SIMPLER's mean maximum rank violation of sim success ``sim`` against ``real`` (N,)."""
    worst = [max((abs(real[i] - real[j]) for j in range(len(real))
                  if (sim[i] < sim[j]) != (real[i] < real[j])), default=0.0)
             for i in range(len(real))]
    return float(np.mean(worst))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sim-params', type=Path, required=True,
                        help='a fit of the stand-in (make demo: demo_out/pipeline/'
                             'calibration.yaml)')
    parser.add_argument('--episodes', type=int, default=20, help='episodes per policy and sim')
    parser.add_argument('--keep', type=Path, help='folder for checkpoints and reports '
                        '(default: a temporary one)')
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix='gate_prediction_'))
    folder.mkdir(parents=True, exist_ok=True)
    print(f'{os.cpu_count()} cores; {args.episodes} episodes per policy and sim; {folder}',
          flush=True)
    policies = train_checkpoints(folder)
    claim = claim_domain_id()
    env = isolated_env(claim.domain_id)
    os.environ.update(env)
    rows = []
    try:
        for policy in policies:
            real = measured(policy, args.episodes, env, folder / f'{policy.stem}_launch.log')
            nominal = predicted(policy, args.episodes, folder, None)
            calibrated = predicted(policy, args.episodes, folder, args.sim_params.resolve())
            rows.append((policy.stem, real, nominal, calibrated))
            print(f'  {policy.stem:<22} stand-in {real:6.0%}  nominal sim {nominal:6.0%}  '
                  f'calibrated sim {calibrated:6.0%}', flush=True)
    finally:
        claim.release()
    real = np.array([r[1] for r in rows])
    for name, column in (('nominal', 2), ('calibrated', 3)):
        sim = np.array([r[column] for r in rows])
        print(f'{name} sim: Pearson r {pearson(sim, real):.3f}, MMRV {mmrv(real, sim):.3f}')


if __name__ == '__main__':
    main()
