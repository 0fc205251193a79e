"""A learned sensor model for the benches: the fitted model's structure at its largest window.

``fit --actuator-model linear`` chose a 40 ms window at 1 kHz on Gaz et al.'s real Panda
recording (docs/actuator_model.md); this writes a model of that shape (per joint, 40 lags of
the model torque, velocity and acceleration), with a training range no bench motion leaves,
and a SimParams naming it. Its cost does not depend on its weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from simops_core.robot_spec import load_robot_spec
from simops_sysid.actuator_export import export_actuator_model
from simops_sysid.actuator_fit import INPUTS, LinearActuator

WINDOW, PERIOD = 40, 0.001   # samples, s


def write_bench_model(folder: Path, robot: str = 'fr3') -> Path:
    """Write ``folder/bench.yaml`` naming ``folder/bench.actuator.pt``; return the SimParams."""
    joints = load_robot_spec(robot).arm_joints
    weights = np.zeros((len(joints), 3 * WINDOW + 1))
    weights[:, :WINDOW] = 1.0 / WINDOW   # a moving average of the model torque
    wide = {'min': [-1e6] * len(joints), 'max': [1e6] * len(joints)}
    ref = export_actuator_model(LinearActuator(WINDOW, PERIOD, weights), folder / 'bench',
                                joints, {'robot': robot,
                                         'training_range': {name: wide for name in INPUTS}})
    path = folder / 'bench.yaml'
    path.write_text(yaml.safe_dump({'version': 1, 'actuator_model': {
        'path': ref.path, 'sha256': ref.sha256}}))
    return path
