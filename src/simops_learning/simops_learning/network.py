"""The policy network and its export to TorchScript (``.pt``) and ``torch.export`` (``.pt2``).

:class:`MlpPolicy` maps an observation (batch, card.observation_size) float32 to a raw action
(batch, card.action.size); the observation normalisation is part of the module, so the
exported file is all the policy node needs besides the card.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simops_core.policy_card import file_sha256
from simops_core.robot_spec import RobotSpec
from simops_learning.reach_card import reach_card, write_card


class MlpPolicy(nn.Module):
    """Normalise, then an MLP with ELU hidden layers and a linear output."""

    def __init__(self, inputs: int, outputs: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.register_buffer('mean', torch.zeros(inputs))
        self.register_buffer('std', torch.ones(inputs))
        layers: list[nn.Module] = []
        width = inputs
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ELU()]
            width = size
        layers.append(nn.Linear(width, outputs))
        self.body = nn.Sequential(*layers)

    def set_normalization(self, observations: np.ndarray) -> None:
        """Per-input mean and std (floored at 1e-3) from observations (N, inputs)."""
        self.mean.copy_(torch.as_tensor(observations.mean(axis=0), dtype=torch.float32))
        self.std.copy_(torch.as_tensor(np.maximum(observations.std(axis=0), 1e-3),
                                       dtype=torch.float32))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Raw action (batch, outputs) for observations (batch, inputs)."""
        return self.body((observation - self.mean) / self.std)


def export_policy(policy: MlpPolicy, spec: RobotSpec, stem: Path,
                  training: dict[str, Any]) -> tuple[Path, Path, Path]:
    """Write ``stem.pt`` (TorchScript), ``stem.pt2`` (torch.export) and their cards.

    ``stem.yaml`` is the card of ``stem.pt`` (the policy node's default card path);
    ``stem.pt2.yaml`` the card of ``stem.pt2`` (pass it as ``card_path``). Returns the three
    primary paths (.pt, .pt2, .yaml).
    """
    policy = policy.eval()
    stem.parent.mkdir(parents=True, exist_ok=True)
    script_path, export_path = stem.with_suffix('.pt'), stem.with_suffix('.pt2')
    example = torch.zeros(1, int(policy.mean.numel()))
    with warnings.catch_warnings():  # TorchScript is deprecated upstream; the node loads it
        warnings.simplefilter('ignore', DeprecationWarning)
        torch.jit.script(policy).save(str(script_path))
    torch.export.save(torch.export.export(policy, (example,)), str(export_path))
    card_path = write_card(reach_card(spec, file_sha256(script_path), training),
                           stem.with_suffix('.yaml'))
    write_card(reach_card(spec, file_sha256(export_path), training),
               stem.with_name(stem.name + '.pt2.yaml'))
    return script_path, export_path, card_path
