"""The reach policy module and its export to TorchScript (``.pt``) and torch.export (``.pt2``).

:class:`PosturePolicy` maps an observation (batch, card.observation_size) float32 to a raw
action (batch, card.action.size) in two stages:

1. a posture network, an MLP from the goal position (3,) m to the arm posture q* (7,) rad
   that puts the flange on the goal (learned from the IK expert,
   :mod:`simops_learning.expert`);
2. the expert's joint-space law on the measured position q (7,) rad of the newest frame:
   ``dq = gain · (q* - q) / action_scale``, scaled down as a vector to at most one action
   unit, and the gripper command +1 (open).

Goal and joint positions are read back from the observation through the card's term
offsets and scales, so the exported file is all the policy node needs besides the card.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from simops_core.policy_card import PolicyCard, file_sha256
from simops_core.robot_spec import RobotSpec
from simops_learning.reach_card import HISTORY, reach_card, write_card


class PosturePolicy(nn.Module):
    """Posture MLP (goal → q*) followed by the proportional joint law; see the module doc."""

    def __init__(self, card: PolicyCard, spec: RobotSpec, hidden: Sequence[int],
                 gain: float) -> None:
        super().__init__()
        goal_at, goal_scale, goal_offset = newest_slots(card, 'goal_position', ('x', 'y', 'z'))
        q_at, q_scale, q_offset = newest_slots(card, 'joint_position', spec.arm_joints)
        self.register_buffer('goal_at', goal_at)
        self.register_buffer('goal_scale', goal_scale)
        self.register_buffer('goal_offset', goal_offset)
        self.register_buffer('q_at', q_at)
        self.register_buffer('q_scale', q_scale)
        self.register_buffer('q_offset', q_offset)
        self.register_buffer('goal_mean', torch.zeros(3))
        self.register_buffer('goal_std', torch.ones(3))
        self.register_buffer('posture_mean', torch.zeros(len(spec.arm_joints)))
        self.register_buffer('posture_std', torch.ones(len(spec.arm_joints)))
        self.gain_per_unit = float(gain / card.action.scale)
        self.gripper = bool(card.action.gripper)
        layers: list[nn.Module] = []
        width = 3
        for size in hidden:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        layers.append(nn.Linear(width, len(spec.arm_joints)))
        self.body = nn.Sequential(*layers)

    def set_normalization(self, goals: np.ndarray, postures: np.ndarray) -> None:
        """Input and output standardisation from goals (N, 3) m and postures (N, 7) rad."""
        for name, values in (('goal', goals), ('posture', postures)):
            getattr(self, f'{name}_mean').copy_(torch.as_tensor(values.mean(axis=0)))
            getattr(self, f'{name}_std').copy_(
                torch.as_tensor(np.maximum(values.std(axis=0), 1e-3)))

    def posture(self, goal: torch.Tensor) -> torch.Tensor:
        """q* (batch, 7) rad for goals (batch, 3) m in the base frame."""
        normalized = (goal - self.goal_mean) / self.goal_std
        return self.body(normalized) * self.posture_std + self.posture_mean

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Raw action (batch, 7 + gripper) for observations (batch, observation size)."""
        goal = observation[:, self.goal_at] / self.goal_scale + self.goal_offset
        q = observation[:, self.q_at] / self.q_scale + self.q_offset
        dq = (self.posture(goal) - q) * self.gain_per_unit
        largest = torch.clamp(torch.amax(torch.abs(dq), dim=1, keepdim=True), min=1.0)
        dq = dq / largest
        if self.gripper:
            dq = torch.cat([dq, torch.ones_like(dq[:, :1])], dim=1)
        return dq


def newest_slots(card: PolicyCard, source: str, names: Sequence[str]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observation indices of ``source``'s ``names`` in the newest frame, scale and offset.

    float32 tensors, so that ``raw = value / scale + offset``.
    """
    at, scale, offset = frame_slots(card, source, names)
    return at[0], scale, offset


def frame_slots(card: PolicyCard, source: str, names: Sequence[str]
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observation indices of ``source``'s ``names`` in every frame, scale and offset.

    Indices (history, len(names)), newest frame first; scale and offset (len(names),)
    float32, so that ``raw = value / scale + offset``.
    """
    start = 0
    for term in card.terms:
        if term.source == source:
            slots = [term.fields.index(name) for name in names]
            frames = (range(card.history) if card.history_order == 'newest_first'
                      else range(card.history - 1, -1, -1))
            index = [[f * card.frame_size + start + s for s in slots] for f in frames]
            return (torch.tensor(index), torch.tensor(term.scale[slots], dtype=torch.float32),
                    torch.tensor(term.offset[slots], dtype=torch.float32))
        start += len(term.fields)
    raise ValueError(f'the card observes no {source}; the policy needs it')


def export_policy(policy: nn.Module, spec: RobotSpec, stem: Path, observation_size: int,
                  training: dict[str, Any], history: int = HISTORY,
                  task: str = 'reach') -> tuple[Path, Path, Path]:
    """Write ``stem.pt`` (TorchScript), ``stem.pt2`` (torch.export) and their cards.

    ``history``: the card's observation frames (reach 2, pick-and-place 3); ``task``: the
    card's task (:mod:`simops_core.tasks`).

    ``stem.yaml`` is the card of ``stem.pt`` (the policy node's default card path);
    ``stem.pt2.yaml`` the card of ``stem.pt2`` (pass it as ``card_path``). Returns the three
    primary paths (.pt, .pt2, .yaml).
    """
    policy = policy.eval()
    stem.parent.mkdir(parents=True, exist_ok=True)
    script_path, export_path = stem.with_suffix('.pt'), stem.with_suffix('.pt2')
    example = torch.zeros(1, observation_size)
    with warnings.catch_warnings():  # TorchScript is deprecated upstream; the node loads it
        warnings.simplefilter('ignore', DeprecationWarning)
        torch.jit.script(policy).save(str(script_path))
    torch.export.save(torch.export.export(policy, (example,)), str(export_path))
    card_path = write_card(reach_card(spec, file_sha256(script_path), training, history, task),
                           stem.with_suffix('.yaml'))
    write_card(reach_card(spec, file_sha256(export_path), training, history, task),
               stem.with_name(stem.name + '.pt2.yaml'))
    return script_path, export_path, card_path
