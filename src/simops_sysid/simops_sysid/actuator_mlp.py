"""The learned sensor model's MLP variant: the linear filter plus a small network per joint.

``fit --mode torque --actuator-model mlp`` first fits and chooses the linear filter
(:mod:`simops_sysid.actuator_fit`), then learns what it leaves with one small network per
arm joint over the same window, in the style of Hwangbo et al.'s actuator nets: per joint
``j``,

    tau_J[t, j] ~ linear_j(h_t) + w2_j . tanh(W1_j z_t + b1_j) + b2_j,

with ``h_t`` the joint's history (3, W) of model torque, velocity and acceleration, newest
first, and ``z_t`` its newest :data:`LAGS` samples standardised (their mean and spread over
the training samples, per feature): the filter carries the dynamics, the network the
static nonlinearity (stiction, saturation) no filter holds, for which the newest sample
is enough (a choice: a network over the whole window is not compared on real data yet).
The network starts at zero output (``w2 = 0``), so
training starts from the linear model; Adam on the first part of the training samples,
stopped at the epoch whose RMS is best on their last
:data:`~simops_sysid.actuator_fit.VALIDATION_FRACTION` (a split in time, as the window is
chosen), seeded and on one thread: the same bags give the same model.

The whole model is one TorchScript module with the linear model's input contract, history
(B, 3, W, a) float64 -> (B, a) N*m, so the simulator runs it like the linear one
(:mod:`simops_sim.sensor_model`, through its ``forward``). Only ``fit --actuator-model mlp``
imports this module, and torch with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from simops_sysid.actuator_fit import (
    VALIDATION_FRACTION,
    ActuatorPart,
    LinearActuator,
    input_history,
)

HIDDEN = 32           # units per joint
LAGS = 1              # newest samples of each input the network sees (the filter sees W)
EPOCHS = 200          # at most
PATIENCE = 20         # epochs without a better validation RMS before stopping
BATCH = 2048          # samples per Adam step
LEARNING_RATE = 1e-2
SEED = 0
CHUNK = 4096          # samples per forward pass when predicting a long part


class MlpSensorModel(nn.Module):
    """Linear filter plus a network per joint: history (B, 3, W, a) -> (B, a) N*m."""

    def __init__(self, linear: LinearActuator, mean: np.ndarray, spread: np.ndarray) -> None:
        super().__init__()
        joints, window = linear.weights.shape[0], linear.window
        taps = linear.weights[:, :-1].reshape(joints, 3, window).transpose(1, 2, 0)
        self.register_buffer('taps', torch.tensor(taps.copy()))                   # (3, W, a)
        self.register_buffer('bias', torch.tensor(linear.weights[:, -1].copy()))  # (a,)
        self.register_buffer('mean', torch.tensor(mean[:, :LAGS]))       # (3, L, a)
        self.register_buffer('spread', torch.tensor(spread[:, :LAGS]))   # (3, L, a)
        self.lags = LAGS
        features = 3 * LAGS
        generator = torch.Generator().manual_seed(SEED)
        self.w1 = nn.Parameter(torch.randn(joints, features, HIDDEN, generator=generator,
                                           dtype=torch.float64) / features ** 0.5)
        self.b1 = nn.Parameter(torch.zeros(joints, HIDDEN, dtype=torch.float64))
        self.w2 = nn.Parameter(torch.zeros(joints, HIDDEN, dtype=torch.float64))
        self.b2 = nn.Parameter(torch.zeros(joints, dtype=torch.float64))
        self.window = window

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        """Sensor torque (B, a) N*m from input histories (B, 3, W, a), newest lag first."""
        linear = (history * self.taps).sum(dim=(1, 2)) + self.bias
        return linear + self.network(history[:, :, :self.lags])

    def network(self, recent: torch.Tensor) -> torch.Tensor:
        """The networks' part (B, a) N*m from the newest samples (B, 3, L, a)."""
        z = ((recent - self.mean) / self.spread).flatten(1, 2)   # (B, 3 L, a)
        hidden = torch.tanh(torch.einsum('bfj,jfh->bjh', z, self.w1) + self.b1)
        return (hidden * self.w2).sum(dim=2) + self.b2


@dataclass(frozen=True)
class MlpActuator:
    """A fitted MLP model: ``module`` at ``window`` samples of ``period`` s."""

    window: int
    period: float
    module: MlpSensorModel
    epochs: int            # trained, up to the best validation epoch (0: the filter alone)
    validation_rms: float  # N*m, all joints, at that epoch
    filter_rms: float      # N*m, all joints, the filter alone on the same samples

    def predict(self, part: ActuatorPart) -> np.ndarray:
        """What the torque sensors read (N, a) N*m over ``part``."""
        history = input_history(part, self.window)
        with torch.inference_mode():
            return np.vstack([self.module(torch.from_numpy(history[i:i + CHUNK])).numpy()
                              for i in range(0, len(history), CHUNK)])


def fit_mlp(parts: Sequence[ActuatorPart], linear: LinearActuator) -> MlpActuator:
    """Learn what ``linear`` leaves of ``parts``' efforts; see the module docstring."""
    torch.set_num_threads(1)
    torch.manual_seed(SEED)
    window = linear.window
    fitting, checking = [], []
    for part in parts:
        history = input_history(part, window)
        cut = int(len(history) * (1.0 - VALIDATION_FRACTION))
        fitting.append((history[:cut], part.measured[:cut]))
        checking.append((history[cut:], part.measured[cut:]))
    # the filter is fixed: what it leaves is the networks' target, from the newest samples
    x = np.concatenate([h for h, _ in fitting])
    mean, spread = x.mean(axis=0), x.std(axis=0)
    spread[spread == 0.0] = 1.0
    module = MlpSensorModel(linear, mean, spread)

    def split(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor]:
        history = torch.from_numpy(np.concatenate([h for h, _ in pairs]))
        measured = torch.from_numpy(np.concatenate([m for _, m in pairs]))
        with torch.no_grad():
            left = measured - (history * module.taps).sum(dim=(1, 2)) - module.bias
        return history[:, :, :LAGS].contiguous(), left

    x, y = split(fitting)
    xv, yv = split(checking)
    optimizer = torch.optim.Adam([module.w1, module.b1, module.w2, module.b2],
                                 lr=LEARNING_RATE)
    generator = torch.Generator().manual_seed(SEED)

    def validation() -> float:
        with torch.no_grad():
            return float(torch.sqrt(torch.mean((module.network(xv) - yv) ** 2)))

    best, best_epoch = validation(), 0
    alone = best   # w2 = 0: the filter alone
    best_state = {k: v.clone() for k, v in module.state_dict().items()}
    for epoch in range(1, EPOCHS + 1):
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), BATCH):
            batch = order[start:start + BATCH]
            loss = torch.mean((module.network(x[batch]) - y[batch]) ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        score = validation()
        if score < best:
            best, best_epoch = score, epoch
            best_state = {k: v.clone() for k, v in module.state_dict().items()}
        elif epoch - best_epoch >= PATIENCE:
            break
    module.load_state_dict(best_state)
    module.eval()
    return MlpActuator(window, linear.period, module, best_epoch, best, alone)
