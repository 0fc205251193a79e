"""System identification benchmark: both fit modes, error and wall time against data length.

For each length (default 15, 30 and 60 s) the stand-in arm (the simulator's physics wrapper
with config/sim_params/standin_hidden.yaml: smooth friction, sensor offsets; 1e-4 rad
position noise, 0.05 N*m torque noise) runs an excitation; the result is written as a bag
(tests/sysid_helpers.py) and fitted with the installed ``fit``, as a user would run it:

- trajectory mode (states and commands): wall time, worst relative error of the controller
  gains and the delay, worst encoder-offset error (mrad), held-out joint-position RMS with
  nominal and fitted physics (mrad; a 20 s held-out bag of another seed);
- torque mode (the same states, efforts only): wall time of the whole command and of the
  fit itself, held-out torque RMS with nominal and fitted friction (N*m, the last 20 % of
  the bag).

    nice -n 10 .venv/bin/python bench/sysid.py [--lengths 15 30 60] [--rates 1000 100 20]
        [--stream | --position-interface] [--no-torque]

``--position-interface``: the stand-in streams positions to ``joint_position_controller``
and tracks them with the arm's own impedance loop at 0.85 of the spec's gains
(``impedance_truth``); ``fit`` runs with its defaults (which choose that controller).

Wall times depend on the machine's other load; the load average is printed alongside.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))

from ros_helpers import installed_executable  # noqa: E402
from sysid_helpers import HIDDEN, SPEC, impedance_truth, simulate, write_bag  # noqa: E402

from simops_core.sim_params import SimParams, load_sim_params  # noqa: E402

TORQUE_NOISE = 0.05   # N*m


def fit(*args: object) -> tuple[float, Path]:
    """Run ``fit`` with ``args`` (the last two are ``--out PATH``); wall time and output."""
    start = time.monotonic()
    result = subprocess.run([str(installed_executable('simops_sysid', 'fit')),
                             *map(str, args)], capture_output=True, text=True, cwd=REPO)
    if result.returncode:
        sys.exit(result.stdout + result.stderr)
    return time.monotonic() - start, Path(args[-1])


def trajectory_errors(fitted: Path, truth: SimParams) -> tuple[float, float]:
    """Worst relative error of kp, kv and the delay; worst encoder-offset error (rad)."""
    got = load_sim_params(fitted)
    relative = [abs(got.command_delay - truth.command_delay) / truth.command_delay]
    offsets = []
    for joint in SPEC.arm_joints:
        want, have = truth.joints[joint], got.joints[joint]
        relative += [abs(have.kp - want.kp) / want.kp, abs(have.kv - want.kv) / want.kv]
        offsets.append(abs(have.encoder_offset - want.encoder_offset))
    return max(relative), max(offsets)


def rms(values: dict[str, float]) -> float:
    return float(np.sqrt(np.mean(np.square(list(values.values())))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--lengths', type=float, nargs='+', default=[15.0, 30.0, 60.0])
    parser.add_argument('--rates', type=float, nargs='+', default=[50.0],
                        help='command rates (Hz) of the trajectory-mode runs (default 50)')
    parser.add_argument('--stream', action='store_true',
                        help='stream the commands on /joint_commands instead of one-point '
                             'trajectories')
    parser.add_argument('--position-interface', action='store_true',
                        help='stream positions to joint_position_controller, tracked by the '
                             'arm\'s own impedance loop')
    parser.add_argument('--no-torque', action='store_true', help='skip torque mode')
    options = parser.parse_args()
    law = 'joint_impedance' if options.position_interface else 'joint_trajectory'
    truth = impedance_truth() if options.position_interface else load_sim_params(HIDDEN)
    streamed = options.stream or options.position_interface
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        topic = ('/joint_position_controller/commands' if options.position_interface
                 else '/joint_commands' if options.stream else None)
        print('trajectory mode' + (f' (streamed on {topic})' if topic else ''))
        print(f'{"rate Hz":>7} {"data s":>6} {"wall s":>7} {"gains, delay worst %":>21} '
              f'{"offsets worst mrad":>19} {"held-out nominal mrad":>21} {"fitted mrad":>11} '
              f'{"load":>5}')
        torque_rows = []
        for rate in options.rates:
            held = write_bag(folder / f'held{rate:g}',
                             simulate(20.0, seed=99, rate=rate, stream=streamed,
                                      params=truth, law=law),
                             stream=topic)
            for length in options.lengths:
                data = simulate(length, seed=1, rate=rate, stream=streamed, params=truth,
                                law=law)
                load = os.getloadavg()[0]
                wall, out = fit('--bag', write_bag(folder / f'train{rate:g}_{length:g}', data,
                                                   stream=topic),
                                '--holdout', held, '--mode', 'trajectory',
                                '--out', folder / f'{rate:g}_{length:g}.yaml')
                gains, offsets = trajectory_errors(out, truth)
                provenance = load_sim_params(out).provenance
                position = provenance['residual_holdout']['position_rms_mrad']
                print(f'{rate:7.0f} {length:6.0f} {wall:7.1f} {100 * gains:21.1f} '
                      f'{1e3 * offsets:19.3f} {position["nominal"]:21.3f} '
                      f'{position["fitted"]:11.3f} {load:5.1f}', flush=True)
        for length in [] if options.no_torque else options.lengths:
            data = simulate(length, seed=1)
            noisy = replace(data, effort=data.effort + rng.normal(0.0, TORQUE_NOISE,
                                                                  data.effort.shape))
            wall, out = fit('--bag', write_bag(folder / f'torque{length:g}', noisy,
                                               commands=False),
                            '--out', folder / f'torque{length:g}.yaml')
            provenance = load_sim_params(out).provenance
            torque = provenance['torque_rms_nm']['holdout']
            torque_rows.append((length, wall, provenance['fit_wall_s'], rms(torque['nominal']),
                                rms(torque['fitted']), os.getloadavg()[0]))
        if options.no_torque:
            return 0
        print('\ntorque mode (efforts only)')
        print(f'{"data s":>6} {"wall s":>7} {"fit s":>6} {"held-out nominal N*m":>21} '
              f'{"fitted N*m":>11} {"load":>5}')
        for length, wall, fit_s, before, after, load in torque_rows:
            print(f'{length:6.0f} {wall:7.1f} {fit_s:6.1f} {before:21.3f} {after:11.3f} '
                  f'{load:5.1f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
