"""Typed, validated robot specification loaded from ``config/robot/<name>.yaml``.

The robot spec is the single source of truth for joint names and limits. Units: positions in
rad (arm) and m (gripper), velocities in rad/s, accelerations in rad/s^2, jerks in rad/s^3,
torques in N*m, gripper force in N.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simops_core.paths import resolve_resource

SPEC_VERSION = 1
ARM_DOF = 7


class SpecError(ValueError):
    """A robot spec file is missing, unreadable or malformed; the message names the field."""


@dataclass(frozen=True)
class GripperSpec:
    """Two-finger parallel gripper; width is the distance between the fingers (m)."""

    joints: tuple[str, str]
    width_min: float
    width_max: float
    speed_max: float
    force_max: float
    home_width: float


@dataclass(frozen=True)
class RobotSpec:
    """Joint names and limits of a 7-DOF arm with a parallel gripper.

    Every array has shape (7,) and is ordered like ``arm_joints``.
    """

    name: str
    base_frame: str
    flange_frame: str
    arm_joints: tuple[str, ...]
    position_lower: np.ndarray
    position_upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    jerk: np.ndarray
    effort: np.ndarray
    home: np.ndarray
    gripper: GripperSpec
    source: Path

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Arm joints followed by the finger joints, as published on /joint_states."""
        return self.arm_joints + self.gripper.joints


def load_robot_spec(path: str | Path) -> RobotSpec:
    """Load and validate a robot spec YAML file.

    ``path`` is a file path or a name such as ``fr3`` (resolved to ``config/robot/fr3.yaml``).
    Raises :class:`SpecError` naming the first offending field.
    """
    text = str(path)
    if not text.endswith(('.yaml', '.yml')) and '/' not in text:
        path = f'config/robot/{text}.yaml'
    try:
        file = resolve_resource(path)
    except FileNotFoundError as exc:
        raise SpecError(str(exc)) from None
    try:
        raw = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f'{file}: cannot parse robot spec: {exc}') from None
    return parse_robot_spec(raw, source=file)


def parse_robot_spec(raw: Any, source: Path) -> RobotSpec:
    """Validate a robot spec already parsed from YAML; see :func:`load_robot_spec`."""
    fields = _Fields(source)
    root = fields.mapping(raw, '')
    version = fields.get(root, 'version', int)
    if version != SPEC_VERSION:
        fields.fail('version', f'is {version}, this SimOps reads version {SPEC_VERSION}')
    arm = fields.mapping(fields.get(root, 'arm', dict), 'arm')
    grip = fields.mapping(fields.get(root, 'gripper', dict), 'gripper')

    joints = fields.names(arm, 'arm.joints', ARM_DOF)
    lower = fields.vector(arm, 'arm.position_lower')
    upper = fields.vector(arm, 'arm.position_upper')
    bad = np.flatnonzero(lower >= upper)
    if bad.size:
        fields.fail('arm.position_upper', f'must exceed position_lower for {joints[bad[0]]}')
    limits = {key: fields.vector(arm, f'arm.{key}', positive=True)
              for key in ('velocity', 'acceleration', 'jerk', 'effort')}
    home = fields.vector(arm, 'arm.home')
    outside = np.flatnonzero((home < lower) | (home > upper))
    if outside.size:
        fields.fail('arm.home', f'{joints[outside[0]]} = {home[outside[0]]} lies outside its '
                    'position limits')

    gripper = GripperSpec(
        joints=fields.names(grip, 'gripper.joints', 2),
        width_min=fields.number(grip, 'gripper.width_min', minimum=0.0),
        width_max=fields.number(grip, 'gripper.width_max', minimum=0.0),
        speed_max=fields.number(grip, 'gripper.speed_max', minimum=0.0, strict=True),
        force_max=fields.number(grip, 'gripper.force_max', minimum=0.0, strict=True),
        home_width=fields.number(grip, 'gripper.home_width', minimum=0.0),
    )
    if gripper.width_max <= gripper.width_min:
        fields.fail('gripper.width_max', 'must exceed gripper.width_min')
    if not gripper.width_min <= gripper.home_width <= gripper.width_max:
        fields.fail('gripper.home_width', 'must lie within [width_min, width_max]')
    overlap = set(joints) & set(gripper.joints)
    if overlap:
        fields.fail('gripper.joints', f'repeats arm joint {sorted(overlap)[0]}')

    return RobotSpec(
        name=fields.get(root, 'name', str),
        base_frame=fields.get(root, 'base_frame', str),
        flange_frame=fields.get(root, 'flange_frame', str),
        arm_joints=joints,
        position_lower=lower,
        position_upper=upper,
        home=home,
        gripper=gripper,
        source=source,
        **limits,
    )


class _Fields:
    """Field accessors that raise :class:`SpecError` with the file and the field's dotted path."""

    def __init__(self, source: Path) -> None:
        self.source = source

    def fail(self, field: str, problem: str) -> None:
        raise SpecError(f'{self.source}: field {field!r} {problem}')

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(field or '<root>', 'must be a mapping')
        return value

    def get(self, table: dict[str, Any], key: str, kind: type) -> Any:
        if key not in table:
            self.fail(key, 'is missing')
        value = table[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            self.fail(key, f'must be a {kind.__name__}, got {value!r}')
        return value

    def names(self, table: dict[str, Any], field: str, count: int) -> tuple[str, ...]:
        value = self.get(table, field.split('.')[-1], list)
        if len(value) != count or not all(isinstance(v, str) and v for v in value):
            self.fail(field, f'must list {count} joint names, got {value!r}')
        if len(set(value)) != count:
            self.fail(field, 'has duplicate joint names')
        return tuple(value)

    def vector(self, table: dict[str, Any], field: str, positive: bool = False) -> np.ndarray:
        value = self.get(table, field.split('.')[-1], list)
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            self.fail(field, f'must hold {ARM_DOF} numbers, got {value!r}')
        if array.shape != (ARM_DOF,) or not np.all(np.isfinite(array)):
            self.fail(field, f'must hold {ARM_DOF} finite numbers, got {value!r}')
        if positive and np.any(array <= 0):
            self.fail(field, f'must be positive, got {value!r}')
        array.setflags(write=False)
        return array

    def number(self, table: dict[str, Any], field: str, minimum: float,
               strict: bool = False) -> float:
        value = table.get(field.split('.')[-1])
        if value is None:
            self.fail(field, 'is missing')
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(field, f'must be a number, got {value!r}')
        if not np.isfinite(value) or value < minimum or (strict and value == minimum):
            self.fail(field, f'must be {">" if strict else ">="} {minimum}, got {value!r}')
        return float(value)
