"""The FR3 reach policy's card layout: observation terms, history and action, as a mapping.

One function, :func:`reach_card`, writes the card that training exports and that the env
reads before any model exists (with a placeholder sha256). The frame covers every source a
manipulation policy needs, so a pick-and-place policy with the same card slots in:

====================  ====================================  ==========================
term                  fields                                raw → value
====================  ====================================  ==========================
joint_position        7 arm joints                          (q - home) rad
joint_velocity        7 arm joints                          0.1 · qdot, clip ±5
gripper_width         width                                 10 · w (m)
object_position       x, y, z                               m, base frame
object_quaternion     x, y, z, w                            base frame
goal_position         x, y, z                               m, base frame
last_action           7 joints + gripper                    the previous clipped action
====================  ====================================  ==========================

Two frames, oldest first: 2 × 33 = 66 values (pick-and-place: 3 frames, 99 values).
Actions: 7 joint deltas (0.05 rad per unit, added to the last commanded target, so an action
delay does not slow the arm down) and a gripper command (-1 closed … +1 open), clipped to ±1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from simops_core.policy_card import CARD_VERSION, PolicyCard, parse_policy_card
from simops_core.robot_spec import RobotSpec

CONTROL_RATE = 20.0      # Hz
HISTORY = 2              # frames
ACTION_SCALE = 0.05      # rad per control step per unit action
PLACEHOLDER_SHA256 = '0' * 64


def reach_card(spec: RobotSpec, sha256: str = PLACEHOLDER_SHA256,
               training: dict[str, Any] | None = None,
               history: int = HISTORY, task: str = 'reach') -> dict[str, Any]:
    """The card as a YAML-ready mapping for robot ``spec``.

    ``history``: observation frames (the reach policy's 2, pick-and-place's 3); ``task``: a
    name of :mod:`simops_core.tasks`.
    """
    arm = list(spec.arm_joints)
    terms: list[dict[str, Any]] = [
        {'source': 'joint_position', 'fields': arm, 'offset': [float(v) for v in spec.home]},
        {'source': 'joint_velocity', 'fields': arm, 'scale': 0.1, 'clip': [-5.0, 5.0]},
        {'source': 'gripper_width', 'fields': ['width'], 'scale': 10.0},
        {'source': 'object_position', 'fields': ['x', 'y', 'z']},
        {'source': 'object_quaternion', 'fields': ['x', 'y', 'z', 'w']},
        {'source': 'goal_position', 'fields': ['x', 'y', 'z']},
        {'source': 'last_action', 'fields': [*arm, 'gripper']},
    ]
    return {
        'version': CARD_VERSION, 'sha256': sha256, 'robot': spec.name, 'task': task,
        'control_rate': CONTROL_RATE,
        'observation': {'history': history, 'history_order': 'oldest_first', 'terms': terms},
        'action': {'joints': arm, 'gripper': True, 'clip': 1.0, 'scale': ACTION_SCALE,
                   'reference': 'last_command'},
        'training': dict(training or {}),
    }


def parse_card(raw: dict[str, Any], spec: RobotSpec, source: Path) -> PolicyCard:
    """A card mapping validated against ``spec`` (raises ``CardError``)."""
    return parse_policy_card(raw, source, spec.joint_names, spec.arm_joints)


def write_card(raw: dict[str, Any], path: Path) -> Path:
    """Write a card mapping as YAML (keys in the order above) and return ``path``."""
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
