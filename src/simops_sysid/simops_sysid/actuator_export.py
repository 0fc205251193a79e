"""The learned actuator model as an artifact: TorchScript plus a card, like the policies.

``fit --mode torque --actuator-model linear|mlp`` writes, beside its SimParams ``STEM.yaml``:

- ``STEM.actuator.pt``: a TorchScript :class:`LinearSensorModel` (or
  :class:`~simops_sysid.actuator_mlp.MlpSensorModel`: card ``kind: mlp``), input ``history``
  (B, 3, W, 7) float64 (:func:`simops_sysid.actuator_fit.input_history`): the
  :data:`~simops_sysid.actuator_fit.INPUTS` (model torque N*m, velocity rad/s, acceleration
  rad/s^2) by lag (index 0 the newest sample, W samples at the card's rate) by arm joint;
  output (B, 7) N*m, what the torque sensors read. One forward pass serves a batch of envs;
- ``STEM.actuator.yaml``: its card: role, inputs, units, window, rate, joints, the range of
  each input seen in training (beyond it the model extrapolates), the training and
  held-out bags with their sha256, the held-out figures, and the sha256 of the ``.pt``.

The SimParams names the ``.pt`` by path and sha256 (``actuator_model:``), so a changed
model is refused wherever the SimParams is loaded
(:func:`simops_core.sim_params.load_sim_params`). The model's role is *sensor*: it models
what the arm reports as effort, not the torque the joint receives.

Only ``fit --actuator-model`` imports this module, and torch with it: beside an imported
torch the trajectory fit's threaded rollouts run slower.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from simops_core.policy_card import file_sha256
from simops_core.sim_params import ActuatorModelRef
from simops_sysid.actuator_fit import INPUTS, LinearActuator
from simops_sysid.actuator_mlp import MlpActuator

ROLE = 'sensor'   # what the arm reports as effort, not what the joint receives
UNITS = {'model_torque': 'N*m', 'velocity': 'rad/s', 'acceleration': 'rad/s^2',
         'output': 'N*m'}


class LinearSensorModel(nn.Module):
    """The fitted filter: history (B, 3, W, 7) -> sensor torque (B, 7) N*m; see the module doc."""

    def __init__(self, model: LinearActuator) -> None:
        super().__init__()
        if model.inputs != INPUTS:   # the simulator reads these three, no others
            raise ValueError(f'a learned model over {", ".join(model.inputs)} cannot be '
                             f'exported: the simulator gives it {", ".join(INPUTS)}')
        joints, window = model.weights.shape[0], model.window
        taps = model.weights[:, :-1].reshape(joints, len(INPUTS), window)
        self.register_buffer('taps', torch.tensor(taps.transpose(1, 2, 0).copy()))  # (3, W, 7)
        self.register_buffer('bias', torch.tensor(model.weights[:, -1].copy()))    # (7,)
        self.window = window

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        """Sensor torque (B, 7) N*m from input histories (B, 3, W, 7), newest lag first."""
        return (history * self.taps).sum(dim=(1, 2)) + self.bias


def export_actuator_model(model: LinearActuator | MlpActuator, stem: Path,
                          joints: Sequence[str], training: Mapping[str, Any]) -> ActuatorModelRef:
    """Write ``STEM.actuator.pt`` and its card ``STEM.actuator.yaml``; return the reference.

    ``model``: the linear filter, or the filter with its networks
    (:mod:`simops_sysid.actuator_mlp`). ``training``: the card's record of the fit (robot,
    bags, held-out figures, input range). The reference's path is the ``.pt``'s file name
    (the SimParams lies beside it).
    """
    script = stem.with_name(stem.name + '.actuator.pt')
    kind = 'linear' if isinstance(model, LinearActuator) else 'mlp'
    source = LinearSensorModel(model) if kind == 'linear' else model.module
    module = torch.jit.script(source.eval())
    with warnings.catch_warnings():   # TorchScript is deprecated upstream; as the policies
        warnings.simplefilter('ignore', DeprecationWarning)
        module.save(str(script))
    sha = file_sha256(script)
    card = {'kind': kind, 'role': ROLE, 'joints': list(joints), 'inputs': list(INPUTS),
            'units': UNITS, 'window': model.window,
            'window_s': round(model.window * model.period, 6),
            'period_s': round(model.period, 9), 'rate_hz': round(1.0 / model.period, 3),
            'history_shape': ['batch', len(INPUTS), model.window, len(joints)],
            **training, 'sha256': sha}
    script.with_suffix('.yaml').write_text(yaml.safe_dump(card, sort_keys=False))
    return ActuatorModelRef(script.name, sha)
