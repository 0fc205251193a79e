"""Small policies and their cards, made inside the tests (no checked-in weights).

A :class:`ConstantPolicy` ignores its input and returns a fixed action; its input size is
still enforced, so a card that disagrees with the model fails the node's dry inference.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any

import yaml

from simops_core.policy_card import file_sha256
from simops_core.robot_spec import load_robot_spec

SPEC = load_robot_spec('fr3')
ARM = list(SPEC.arm_joints)


def card_dict(sha256: str = '0' * 64, history: int = 2, gripper: bool = True,
              reference: str = 'last_command', control_rate: float = 20.0,
              with_object: bool = True) -> dict[str, Any]:
    """A card that uses every observation source (the object terms only if ``with_object``)."""
    terms: list[dict[str, Any]] = [
        {'source': 'joint_position', 'fields': ARM, 'offset': [float(v) for v in SPEC.home]},
        {'source': 'joint_velocity', 'fields': ARM, 'scale': 0.1, 'clip': [-5.0, 5.0]},
        {'source': 'gripper_width', 'fields': ['width'], 'scale': 10.0},
        {'source': 'goal_position', 'fields': ['x', 'y', 'z']},
        {'source': 'last_action', 'fields': ARM + (['gripper'] if gripper else [])},
    ]
    if with_object:
        terms[3:3] = [{'source': 'object_position', 'fields': ['x', 'y', 'z']},
                      {'source': 'object_quaternion', 'fields': ['x', 'y', 'z', 'w']}]
    return {
        'version': 1, 'sha256': sha256, 'robot': 'fr3', 'control_rate': control_rate,
        'observation': {'history': history, 'history_order': 'oldest_first', 'terms': terms},
        'action': {'joints': ARM, 'gripper': gripper, 'clip': 1.0, 'scale': 0.05,
                   'reference': reference},
        'training': {'framework': 'torch', 'algorithm': 'test', 'seed': 0},
    }


def observation_size(card: dict[str, Any]) -> int:
    """Observation vector length a card dict describes."""
    obs = card['observation']
    return obs['history'] * sum(len(term['fields']) for term in obs['terms'])


def write_policy(directory: Path, action: list[float], fmt: str = 'pt',
                 model_inputs: int | None = None, **card_kwargs: Any) -> tuple[Path, Path]:
    """Save a constant policy and its card (with the model's sha256); return both paths.

    ``model_inputs`` makes the model expect a different input size than the card describes.
    """
    import torch

    card = card_dict(**card_kwargs)
    size = observation_size(card) if model_inputs is None else model_inputs
    layer = torch.nn.Linear(size, len(action))
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.copy_(torch.tensor(action))
    model = directory / f'policy.{fmt}'
    if fmt == 'pt':
        with warnings.catch_warnings():  # TorchScript is deprecated; the node still loads it
            warnings.simplefilter('ignore', DeprecationWarning)
            torch.jit.script(layer).save(str(model))
    else:
        program = torch.export.export(layer, (torch.zeros(1, size),))
        torch.export.save(program, str(model))
    card_path = model.with_suffix('.yaml')
    write_card(card_path, card | {'sha256': file_sha256(model)})
    return model, card_path


def write_card(path: Path, card: dict[str, Any]) -> Path:
    """Write a card dict as YAML."""
    path.write_text(yaml.safe_dump(copy.deepcopy(card), sort_keys=False))
    return path
