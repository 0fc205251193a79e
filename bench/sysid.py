"""System identification benchmark: recovery error and wall time against data length.

For each length (default 15, 30 and 60 s) the stand-in arm (the simulator's physics wrapper
with config/sim_params/standin_hidden.yaml, 1e-4 rad position noise) runs an excitation;
the result is written as a bag (tests/sysid_helpers.py) and fitted with the installed
``fit`` from nominal, exactly as a user would run it. A 20 s held-out bag (another seed) is
evaluated each time. Printed per length: fit wall time, iterations, median and worst
relative parameter error against the hidden truth, the held-out joint-position RMS replay
error with nominal and fitted physics (mrad), and which parameter was worst.

    nice -n 10 .venv/bin/python bench/sysid.py [--lengths 15 30 60]

Wall times depend on the machine's other load; the load average is printed alongside (the
acceptance target, <= 120 s for 60 s of data, is for a quiet 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))

from ros_helpers import installed_executable  # noqa: E402
from sysid_helpers import HIDDEN, SPEC, simulate, write_bag  # noqa: E402

from simops_core.sim_params import load_sim_params  # noqa: E402

KINDS = ('damping', 'armature', 'frictionloss', 'kp', 'kv')


def relative_errors(fitted: Path) -> dict[str, float]:
    """Relative error of every fitted parameter against the stand-in's hidden truth."""
    truth, got = load_sim_params(HIDDEN), load_sim_params(fitted)
    errors = {'command_delay': abs(got.command_delay - truth.command_delay)
              / truth.command_delay}
    for joint in SPEC.arm_joints:
        for kind in KINDS:
            want = getattr(truth.joints[joint], kind)
            errors[f'{joint}.{kind}'] = abs(getattr(got.joints[joint], kind) - want) / want
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--lengths', type=float, nargs='+', default=[15.0, 30.0, 60.0])
    options = parser.parse_args()
    fit = installed_executable('simops_sysid', 'fit')
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        held = write_bag(folder / 'held', simulate(20.0, seed=99))
        print(f'{"data s":>6} {"wall s":>7} {"iters":>5} {"median %":>8} {"worst %":>8} '
              f'{"held-out nominal mrad":>21} {"fitted mrad":>11} {"load":>5}  worst parameter')
        for length in options.lengths:
            bag = write_bag(folder / f'train{length:g}', simulate(length, seed=1))
            out = folder / f'fit{length:g}.yaml'
            load = os.getloadavg()[0]
            start = time.monotonic()
            result = subprocess.run([str(fit), '--bag', str(bag), '--holdout', str(held),
                                     '--out', str(out)], capture_output=True, text=True,
                                    cwd=REPO)
            wall = time.monotonic() - start
            if result.returncode:
                print(result.stdout + result.stderr, file=sys.stderr)
                return 1
            named = relative_errors(out)
            worst = max(named, key=named.get)
            errors = 100 * np.array(list(named.values()))
            provenance = load_sim_params(out).provenance
            rms = provenance['residual_holdout']['position_rms_mrad']
            print(f'{length:6.0f} {wall:7.1f} {provenance["iterations"]:5d} '
                  f'{np.median(errors):8.2f} {errors.max():8.2f} {rms["nominal"]:21.3f} '
                  f'{rms["fitted"]:11.3f} {max(load, os.getloadavg()[0]):5.1f}  {worst}',
                  flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
