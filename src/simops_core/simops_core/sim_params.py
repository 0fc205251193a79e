"""``SimParams``: the simulator's physics parameters, one YAML schema with a version field.

This is the file that system identification writes and that the simulator node and the Gym
environment load, all through :func:`load_sim_params`. Every field is optional: an unset
field means "keep the model's nominal value". Units: damping in N*m*s/rad (N*s/m for the
finger slides), armature in kg*m^2, frictionloss (Coulomb) in N*m, the arm controller's
gains ``kp`` (p) in N*m/rad and ``kv`` (d) in N*m*s/rad, ``friction_transition`` in rad/s,
the sensor biases ``encoder_offset`` in rad and ``torque_offset`` in N*m, ``command_delay``
in s, object mass in kg, object friction the dimensionless sliding coefficient, the payload
at the flange (:class:`PayloadParams`) in kg and m; ``end_effector`` says what the model's
hand is (:data:`END_EFFECTORS`: ``franka_hand``, the default, or ``none`` for an arm that
carries no hand); ``controller`` says which controller law the arm's ``kp`` and ``kv`` are
the gains of (:data:`CONTROLLER_LAWS`; default ``joint_trajectory``, franka_ros2's effort
JointTrajectoryController). Joints are keyed by their robot-spec NAME, never by index::

    version: 1
    command_delay: 0.002
    joints:
      fr3_joint1: {damping: 0.1, frictionloss: 0.3, kp: 600.0, kv: 30.0, encoder_offset: 0.001}
    body_mass_scale: {fr3_link7: 1.05}
    object: {mass: 0.1, friction: 1.0}
    payload: {mass: 0.35, com_x: 0.0, com_y: 0.0, com_z: 0.12}
    end_effector: franka_hand
    actuator_model: {path: fit.actuator.pt, sha256: 3f5a...}
    provenance: {fitted_by: simops_sysid, bags: [...], date: 2026-01-01}

``actuator_model`` names a learned model ``fit --actuator-model`` exported (TorchScript, with
its card beside it, ``.pt`` -> ``.yaml``): its path (relative to this file's folder, or
absolute) and the sha256 of its bytes; :func:`load_sim_params` refuses a file whose bytes
do not match, and returns the path resolved.

Every number has a physical range (:data:`RANGES`), enforced here, so the simulator node, the
Gym environment and ``fit`` refuse the same files with the same one-line message naming the
field. Pure Python (no rclpy, no MuJoCo): applying the parameters to a model lives in
``simops_sim.model_params.apply_sim_params``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from simops_core.command_line import ConfigError
from simops_core.paths import resolve_resource
from simops_core.policy_card import file_sha256
from simops_core.yaml_fields import Fields, is_number

SIM_PARAMS_VERSION = 1
JOINT_FIELDS = ('damping', 'armature', 'frictionloss', 'friction_transition', 'kp', 'kv',
                'encoder_offset', 'torque_offset')
SENSOR_FIELDS = ('encoder_offset', 'torque_offset')
SERVO_FIELDS = ('kp', 'kv')
OBJECT_FIELDS = ('mass', 'friction')
PAYLOAD_FIELDS = ('mass', 'com_x', 'com_y', 'com_z')
TOP_LEVEL = ('version', 'command_delay', 'joints', 'body_mass_scale', 'object', 'payload',
             'end_effector', 'controller', 'actuator_model', 'provenance')
ACTUATOR_MODEL_FIELDS = ('path', 'sha256')
# The controller laws an arm's ``kp`` and ``kv`` can belong to: franka_ros2's effort
# JointTrajectoryController (the default) and the arm's own joint-impedance loop behind a
# position interface (simops_sim.feedforward).
CONTROLLER_LAWS = ('joint_trajectory', 'joint_impedance')
# What is mounted on the flange, as franka_description's ``ee_id`` names it: the Franka Hand
# the models carry, or none (its bodies keep no mass and no contacts).
END_EFFECTORS = ('franka_hand', 'none')
# The physical range of every field: (lower, upper, unit), lower bound exclusive when the
# field must be strictly positive (STRICTLY_POSITIVE). Wide enough for any arm a 1 kHz
# MuJoCo model of a 7-DOF manipulator can represent, narrow enough that no value in range
# makes the physics diverge or allocate without bound (a 1e12 s delay, a 1e300 mass scale).
RANGES: dict[str, tuple[float, float, str]] = {
    'damping': (0.0, 1000.0, 'N*m*s/rad'),
    'armature': (0.0, 100.0, 'kg*m^2'),
    'frictionloss': (0.0, 1000.0, 'N*m'),
    'friction_transition': (0.0, 10.0, 'rad/s'),
    'kp': (0.0, 1e6, 'N*m/rad'),
    'kv': (0.0, 1e5, 'N*m*s/rad'),
    'encoder_offset': (-0.1, 0.1, 'rad'),
    'torque_offset': (-20.0, 20.0, 'N*m'),
    'command_delay': (0.0, 1.0, 's'),
    'body_mass_scale': (0.1, 10.0, ''),
    'mass': (0.0, 50.0, 'kg'),
    'friction': (0.0, 10.0, ''),
    'payload.mass': (0.0, 20.0, 'kg'),
    'payload.com': (-0.5, 0.5, 'm'),
}
STRICTLY_POSITIVE = ('kp', 'mass', 'friction')


class SimParamsError(ConfigError):
    """A SimParams file or mapping is missing or malformed; the message names the field."""


@dataclass(frozen=True)
class JointParams:
    """Per-joint physics and sensor bias; ``None`` keeps the model's nominal value (0 bias).

    ``frictionloss`` is the Coulomb level (N*m); with a ``friction_transition`` (rad/s), here
    or the model's nominal one, the friction is smooth,
    ``frictionloss * tanh(qd / friction_transition)`` (a real arm's: the shipped models carry
    the sigmoids Gaz et al. identified on the Panda); 0, or none anywhere, is MuJoCo's dry
    friction constraint.
    ``kp``, ``kv``: the arm controller's p and d gains. ``encoder_offset`` (rad) is added to
    the measured position and ``torque_offset`` (N*m) to the measured effort: the
    calibration biases of a real arm's encoders and link-side torque sensors.
    """

    damping: float | None = None
    armature: float | None = None
    frictionloss: float | None = None
    friction_transition: float | None = None
    kp: float | None = None
    kv: float | None = None
    encoder_offset: float | None = None
    torque_offset: float | None = None


@dataclass(frozen=True)
class ObjectParams:
    """The manipulated object's mass (kg) and sliding friction; ``None`` keeps nominal."""

    mass: float | None = None
    friction: float | None = None


@dataclass(frozen=True)
class PayloadParams:
    """A load rigidly fixed to the flange beyond the model's own bodies (a tool, a sensor).

    ``mass`` kg (0 or None: none) at the centre of mass ``com_x``, ``com_y``, ``com_z`` m in
    the flange frame (the robot spec's ``flange_frame``), as a point mass; its weight is
    compensated like the arm's, as the firmware compensates a load configured in Desk.
    """

    mass: float | None = None
    com_x: float | None = None
    com_y: float | None = None
    com_z: float | None = None


@dataclass(frozen=True)
class ActuatorModelRef:
    """A learned actuator model named by a SimParams file: ``path`` and its bytes' ``sha256``."""

    path: str
    sha256: str


@dataclass(frozen=True)
class SimParams:
    """Physics overrides for the simulator, keyed by joint and body name.

    ``command_delay`` (s) delays every control target by ``round(delay / timestep)`` physics
    steps. ``end_effector`` (one of :data:`END_EFFECTORS`, None: the model's hand).
    ``controller`` (one of :data:`CONTROLLER_LAWS`, None: ``joint_trajectory``): the law
    whose gains the joints' ``kp`` and ``kv`` are; the simulator runs the other law with the
    robot spec's nominal gains. ``actuator_model``: the learned model (None: none).
    ``provenance`` is free-form (sysid stores bag paths and hashes, date, residuals).
    """

    joints: Mapping[str, JointParams] = field(default_factory=dict)
    command_delay: float | None = None
    body_mass_scale: Mapping[str, float] = field(default_factory=dict)
    object: ObjectParams = field(default_factory=ObjectParams)
    payload: PayloadParams = field(default_factory=PayloadParams)
    end_effector: str | None = None
    controller: str | None = None
    actuator_model: ActuatorModelRef | None = None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    version: int = SIM_PARAMS_VERSION

    def with_provenance(self, **entries: Any) -> SimParams:
        """A copy with ``entries`` added to the provenance mapping."""
        return replace(self, provenance={**self.provenance, **entries})


def merge_sim_params(base: SimParams, override: SimParams) -> SimParams:
    """``base`` with every field that ``override`` sets replaced (joint by joint)."""
    joints = dict(base.joints)
    for name, joint in override.joints.items():
        current = joints.get(name, JointParams())
        joints[name] = replace(current, **{k: v for k, v in vars(joint).items() if v is not None})
    obj = replace(base.object, **{k: v for k, v in vars(override.object).items() if v is not None})
    load = replace(base.payload,
                   **{k: v for k, v in vars(override.payload).items() if v is not None})
    return SimParams(
        joints=joints,
        command_delay=(override.command_delay if override.command_delay is not None
                       else base.command_delay),
        body_mass_scale={**base.body_mass_scale, **override.body_mass_scale},
        object=obj,
        payload=load,
        end_effector=override.end_effector or base.end_effector,
        controller=override.controller or base.controller,
        actuator_model=override.actuator_model or base.actuator_model,
        provenance={**base.provenance, **override.provenance},
    )


def load_sim_params(path: str | Path) -> SimParams:
    """Read and validate a SimParams YAML file; raise :class:`SimParamsError` naming the field."""
    try:
        file = resolve_resource(path)
        raw = yaml.safe_load(file.read_text())
    except FileNotFoundError as exc:
        raise SimParamsError(f'sim params file {exc}') from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        message = str(exc).replace('\n', ' ')
        raise SimParamsError(f'{path}: cannot parse sim params: {message}') from None
    params = parse_sim_params(raw, source=str(file))
    if params.actuator_model is None:
        return params
    return replace(params, actuator_model=verified_model(params.actuator_model, file))


def sensor_model_of(path: str | Path) -> ActuatorModelRef:
    """The learned model the SimParams file at ``path`` names, path resolved, bytes checked.

    What the validation sim takes from a torque-mode fit (``fit --actuator-model``) beside
    its calibration. Raises :class:`SimParamsError` (one line) if it names none.
    """
    params = load_sim_params(path)
    if params.actuator_model is None:
        raise SimParamsError(f'{path}: names no actuator_model; fit one with fit --mode torque '
                             '--actuator-model linear')
    return params.actuator_model


def verified_model(ref: ActuatorModelRef, sim_params_file: Path) -> ActuatorModelRef:
    """``ref`` with its path resolved from ``sim_params_file``'s folder, its bytes checked.

    Raises :class:`SimParamsError` (one line) for a missing file or a sha256 that differs.
    """
    check = Fields(str(sim_params_file), SimParamsError)
    model = sim_params_file.parent / ref.path
    try:
        actual = file_sha256(model)
    except OSError as exc:
        check.fail('actuator_model.path', f'names {model}, which cannot be read '
                                          f'({exc.strerror or exc}); refit or correct the path')
    if actual != ref.sha256:
        check.fail('actuator_model.sha256', f'is {ref.sha256[:12]}... but {model} has '
                                            f'{actual[:12]}...: the model changed after the '
                                            'fit; restore it or refit')
    return ActuatorModelRef(str(model.resolve()), ref.sha256)


def parse_sim_params(raw: Any, source: str = '<mapping>') -> SimParams:
    """Validate a SimParams mapping already parsed from YAML; see :func:`load_sim_params`."""
    check = Fields(source, SimParamsError)
    root = check.mapping(raw, '<root>')
    check.known(root, TOP_LEVEL, '')
    version = root.get('version')
    if isinstance(version, bool) or version != SIM_PARAMS_VERSION:
        check.fail('version', f'must be {SIM_PARAMS_VERSION}, got {version!r}')

    joints = {}
    for name, entry in check.mapping(root.get('joints') or {}, 'joints').items():
        where = f'joints.{name}'
        table = check.mapping(entry, where)
        check.known(table, JOINT_FIELDS, where)
        joints[str(name)] = JointParams(**{k: _number(check, table.get(k), f'{where}.{k}')
                                           for k in JOINT_FIELDS})
    scales = {str(body): _number(check, value, f'body_mass_scale.{body}', required=True)
              for body, value in check.mapping(root.get('body_mass_scale') or {},
                                               'body_mass_scale').items()}
    obj = check.mapping(root.get('object') or {}, 'object')
    check.known(obj, OBJECT_FIELDS, 'object')
    load = check.mapping(root.get('payload') or {}, 'payload')
    check.known(load, PAYLOAD_FIELDS, 'payload')
    end_effector = root.get('end_effector')
    if end_effector is not None and end_effector not in END_EFFECTORS:
        check.fail('end_effector', f'must be one of {", ".join(END_EFFECTORS)}, '
                                   f'got {end_effector!r}')
    controller = root.get('controller')
    if controller is not None and controller not in CONTROLLER_LAWS:
        check.fail('controller', f'must be one of {", ".join(CONTROLLER_LAWS)}, '
                                 f'got {controller!r}')
    learned = None
    if root.get('actuator_model') is not None:
        table = check.mapping(root['actuator_model'], 'actuator_model')
        check.known(table, ACTUATOR_MODEL_FIELDS, 'actuator_model')
        path, sha = table.get('path'), table.get('sha256')
        if not isinstance(path, str) or not path:
            check.fail('actuator_model.path', f'must be a file name, got {path!r}')
        if not isinstance(sha, str) or not re.fullmatch('[0-9a-f]{64}', sha):
            check.fail('actuator_model.sha256', f'must be 64 hex digits, got {sha!r}')
        learned = ActuatorModelRef(path, sha)
    return SimParams(
        joints=joints,
        command_delay=_number(check, root.get('command_delay'), 'command_delay'),
        body_mass_scale=scales,
        object=ObjectParams(**{k: _number(check, obj.get(k), f'object.{k}')
                               for k in OBJECT_FIELDS}),
        payload=PayloadParams(**{k: _number(check, load.get(k), f'payload.{k}')
                                 for k in PAYLOAD_FIELDS}),
        end_effector=end_effector,
        controller=controller,
        actuator_model=learned,
        provenance=dict(check.mapping(root.get('provenance') or {}, 'provenance')),
    )


def sim_params_to_dict(params: SimParams) -> dict[str, Any]:
    """The YAML mapping of ``params``; unset fields are left out."""
    def present(obj: JointParams | ObjectParams | PayloadParams) -> dict[str, float]:
        return {f.name: getattr(obj, f.name) for f in fields(obj)
                if getattr(obj, f.name) is not None}

    out: dict[str, Any] = {'version': params.version}
    if params.command_delay is not None:
        out['command_delay'] = params.command_delay
    if params.joints:
        out['joints'] = {name: present(joint) for name, joint in params.joints.items()}
    if params.body_mass_scale:
        out['body_mass_scale'] = dict(params.body_mass_scale)
    if present(params.object):
        out['object'] = present(params.object)
    if present(params.payload):
        out['payload'] = present(params.payload)
    if params.end_effector is not None:
        out['end_effector'] = params.end_effector
    if params.controller is not None:
        out['controller'] = params.controller
    if params.actuator_model is not None:
        out['actuator_model'] = {'path': params.actuator_model.path,
                                 'sha256': params.actuator_model.sha256}
    if params.provenance:
        out['provenance'] = dict(params.provenance)
    return out


def save_sim_params(params: SimParams, path: str | Path) -> None:
    """Write ``params`` as YAML; :func:`load_sim_params` reads back an equal object."""
    Path(path).write_text(yaml.safe_dump(sim_params_to_dict(params), sort_keys=False))


def _number(check: Fields, value: Any, where: str, required: bool = False) -> float | None:
    """``value`` inside its field's :data:`RANGES` entry (None when absent and optional)."""
    if value is None and not required:
        return None
    if not is_number(value):
        check.fail(where, f'must be a number, got {value!r}')
    kind = 'body_mass_scale' if where.startswith('body_mass_scale.') else where.split('.')[-1]
    if where.startswith('payload.'):
        kind = 'payload.mass' if kind == 'mass' else 'payload.com'
    low, high, unit = RANGES[kind]
    strict = kind in STRICTLY_POSITIVE
    inside = math.isfinite(value) and (value > low if strict else value >= low) \
        and value <= high
    if not inside:
        check.fail(where, f'must lie in {"(" if strict else "["}{low:g}, {high:g}] '
                          f'{unit}'.rstrip() + f', got {value!r}')
    return float(value)
