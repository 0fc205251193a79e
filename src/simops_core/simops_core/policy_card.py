"""Policy card: the versioned YAML sidecar that describes a trained policy's interface.

A card sits next to the model (``fr3_reach.pt`` → ``fr3_reach.yaml``) and states everything a
deployment must reproduce exactly: the model's sha256, the ordered observation terms (by
joint name and field, each with offset, scale and clip), the history length and order, the
action layout (7 joint deltas by joint name plus an optional gripper command), the action
clip, scale and reference, the control rate and the training metadata.

Example::

    version: 1
    sha256: 3b0c...e1            # of the model file, 64 hex digits
    robot: fr3                   # spec name the policy was trained for
    task: reach                  # simops_core.tasks; a card without it is a reach policy
    control_rate: 20.0           # Hz
    observation:
      history: 2                 # frames stacked into one observation vector
      history_order: oldest_first
      terms:
        - {source: joint_position, fields: [fr3_joint1, ...], offset: [...], scale: 1.0}
        - {source: joint_velocity, fields: [fr3_joint1, ...], scale: 0.1, clip: [-5, 5]}
        - {source: gripper_width, fields: [width], scale: 10.0}
        - {source: object_position, fields: [x, y, z]}
        - {source: object_quaternion, fields: [x, y, z, w]}
        - {source: goal_position, fields: [x, y, z]}
        - {source: last_action, fields: [fr3_joint1, ..., gripper]}
      images:                    # optional: camera images, the model's further inputs
        - topic: /camera/wrist/color/image_raw   # rgb8 (config/cameras.yaml's layout)
          width: 64              # pixels the model takes (the image is resized to it)
          height: 48
          mean: [0.485, 0.456, 0.406]   # normalisation per channel of pixel / 255
          std: [0.229, 0.224, 0.225]
          max_age: 0.2           # s: an older image holds the arm
    action:
      joints: [fr3_joint1, ..., fr3_joint7]   # action[i] moves joints[i]
      gripper: true                           # action[7]: -1 closed ... +1 open
      clip: 1.0                               # |action| clipped to this before scaling
      scale: 0.05                             # rad per step per unit action
      reference: measured                     # or last_command
    training: {framework: torch, algorithm: ppo, seed: 0}

Each observation value is ``clip((raw - offset) * scale, clip_low, clip_high)``. Poses are in
the robot's base frame (m); quaternions are ``x, y, z, w``; gripper width is in m. Each image
reaches the model as a (1, 3, height, width) float32 tensor ``(pixel / 255 - mean) / std``,
channels R, G, B, after the observation vector, in the card's order; only the newest image
is used (images have no history).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simops_core.command_line import ConfigError
from simops_core.tasks import TASK_NAMES
from simops_core.yaml_fields import Fields, is_number

CARD_VERSION = 1
GRIPPER_FIELD = 'gripper'
POSE_FIELDS = {
    'gripper_width': ('width',),
    'object_position': ('x', 'y', 'z'),
    'object_quaternion': ('x', 'y', 'z', 'w'),
    'goal_position': ('x', 'y', 'z'),
}
JOINT_SOURCES = ('joint_position', 'joint_velocity')
SOURCES = (*JOINT_SOURCES, *POSE_FIELDS, 'last_action')
HISTORY_ORDERS = ('oldest_first', 'newest_first')
REFERENCES = ('measured', 'last_command')
_SHA256 = re.compile(r'[0-9a-f]{64}')


class CardError(ConfigError):
    """A policy card is missing, unreadable or malformed; the message names the field."""

    hint = 'fix the card or the card_path parameter'


@dataclass(frozen=True)
class ObservationTerm:
    """One block of the observation frame: ``clip((raw[fields] - offset) * scale, *clip)``.

    ``offset`` and ``scale`` have shape (len(fields),); ``clip`` is (low, high), infinite
    when the card gives none.
    """

    source: str
    fields: tuple[str, ...]
    offset: np.ndarray
    scale: np.ndarray
    clip: tuple[float, float]


@dataclass(frozen=True)
class ImageTerm:
    """A camera image input of the model.

    ``topic`` (rgb8 images), the model's ``width`` x ``height`` (pixels), the per-channel
    ``mean`` and ``std`` (3,) of pixel / 255, and ``max_age`` (s), the oldest image the
    policy may act on.
    """

    topic: str
    width: int
    height: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    max_age: float


@dataclass(frozen=True)
class ActionLayout:
    """The policy output: ``joints`` deltas in that order, then a gripper command if any.

    ``clip`` bounds each raw action value, ``scale`` turns a clipped arm action into rad per
    control step, ``reference`` is what the delta is added to: the measured position or the
    last commanded target.
    """

    joints: tuple[str, ...]
    gripper: bool
    clip: float
    scale: float
    reference: str

    @property
    def fields(self) -> tuple[str, ...]:
        """Names of the action vector's entries, in order."""
        return self.joints + ((GRIPPER_FIELD,) if self.gripper else ())

    @property
    def size(self) -> int:
        """Length of the action vector."""
        return len(self.fields)


@dataclass(frozen=True)
class PolicyCard:
    """A validated policy card; see the module docstring for the file format."""

    sha256: str
    robot: str
    control_rate: float
    history: int
    history_order: str
    terms: tuple[ObservationTerm, ...]
    action: ActionLayout
    training: dict[str, Any]
    source: Path
    images: tuple[ImageTerm, ...] = ()
    task: str | None = None   # a name of simops_core.tasks; None: the card does not say

    @property
    def frame_size(self) -> int:
        """Observation values per history frame."""
        return sum(len(term.fields) for term in self.terms)

    @property
    def observation_size(self) -> int:
        """Length of the observation vector fed to the model: history × frame size."""
        return self.history * self.frame_size


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b''):
            digest.update(chunk)
    return digest.hexdigest()


def load_policy_card(path: str | Path, joint_names: tuple[str, ...],
                     arm_joints: tuple[str, ...]) -> PolicyCard:
    """Load and validate a card against a robot's ``joint_names`` (arm then fingers).

    ``arm_joints`` are the 7 joints the action must cover. Raises :class:`CardError` naming
    the file and the first offending field.
    """
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise CardError(f'policy card {file} does not exist') from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0]
        raise CardError(f'{file}: cannot parse policy card: {reason}') from None
    return parse_policy_card(raw, file, joint_names, arm_joints)


def parse_policy_card(raw: Any, source: Path, joint_names: tuple[str, ...],
                      arm_joints: tuple[str, ...]) -> PolicyCard:
    """Validate a card already parsed from YAML; see :func:`load_policy_card`."""
    check = Fields(str(source), CardError)
    root = check.mapping(raw, '<root>')
    version = check.get(root, 'version', int, 'version')
    if version != CARD_VERSION:
        check.fail('version', f'is {version}, this SimOps reads version {CARD_VERSION}')
    sha = check.get(root, 'sha256', str, 'sha256').lower()
    if not _SHA256.fullmatch(sha):
        check.fail('sha256', 'must be 64 hex digits (sha256sum of the model file)')
    rate = check.number(root, 'control_rate', 'control_rate')
    if rate <= 0:
        check.fail('control_rate', f'must be > 0 Hz, got {rate}')
    task = root.get('task')
    if task is not None and task not in TASK_NAMES:
        check.fail('task', f'must be one of {", ".join(TASK_NAMES)}, got {task!r}')

    action = _action(check, check.mapping(check.get(root, 'action', dict, 'action'), 'action'),
                     arm_joints)
    obs = check.mapping(check.get(root, 'observation', dict, 'observation'), 'observation')
    history = check.get(obs, 'history', int, 'observation.history')
    if history < 1:
        check.fail('observation.history', f'must be >= 1, got {history}')
    order = obs.get('history_order', 'oldest_first')
    if order not in HISTORY_ORDERS:
        check.fail('observation.history_order', f'must be one of {HISTORY_ORDERS}, got {order!r}')
    terms_raw = check.get(obs, 'terms', list, 'observation.terms')
    if not terms_raw:
        check.fail('observation.terms', 'must list at least one term')
    terms = tuple(_term(check, item, f'observation.terms[{i}]', joint_names, action)
                  for i, item in enumerate(terms_raw))
    images_raw = obs.get('images') or []
    if not isinstance(images_raw, list):
        check.fail('observation.images', f'must be a list of image inputs, got {images_raw!r}')
    images = tuple(_image(check, item, f'observation.images[{i}]')
                   for i, item in enumerate(images_raw))
    training = check.mapping(check.get(root, 'training', dict, 'training'), 'training')
    return PolicyCard(sha256=sha, robot=check.get(root, 'robot', str, 'robot'),
                      control_rate=rate, history=history, history_order=order, terms=terms,
                      action=action, training=training, source=source, images=images,
                      task=task)


def _image(check: Fields, item: Any, where: str) -> ImageTerm:
    table = check.mapping(item, where)
    check.known(table, ('topic', 'width', 'height', 'mean', 'std', 'max_age'), where)
    topic = check.get(table, 'topic', str, f'{where}.topic')
    if not topic.startswith('/'):
        check.fail(f'{where}.topic', f'must be an absolute topic name, got {topic!r}')
    sides = []
    for key in ('width', 'height'):
        side = check.get(table, key, int, f'{where}.{key}')
        if not 1 <= side <= 4096:
            check.fail(f'{where}.{key}', f'must be 1 to 4096 pixels, got {side}')
        sides.append(side)
    norms = []
    for key, default in (('mean', 0.0), ('std', 1.0)):
        values = _broadcast(check, table, key, f'{where}.{key}', 3, default)
        if key == 'std' and not np.all(values > 0):
            check.fail(f'{where}.std', f'must be > 0, got {values.tolist()}')
        norms.append(tuple(float(v) for v in values))
    max_age = check.number(table, 'max_age', f'{where}.max_age', minimum=0.0, strict=True)
    return ImageTerm(topic, sides[0], sides[1], norms[0], norms[1], max_age)  # type: ignore[arg-type]


def _action(check: Fields, table: dict[str, Any], arm_joints: tuple[str, ...]) -> ActionLayout:
    joints = check.get(table, 'joints', list, 'action.joints')
    if sorted(map(str, joints)) != sorted(arm_joints) or len(joints) != len(arm_joints):
        check.fail('action.joints', f'must list each of {list(arm_joints)} once, got {joints!r}')
    gripper = check.get(table, 'gripper', bool, 'action.gripper')
    clip = check.number(table, 'clip', 'action.clip')
    scale = check.number(table, 'scale', 'action.scale')
    if clip <= 0 or scale <= 0:
        check.fail('action.clip' if clip <= 0 else 'action.scale', 'must be > 0')
    reference = table.get('reference')
    if reference not in REFERENCES:
        check.fail('action.reference', f'must be one of {REFERENCES}, got {reference!r}')
    return ActionLayout(tuple(joints), gripper, clip, scale, reference)


def _term(check: Fields, item: Any, where: str, joint_names: tuple[str, ...],
          action: ActionLayout) -> ObservationTerm:
    table = check.mapping(item, where)
    source = table.get('source')
    if source not in SOURCES:
        check.fail(f'{where}.source', f'must be one of {SOURCES}, got {source!r}')
    allowed = (joint_names if source in JOINT_SOURCES else
               action.fields if source == 'last_action' else POSE_FIELDS[source])
    fields = check.get(table, 'fields', list, f'{where}.fields')
    if (not fields or not all(isinstance(name, str) for name in fields)
            or len(set(fields)) != len(fields)):
        check.fail(f'{where}.fields', f'must list distinct names, got {fields!r}')
    unknown = [name for name in fields if name not in allowed]
    if unknown:
        check.fail(f'{where}.fields', f'has unknown {source} field {unknown[0]!r}; '
                   f'choose from {list(allowed)}')
    count = len(fields)
    offset = _broadcast(check, table, 'offset', f'{where}.offset', count, default=0.0)
    scale = _broadcast(check, table, 'scale', f'{where}.scale', count, default=1.0)
    clip = table.get('clip')
    if clip is None:
        bounds = (-math.inf, math.inf)
    else:
        if (not isinstance(clip, list) or len(clip) != 2
                or not all(is_number(v) for v in clip) or not clip[0] < clip[1]):
            check.fail(f'{where}.clip', f'must be [low, high] with low < high, got {clip!r}')
        bounds = (float(clip[0]), float(clip[1]))
    return ObservationTerm(source, tuple(fields), offset, scale, bounds)


def _broadcast(check: Fields, table: dict[str, Any], key: str, field: str, count: int,
               default: float) -> np.ndarray:
    """A finite number or a list of ``count`` of them at ``table[key]`` as a read-only (count,)."""
    value = table.get(key, default)
    values = [value] * count if is_number(value) else value
    if (not isinstance(values, list) or len(values) != count
            or not all(is_number(v) and math.isfinite(v) for v in values)):
        check.fail(field, f'must be a finite number or a list of {count}, got {value!r}')
    array = np.asarray(values, dtype=np.float64)
    array.setflags(write=False)
    return array
