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

from simops_core.command_line import ConfigError
from simops_core.paths import resolve_resource
from simops_core.yaml_fields import Fields

SPEC_VERSION = 1
ARM_DOF = 7
# franka_msgs/srv/SetFullCollisionBehavior's request fields and their sizes (joints: 7;
# Cartesian: x, y, z, roll, pitch, yaw).
COLLISION_FIELDS = {f'{bound}_{kind}_thresholds_{phase}': 7 if kind == 'torque' else 6
                    for kind in ('torque', 'force') for phase in ('acceleration', 'nominal')
                    for bound in ('lower', 'upper')}


class SpecError(ConfigError):
    """A robot spec file is missing, unreadable or malformed; the message names the field."""

    hint = 'fix the robot spec or the robot parameter'


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
class Constraints:
    """The arm controller's defaults for FollowJointTrajectory goals (0: no tolerance).

    ``trajectory`` (7,) rad: position error allowed while moving; ``goal`` (7,) rad: at the
    end; ``stopped_velocity_tolerance`` rad/s: the velocity error at the end below which the
    arm counts as stopped; ``goal_time`` s: how long after the last point the end may be
    reached (0: no limit).
    """

    goal_time: float
    stopped_velocity_tolerance: float
    trajectory: np.ndarray
    goal: np.ndarray


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
    # The arm's collision behaviour (SetFullCollisionBehavior's fields, COLLISION_FIELDS):
    # torques (7,) N*m, forces (6,) N and N*m.
    collision_behavior: dict[str, np.ndarray]
    home: np.ndarray
    gripper: GripperSpec
    source: Path
    gain_p: np.ndarray       # N*m/rad, the arm controller's proportional gains
    gain_d: np.ndarray       # N*m*s/rad, its derivative gains (on the velocity error)
    constraints: Constraints
    # The arm's own joint-impedance loop behind a position or velocity interface.
    impedance_p: np.ndarray   # N*m/rad, its stiffness
    impedance_d: np.ndarray   # N*m*s/rad, its damping
    # Position-based velocity limits (:func:`velocity_bounds`), or None for constant ones.
    velocity_offset: np.ndarray | None = None   # rad/s, q_dot_offset
    deceleration: np.ndarray | None = None      # rad/s^2, q_ddot_dec

    @property
    def collision_torque(self) -> np.ndarray:
        """Contact torque per joint (7,) N*m that trips the arm's joint_reflex.

        The collision behaviour's ``upper_torque_thresholds_nominal``.
        """
        return self.collision_behavior['upper_torque_thresholds_nominal']

    def velocity_bounds(self, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The slowest and fastest joint velocities (rad/s) the arm allows at ``position``.

        ``position`` (..., 7) rad; returns (lower, upper), each (..., 7). See
        :func:`velocity_bounds`.
        """
        return velocity_bounds(position, self.position_lower, self.position_upper,
                               self.velocity, self.velocity_offset, self.deceleration)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Arm joints followed by the finger joints, as published on /joint_states."""
        return self.arm_joints + self.gripper.joints


def gripper_width(fingers: np.ndarray) -> np.ndarray:
    """The Franka Hand's opening (m) from its finger joints' positions (m), shape (..., 2).

    Their sum over the last axis, as franka_gripper's ``width``: each finger travels half of
    it. Of finger velocities (m/s), the opening's rate.
    """
    return np.sum(fingers, axis=-1)


def velocity_bounds(position: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                    velocity: np.ndarray, offset: np.ndarray | None,
                    deceleration: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Franka's position-based joint velocity limits at ``position`` (..., 7) rad.

    From Franka's "Robot and interface specifications", "Position-Based Velocity Limits"
    (frankarobotics/docs, source/robot_specifications.rst:185-215, 5f28326), what
    libfranka's ``Robot::getUpperJointVelocityLimits`` and ``getLowerJointVelocityLimits``
    return::

        upper = min(v_max, max(0, -v_offset + sqrt(max(0, 2 a_dec (q_max - q)))))
        lower = max(-v_max, min(0, v_offset - sqrt(max(0, 2 a_dec (q - q_min)))))

    ``lower``/``upper`` (7,) rad are q_min/q_max, ``velocity`` (7,) rad/s v_max,
    ``offset`` (7,) rad/s and ``deceleration`` (7,) rad/s^2; without them the limits are
    the constant ``-velocity, velocity``. Returns (lower, upper) rad/s, each (..., 7).
    """
    position = np.asarray(position, dtype=float)
    if offset is None or deceleration is None:
        shape = np.broadcast_shapes(position.shape, velocity.shape)
        return np.broadcast_to(-velocity, shape), np.broadcast_to(velocity, shape)
    up = np.sqrt(np.maximum(0.0, 2.0 * deceleration * (upper - position)))
    down = np.sqrt(np.maximum(0.0, 2.0 * deceleration * (position - lower)))
    return (np.maximum(-velocity, np.minimum(0.0, offset - down)),
            np.minimum(velocity, np.maximum(0.0, up - offset)))


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
    fields = Fields(str(source), SpecError)
    root = fields.mapping(raw, '')
    version = fields.get(root, 'version', int)
    if version != SPEC_VERSION:
        fields.fail('version', f'is {version}, this SimOps reads version {SPEC_VERSION}')
    arm = fields.mapping(fields.get(root, 'arm', dict), 'arm')
    grip = fields.mapping(fields.get(root, 'gripper', dict), 'gripper')
    controller = fields.mapping(fields.get(root, 'controller', dict), 'controller')
    impedance = fields.mapping(fields.get(root, 'joint_impedance', dict), 'joint_impedance')

    joints = _names(fields, arm, 'arm.joints', ARM_DOF)
    lower = _vector(fields, arm, 'arm.position_lower')
    upper = _vector(fields, arm, 'arm.position_upper')
    bad = np.flatnonzero(lower >= upper)
    if bad.size:
        fields.fail('arm.position_upper', f'must exceed position_lower for {joints[bad[0]]}')
    limits = {key: _vector(fields, arm, f'arm.{key}', positive=True)
              for key in ('velocity', 'acceleration', 'jerk', 'effort')}
    home = _vector(fields, arm, 'arm.home')
    outside = np.flatnonzero((home < lower) | (home > upper))
    if outside.size:
        fields.fail('arm.home', f'{joints[outside[0]]} = {home[outside[0]]} lies outside its '
                    'position limits')

    gripper = GripperSpec(
        joints=_names(fields, grip, 'gripper.joints', 2),
        width_min=fields.number(grip, 'width_min', 'gripper.width_min', minimum=0.0),
        width_max=fields.number(grip, 'width_max', 'gripper.width_max', minimum=0.0),
        speed_max=fields.number(grip, 'speed_max', 'gripper.speed_max', minimum=0.0, strict=True),
        force_max=fields.number(grip, 'force_max', 'gripper.force_max', minimum=0.0, strict=True),
        home_width=fields.number(grip, 'home_width', 'gripper.home_width', minimum=0.0),
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
        gain_p=_vector(fields, controller, 'controller.p', positive=True),
        gain_d=_vector(fields, controller, 'controller.d', positive=True),
        constraints=_constraints(fields, controller),
        impedance_p=_vector(fields, impedance, 'joint_impedance.stiffness', positive=True),
        impedance_d=_vector(fields, impedance, 'joint_impedance.damping', positive=True),
        collision_behavior=_collision_behavior(fields, arm),
        **_position_based(fields, arm),
        **limits,
    )


def _collision_behavior(fields: Fields, arm: dict[str, Any]) -> dict[str, np.ndarray]:
    """``arm.collision_behavior``: every field of :data:`COLLISION_FIELDS`, positive.

    Each lower threshold lies at or below its upper one.
    """
    table = fields.mapping(fields.get(arm, 'collision_behavior', dict, 'arm.collision_behavior'),
                           'arm.collision_behavior')
    unknown = sorted(set(table) - set(COLLISION_FIELDS))
    if unknown:
        fields.fail(f'arm.collision_behavior.{unknown[0]}', 'is not a field of '
                    'franka_msgs/srv/SetFullCollisionBehavior')
    values = {}
    for key, size in COLLISION_FIELDS.items():
        field = f'arm.collision_behavior.{key}'
        value = np.asarray(fields.get(table, key, list, field), dtype=float)
        if value.shape != (size,) or not np.all(np.isfinite(value)) or np.any(value <= 0):
            fields.fail(field, f'must hold {size} positive numbers')
        value.setflags(write=False)
        values[key] = value
    for key in COLLISION_FIELDS:
        if key.startswith('lower') and np.any(values[key] > values['upper' + key[5:]]):
            fields.fail(f'arm.collision_behavior.{key}', f'must not exceed upper{key[5:]}')
    return values


def _position_based(fields: Fields, arm: dict[str, Any]) -> dict[str, np.ndarray]:
    """``arm.velocity_offset`` and ``arm.deceleration``: both, or neither (constant limits)."""
    given = [key for key in ('velocity_offset', 'deceleration') if key in arm]
    if len(given) == 1:
        fields.fail(f'arm.{given[0]}', 'needs its pair: give velocity_offset and deceleration '
                    'together (position-based velocity limits), or neither')
    return {key: _vector(fields, arm, f'arm.{key}', positive=True) for key in given}


def _constraints(fields: Fields, controller: dict[str, Any]) -> Constraints:
    table = fields.mapping(fields.get(controller, 'constraints', dict, 'controller.constraints'),
                           'controller.constraints')
    per_joint = {}
    for key in ('trajectory', 'goal'):
        field = f'controller.constraints.{key}'
        per_joint[key] = _vector(fields, table, field)
        if np.any(per_joint[key] < 0):
            fields.fail(field, f'must be >= 0 (0: no tolerance), got {list(per_joint[key])}')
    return Constraints(
        goal_time=fields.number(table, 'goal_time', 'controller.constraints.goal_time',
                                minimum=0.0),
        stopped_velocity_tolerance=fields.number(
            table, 'stopped_velocity_tolerance',
            'controller.constraints.stopped_velocity_tolerance', minimum=0.0),
        **per_joint)


def _names(fields: Fields, table: dict[str, Any], field: str, count: int) -> tuple[str, ...]:
    value = fields.get(table, field.split('.')[-1], list, field)
    if len(value) != count or not all(isinstance(v, str) and v for v in value):
        fields.fail(field, f'must list {count} joint names, got {value!r}')
    if len(set(value)) != count:
        fields.fail(field, 'has duplicate joint names')
    return tuple(value)


def _vector(fields: Fields, table: dict[str, Any], field: str, positive: bool = False
            ) -> np.ndarray:
    value = fields.get(table, field.split('.')[-1], list, field)
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        fields.fail(field, f'must hold {ARM_DOF} numbers, got {value!r}')
    if array.shape != (ARM_DOF,) or not np.all(np.isfinite(array)):
        fields.fail(field, f'must hold {ARM_DOF} finite numbers, got {value!r}')
    if positive and np.any(array <= 0):
        fields.fail(field, f'must be positive, got {value!r}')
    array.setflags(write=False)
    return array
