"""Which inputs the learned sensor model needs, by held-out numbers on a real Panda.

On Gaz et al.'s recording (``bench/real_panda.py``: the exciting trajectory, 1 kHz; trained
on 0-14 s, held out 14-21 s) this runs what ``fit --mode torque --actuator-model linear``
runs (the rigid body, the friction fit, the window chosen on the training data's last
20 %), once per input set:

- the shipped model's :data:`~simops_sysid.actuator_fit.INPUTS` (model torque, velocity,
  acceleration);
- plus the measured positions;
- plus the tracking error, the commanded position (the recording's 1 kHz command stream,
  interpolated at each state's time) less the measured one;
- plus both.

It prints the held-out torque RMS (raw efforts, all joints) of each, beside the parametric
model's. The exported model and the simulator take the shipped inputs only.

    .venv/bin/python bench/actuator_inputs.py --data DIR
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
from real_panda import SPLIT, load

from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import SimParams
from simops_sim.model_index import index_model
from simops_sim.model_params import apply_sim_params
from simops_sysid.actuator_fit import INPUTS, choose_and_fit, total_rms
from simops_sysid.torque_fit import (
    fit_friction,
    kept_samples,
    rigid_body_model,
    sample_period,
    torque_data,
)
from simops_sysid.torque_run import actuator_parts

CANDIDATES = {'shipped (model torque, velocity, acceleration)': INPUTS,
              '+ position': (*INPUTS, 'position'),
              '+ tracking error': (*INPUTS, 'tracking_error'),
              '+ position and tracking error': (*INPUTS, 'position', 'tracking_error')}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--data', type=Path, required=True,
                        help="folder with Gaz et al.'s Trajectory_1 text files")
    options = parser.parse_args()
    data = load(options.data)
    robot = load_robot_spec('panda')
    model = mujoco.MjModel.from_xml_path(str(resolve_resource('models/panda/panda.xml')))
    index = index_model(model, robot)
    apply_sim_params(model, SimParams(end_effector='none'), index)
    rigid = rigid_body_model(model, index)
    fingers = np.zeros((data['t'].size, index.qpos_adr.size - 7))

    def part(span: np.ndarray) -> tuple:
        """The torque data of the samples in ``span`` and their commanded positions."""
        t = data['t'][span]
        q, qd, effort = (np.hstack((data[key][span], fingers[span]))
                         for key in ('q', 'qd', 'effort'))
        kept = t[kept_samples(t)]
        commanded = np.column_stack([np.interp(kept, data['command_t'], data['command_q'][:, j])
                                     for j in range(7)])
        return torque_data(rigid, index, t, q, qd, effort), commanded

    (train, train_cmd), (held, held_cmd) = (part(data['t'] < SPLIT), part(data['t'] >= SPLIT))
    fits = fit_friction(train)
    fitting, checking = ([replace(p, tracking_error=commanded - p.position)
                          for p, commanded in zip(actuator_parts([d], fits), [cmd],
                                                  strict=True)]
                         for d, cmd in ((train, train_cmd), (held, held_cmd)))
    period = sample_period(data['t'])
    print(f"Gaz et al.'s Panda, held out {SPLIT:g} s on; torque RMS of the raw efforts, all "
          f'joints (N*m): the parametric model {total_rms(checking):.3f}')
    for name, inputs in CANDIDATES.items():
        started = time.monotonic()
        learned, scores = choose_and_fit(fitting, period, inputs)
        window = learned.window * period * 1e3
        print(f'  {name:<48} held out {total_rms(checking, learned):.3f}  (window '
              f'{window:.0f} ms, validation {min(scores.values()):.3f}; '
              f'{time.monotonic() - started:.1f} s)', flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
