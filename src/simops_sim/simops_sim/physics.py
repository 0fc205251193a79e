"""The MuJoCo physics wrapper shared by the simulator node, the Gym env and sysid (no rclpy).

Conventions, for every array this module takes or returns:

- joint arrays have shape (9,) in ``spec.joint_names`` order: the 7 arm joints (rad, rad/s,
  N*m) then the 2 finger joints (m, m/s, N);
- an arm target has shape (7,) in ``spec.arm_joints`` order (rad); the gripper target is the
  finger opening width (m), the length of the model's ``gripper_width`` tendon;
- poses are in the robot base frame (body ``spec.base_frame``): position (3,) in m and
  quaternion (4,) as MuJoCo orders it, (w, x, y, z);
- effort is the joint actuator torque ``qfrc_actuator`` at the joint's dof (N*m, N for the
  fingers). The model compensates gravity through the actuators (``actuatorgravcomp``), so
  the effort includes the gravity-holding torque: at rest it equals g(q). That is the
  convention of Franka's measured link-side torque ``tau_J``, which franka_ros2 publishes as
  ``effort`` on ``joint_states``; passive damping and friction torques are not included.

Physics parameters come from a :class:`~simops_core.sim_params.SimParams` through
:func:`apply_sim_params`, the one code path that the node, the env and sysid share.

With ``reflexes`` (the node and the env; not sysid's replays) the arm stops itself as a
real Franka arm does (:mod:`simops_sim.reflexes`): the stop latches in :attr:`Physics.stop`,
the arm holds, and commands are refused until :meth:`Physics.clear_stop` (ErrorRecovery) or
a reset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from simops_core.command_line import ConfigError
from simops_core.paths import resolve_resource
from simops_core.robot_spec import RobotSpec, gripper_width
from simops_core.sim_params import (
    SERVO_FIELDS,
    JointParams,
    ObjectParams,
    SimParams,
    SimParamsError,
)
from simops_sim.delay import CommandDelay, delay_steps
from simops_sim.reflexes import ProtectiveStop, Reflexes
from simops_sim.trajectory_plan import TrajectoryPlan

GRIPPER_TENDON = 'gripper_width'
OBJECT_BODY = 'object'
TRANSITION_NUMERIC = 'friction_transition'   # <numeric name="friction_transition:JOINT">
GOAL_BODY = 'goal'
MAX_SPEED = 100.0   # rad/s or m/s; any faster dof means the integration diverged
# end_effector: none keeps this fraction of the hand's masses and inertias (MuJoCo needs a
# positive mass under a joint); each finger slide keeps its own inertia as armature, so the
# finger dofs integrate as before while the arm carries nothing.
REMOVED_MASS = 1e-6


class ModelError(ConfigError):
    """The MJCF does not fit the robot spec (missing joint, actuator, body or keyframe)."""


def load_model(path: str | Path) -> mujoco.MjModel:
    """Compile the MJCF at ``path`` (resolved like every resource); raise :class:`ModelError`."""
    try:
        file = resolve_resource(path)
        return mujoco.MjModel.from_xml_path(str(file))
    except FileNotFoundError as exc:
        raise ModelError(f'model {exc}; set the model parameter to an MJCF file') from None
    except ValueError as exc:  # MuJoCo's XML parser and compiler
        message = ' '.join(str(exc).split())
        raise ModelError(f'cannot load model {path}: {message}; fix the MJCF') from None


def keyframe_id(model: mujoco.MjModel, name: str) -> int:
    """The id of keyframe ``name``; raises :class:`ModelError` naming the ones there are."""
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, name)
    if key < 0:
        names = [model.key(k).name for k in range(model.nkey)]
        raise ModelError(f'the model has no keyframe {name!r}; use one of {names} '
                         '(initial_keyframe)')
    return key


def parse_joint_map(pairs: Sequence[str]) -> dict[str, str]:
    """``['spec_joint=model_joint', ...]`` as a dict; raise :class:`ModelError` if malformed."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        spec_name, sep, model_name = pair.partition('=')
        if not sep or not spec_name.strip() or not model_name.strip():
            raise ModelError(f'joint_map entry {pair!r} is not of the form '
                             'spec_joint=model_joint; fix joint_map')
        mapping[spec_name.strip()] = model_name.strip()
    return mapping


@dataclass(frozen=True)
class ModelIndex:
    """Where the spec's joints, actuators and bodies live in one model, plus nominal values.

    Built once by :func:`index_model`; the hot path uses these ids, never names. The
    ``nominal_*`` arrays are copies taken at indexing time, so :func:`apply_sim_params`
    always starts from them and applying twice equals applying once.
    """

    joint_names: tuple[str, ...]     # spec names, (9,) arm then fingers
    prefix: str                      # of the arm's names in the model ('' for a lone arm)
    arm_dof: int                     # arm joints first in joint_names, then fingers
    joint_ids: np.ndarray            # (9,) MuJoCo joint ids
    qpos_adr: np.ndarray             # (9,)
    dof_adr: np.ndarray              # (9,)
    ctrl_ids: np.ndarray             # (8,) 7 arm position actuators, then the gripper servo
    velocity_ids: np.ndarray         # (7,) the arm's velocity actuators; -1: none (a servo)
    base_body: int
    flange_body: int
    object_body: int                 # -1 without an object
    object_geoms: np.ndarray         # geoms of the object body
    goal_mocap: int                  # -1 without a goal marker
    mass_bodies: tuple[str, ...]     # robot bodies with mass, unprefixed (body_mass_scale keys)
    hand_bodies: np.ndarray          # bodies below the flange: the model's end effector
    hand_geoms: np.ndarray           # geoms of hand_bodies
    nominal_dof: np.ndarray          # (3, nv) damping, armature, frictionloss
    nominal_transition: np.ndarray   # (9,) rad/s, smooth friction's; 0: MuJoCo's dry friction
    nominal_gain: np.ndarray         # (nu, 10) actuator_gainprm
    nominal_bias: np.ndarray         # (nu, 10) actuator_biasprm
    nominal_mass: np.ndarray         # (nbody,)
    nominal_inertia: np.ndarray      # (nbody, 3)
    nominal_friction: np.ndarray     # (ngeom, 3)
    nominal_ipos: np.ndarray         # (nbody, 3) m, centre of mass in the body frame
    nominal_iquat: np.ndarray        # (nbody, 4) principal axes in the body frame
    nominal_gravcomp: np.ndarray     # (nbody,)
    nominal_contact: np.ndarray      # (2, ngeom) geom contype, conaffinity


def index_model(model: mujoco.MjModel, spec: RobotSpec,
                joint_map: Mapping[str, str] | None = None, prefix: str = '') -> ModelIndex:
    """Map the spec's joints (renamed through ``joint_map``) and actuators onto ``model``.

    The actuator of arm joint J is the position servo whose transmission is J; the gripper
    actuator is the one on tendon ``gripper_width``. ``prefix`` is the one an arm was attached
    with (MJCF ``<attach prefix="left_">``): every name of the arm's model is looked up with
    it; the object and the goal marker with it first, then without (a shared one). Raises
    :class:`ModelError`.
    """
    joint_map = dict(joint_map or {})
    unknown = sorted(set(joint_map) - set(spec.joint_names))
    if unknown:
        raise ModelError(f'joint_map names {unknown[0]!r}, which is not a joint of robot '
                         f'{spec.name} ({", ".join(spec.joint_names)}); fix joint_map')
    joint_ids = []
    for name in spec.joint_names:
        model_name = prefix + joint_map.get(name, name)
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, model_name)
        if jid < 0:
            raise ModelError(f'the model has no joint {model_name!r} for spec joint {name!r}; '
                             'rename it or pass joint_map spec_joint=model_joint')
        joint_ids.append(jid)
    joint_ids_arr = np.array(joint_ids)

    servos, dampers = [], []
    affine = model.actuator_biastype == mujoco.mjtBias.mjBIAS_AFFINE
    for name, jid in zip(spec.arm_joints, joint_ids[:len(spec.arm_joints)], strict=True):
        on_joint = affine & (model.actuator_trntype == mujoco.mjtTrn.mjTRN_JOINT) & (
            model.actuator_trnid[:, 0] == jid)
        position = np.flatnonzero(on_joint & (model.actuator_biasprm[:, 1] < 0))
        velocity = np.flatnonzero(on_joint & (model.actuator_biasprm[:, 1] == 0)
                                  & (model.actuator_biasprm[:, 2] < 0))
        if position.size != 1 or velocity.size > 1:
            raise ModelError(f'expected one position actuator (and at most one velocity '
                             f'actuator) on joint {name!r}, found {position.size} '
                             f'({velocity.size}); add <position joint=...> and <velocity '
                             'joint=...> actuators')
        servos.append(int(position[0]))
        dampers.append(int(velocity[0]) if velocity.size else -1)
    _set_gains(model, spec, servos, dampers)
    tendon = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_TENDON, prefix + GRIPPER_TENDON)
    gripper = np.flatnonzero((model.actuator_trntype == mujoco.mjtTrn.mjTRN_TENDON)
                             & (model.actuator_trnid[:, 0] == tendon)) if tendon >= 0 else []
    if len(gripper) != 1:
        raise ModelError(f'expected one actuator on tendon {prefix + GRIPPER_TENDON!r}; add '
                         'the gripper width tendon and its position actuator')

    def body(name: str, required: bool) -> int:
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
        if bid < 0 and required:
            raise ModelError(f'the model has no body {name!r}; make the robot spec\'s '
                             'base_frame and flange_frame name bodies of the model')
        return bid

    base = body(prefix + spec.base_frame, True)
    obj = body(prefix + OBJECT_BODY, False)
    obj = obj if obj >= 0 else body(OBJECT_BODY, False)
    goal = body(prefix + GOAL_BODY, False)
    goal = goal if goal >= 0 else body(GOAL_BODY, False)
    robot = [b for b in range(model.nbody) if _descends(model, b, base) and model.body_mass[b] > 0]
    flange = body(prefix + spec.flange_frame, True)
    hand = np.array([b for b in range(model.nbody) if b != flange and _descends(model, b, flange)],
                    dtype=int)
    transition = []
    for jid in joint_ids:
        joint = model.joint(jid).name.removeprefix(prefix)
        numeric = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC,
                                    f'{prefix}{TRANSITION_NUMERIC}:{joint}')
        transition.append(model.numeric_data[model.numeric_adr[numeric]] if numeric >= 0 else 0.0)
    return ModelIndex(
        joint_names=spec.joint_names,
        prefix=prefix,
        arm_dof=len(spec.arm_joints),
        joint_ids=joint_ids_arr,
        qpos_adr=model.jnt_qposadr[joint_ids_arr].copy(),
        dof_adr=model.jnt_dofadr[joint_ids_arr].copy(),
        ctrl_ids=np.array([*servos, int(gripper[0])]),
        velocity_ids=np.array(dampers),
        base_body=base,
        flange_body=flange,
        object_body=obj,
        object_geoms=np.flatnonzero(model.geom_bodyid == obj) if obj >= 0 else np.zeros(0, int),
        goal_mocap=int(model.body_mocapid[goal]) if goal >= 0 else -1,
        mass_bodies=tuple(model.body(b).name.removeprefix(prefix) for b in robot),
        hand_bodies=hand,
        hand_geoms=np.flatnonzero(np.isin(model.geom_bodyid, hand)),
        nominal_dof=np.array([model.dof_damping, model.dof_armature, model.dof_frictionloss]),
        nominal_transition=np.array(transition, float),
        nominal_gain=model.actuator_gainprm.copy(),
        nominal_bias=model.actuator_biasprm.copy(),
        nominal_mass=model.body_mass.copy(),
        nominal_inertia=model.body_inertia.copy(),
        nominal_friction=model.geom_friction.copy(),
        nominal_ipos=model.body_ipos.copy(),
        nominal_iquat=model.body_iquat.copy(),
        nominal_gravcomp=model.body_gravcomp.copy(),
        nominal_contact=np.array([model.geom_contype, model.geom_conaffinity]),
    )


def _descends(model: mujoco.MjModel, body: int, root: int) -> bool:
    while body > 0 and body != root:
        body = int(model.body_parentid[body])
    return body == root


def _set_gains(model: mujoco.MjModel, spec: RobotSpec, servos: Sequence[int],
               dampers: Sequence[int]) -> None:
    """Write the spec's controller gains (``controller.p``, ``.d``) into the arm actuators.

    With a velocity actuator the law is the JointTrajectoryController's,
    ``p (q_d - q) + d (qd_d - qd)``; a model with a lone position servo gets ``d`` as its
    damping instead (the position-servo law, ``p (q_d - q) - d qd``: no velocity feed-forward).
    """
    for i, (servo, damper) in enumerate(zip(servos, dampers, strict=True)):
        model.actuator_gainprm[servo, 0] = spec.gain_p[i]
        model.actuator_biasprm[servo, 1] = -spec.gain_p[i]
        if damper >= 0:
            model.actuator_gainprm[damper, 0] = spec.gain_d[i]
            model.actuator_biasprm[damper, 2] = -spec.gain_d[i]
        else:
            model.actuator_biasprm[servo, 2] = -spec.gain_d[i]


def apply_sim_params(model: mujoco.MjModel, params: SimParams, index: ModelIndex) -> None:
    """Write ``params`` into ``model`` in place; unset fields get the index's nominal values.

    Touches only MjModel fields (dof damping/armature/frictionloss, servo gain and bias,
    body mass, inertia and centre of mass, gravity compensation, object geom friction, the
    hand's geom contacts) and then recomputes the model's derived constants, so it works on
    any copy of the indexed model (e.g. the models handed to ``mujoco.rollout``). The command
    delay and the sensor biases are not model fields: see
    :func:`simops_sim.delay.delay_steps` and :func:`sensor_bias`. Raises
    :class:`SimParamsError` for names the model does not have.
    """
    apply_arm_params(model, [(params, index)])


def apply_arm_params(model: mujoco.MjModel,
                     arms: Sequence[tuple[SimParams, ModelIndex]]) -> None:
    """:func:`apply_sim_params` for several arms of one model (a :class:`~simops_sim.world.World`).

    The model returns to its nominal values once, then each arm's params are written over
    its own joints, actuators and bodies (the object's fields: the last arm's that sets
    them). Every index must have been taken from the unmodified model.
    """
    _restore_nominal(model, arms[0][1])
    for params, index in arms:
        _write_params(model, params, index)
    mujoco.mj_setConst(model, mujoco.MjData(model))


def _restore_nominal(model: mujoco.MjModel, index: ModelIndex) -> None:
    model.dof_damping[:], model.dof_armature[:], model.dof_frictionloss[:] = index.nominal_dof
    model.actuator_gainprm[:] = index.nominal_gain
    model.actuator_biasprm[:] = index.nominal_bias
    model.body_mass[:] = index.nominal_mass
    model.body_inertia[:] = index.nominal_inertia
    model.body_ipos[:], model.body_iquat[:] = index.nominal_ipos, index.nominal_iquat
    model.body_gravcomp[:] = index.nominal_gravcomp
    model.geom_friction[:] = index.nominal_friction
    model.geom_contype[:], model.geom_conaffinity[:] = index.nominal_contact


def _write_params(model: mujoco.MjModel, params: SimParams, index: ModelIndex) -> None:
    slots = {name: i for i, name in enumerate(index.joint_names)}
    for name, joint in params.joints.items():
        if name not in slots:
            raise SimParamsError(f'field joints.{name}: no such joint in robot '
                                 f'({", ".join(index.joint_names)})')
        i = slots[name]
        dof = index.dof_adr[i]
        for column, value in enumerate((joint.damping, joint.armature, joint.frictionloss)):
            if value is not None:
                (model.dof_damping, model.dof_armature, model.dof_frictionloss)[column][dof] = value
        servo = [key for key in SERVO_FIELDS if getattr(joint, key) is not None]
        if i >= index.arm_dof and servo:
            raise SimParamsError(f'field joints.{name}.{servo[0]}: finger joints have no servo '
                                 'of their own; remove it')
        if i < index.arm_dof:
            act = index.ctrl_ids[i]
            if joint.kp is not None:
                model.actuator_gainprm[act, 0] = joint.kp
                model.actuator_biasprm[act, 1] = -joint.kp
            if joint.kv is not None:
                damper = index.velocity_ids[i]
                if damper >= 0:
                    model.actuator_gainprm[damper, 0] = joint.kv
                    model.actuator_biasprm[damper, 2] = -joint.kv
                else:
                    model.actuator_biasprm[act, 2] = -joint.kv
    # Smooth friction replaces the dry constraint; Physics.step applies it.
    model.dof_frictionloss[index.dof_adr[friction_transitions(params, index) > 0]] = 0.0

    for name, scale in params.body_mass_scale.items():
        if name not in index.mass_bodies:
            raise SimParamsError(f'field body_mass_scale.{name}: not a robot body with mass '
                                 f'({", ".join(index.mass_bodies)})')
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, index.prefix + name)
        model.body_mass[bid] = index.nominal_mass[bid] * scale
        model.body_inertia[bid] = index.nominal_inertia[bid] * scale

    obj = params.object
    if (obj.mass is not None or obj.friction is not None) and index.object_body < 0:
        raise SimParamsError(f'field object: the model has no body {OBJECT_BODY!r}')
    if obj.mass is not None:
        ratio = obj.mass / index.nominal_mass[index.object_body]
        model.body_mass[index.object_body] = obj.mass
        model.body_inertia[index.object_body] = index.nominal_inertia[index.object_body] * ratio
    if obj.friction is not None:
        model.geom_friction[index.object_geoms, 0] = obj.friction
    if params.end_effector == 'none':
        remove_hand(model, index)
    load = params.payload
    if load.mass:
        com = np.array([load.com_x or 0.0, load.com_y or 0.0, load.com_z or 0.0])
        add_point_mass(model, index.flange_body, load.mass, com)
        model.body_gravcomp[index.flange_body] = 1.0   # compensated like a configured load


def remove_hand(model: mujoco.MjModel, index: ModelIndex) -> None:
    """Take the end effector below the flange off ``model``'s dynamics, in place.

    Its bodies keep :data:`REMOVED_MASS` of their mass and inertia and lose their contacts;
    a joint inside it (a finger slide) gets its body's mass as armature, so its own dof is
    as stiff to integrate as before. Call ``mj_setConst`` afterwards.
    """
    hand = index.hand_bodies
    for dof in range(model.nv):
        body = model.dof_bodyid[dof]
        if body in hand:
            model.dof_armature[dof] += model.body_mass[body]
    model.body_mass[hand] *= REMOVED_MASS
    model.body_inertia[hand] *= REMOVED_MASS
    model.geom_contype[index.hand_geoms] = 0
    model.geom_conaffinity[index.hand_geoms] = 0


def add_point_mass(model: mujoco.MjModel, body: int, mass: float, position: np.ndarray) -> None:
    """Fix a point ``mass`` (kg) at ``position`` (3,) m in ``body``'s frame, in place.

    The body's mass, centre of mass, principal inertia and axes become those of the body and
    the point together (parallel-axis theorem). Call ``mj_setConst`` afterwards.
    """
    own = float(model.body_mass[body])
    total = own + mass
    centre = (own * model.body_ipos[body] + mass * position) / total
    axes = np.empty(9)
    mujoco.mju_quat2Mat(axes, model.body_iquat[body])
    axes = axes.reshape(3, 3)
    tensor = axes @ np.diag(model.body_inertia[body]) @ axes.T
    for m, at in ((own, model.body_ipos[body]), (mass, position)):
        d = at - centre
        tensor += m * (d @ d * np.eye(3) - np.outer(d, d))
    principal, rotation = np.linalg.eigh(tensor)
    if np.linalg.det(rotation) < 0:
        rotation[:, 0] *= -1.0
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, rotation.reshape(-1))
    model.body_mass[body] = total
    model.body_ipos[body] = centre
    model.body_inertia[body] = np.maximum(principal, 0.0)
    model.body_iquat[body] = quat


@dataclass(frozen=True)
class SmoothFriction:
    """Friction ``-c tanh(qd / v)`` on ``dofs``: Coulomb levels ``c`` (N*m), transitions ``v``.

    For joints whose SimParams set ``friction_transition``. MuJoCo's dry friction constraint
    switches within a fraction of a mrad/s; a real arm's friction (Gaz et al. identify a
    sigmoid on the Panda) changes sign over tenths of a rad/s, which this smooth law
    follows. Applied as a joint force before every step.
    """

    dofs: np.ndarray
    level: np.ndarray
    transition: np.ndarray
    _scratch: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, '_scratch', np.empty(self.dofs.size))

    @classmethod
    def none(cls) -> SmoothFriction:
        """No smooth friction anywhere."""
        return cls(np.zeros(0, int), np.zeros(0), np.ones(0))

    @classmethod
    def of(cls, params: SimParams, index: ModelIndex) -> SmoothFriction:
        """The smooth friction of ``params`` over the model's nominal values."""
        transition = friction_transitions(params, index)
        smooth = np.flatnonzero(transition > 0)
        level = index.nominal_dof[2, index.dof_adr].copy()
        for i, name in enumerate(index.joint_names):
            joint = params.joints.get(name)
            if joint is not None and joint.frictionloss is not None:
                level[i] = joint.frictionloss
        return cls(index.dof_adr[smooth].copy(), level[smooth], transition[smooth])

    def apply(self, data: mujoco.MjData) -> None:
        """Write the friction at the current velocities into ``data.qfrc_applied``.

        Allocation-free: it runs before every physics step.
        """
        force = self._scratch
        data.qvel.take(self.dofs, out=force)
        np.divide(force, self.transition, out=force)
        np.tanh(force, out=force)
        np.multiply(force, self.level, out=force)
        np.negative(force, out=force)
        data.qfrc_applied.put(self.dofs, force)


def contact_generalised(model: mujoco.MjModel, data: mujoco.MjData, out: np.ndarray) -> None:
    """Write the generalised force (nv,) of the contact rows of the constraint solution.

    ``J^T f``: what the arm's external-torque estimate sees of a collision (joint limits and
    the other constraints excluded). MuJoCo orders the rows equality, friction, limit,
    contact, so the contact rows are the last ``nefc - (ne + nf + nl)``.
    """
    first = data.ne + data.nf + data.nl
    if data.nefc == first:
        out[:] = 0.0
        return
    force = np.zeros(data.nefc)
    force[first:] = data.efc_force[first:]
    mujoco.mj_mulJacTVec(model, data, out, force)


def friction_transitions(params: SimParams, index: ModelIndex) -> np.ndarray:
    """Each joint's smooth-friction transition (9,) rad/s: ``params``' or the model's; 0: dry."""
    transition = index.nominal_transition.copy()
    for i, name in enumerate(index.joint_names):
        joint = params.joints.get(name)
        if joint is not None and joint.friction_transition is not None:
            transition[i] = joint.friction_transition
    return transition


def sensor_bias(params: SimParams, joints: Sequence[str]) -> np.ndarray:
    """Encoder (rad) and torque-sensor (N*m) biases (2, n) of ``joints`` in ``params``."""
    bias = np.zeros((2, len(joints)))
    for i, name in enumerate(joints):
        joint = params.joints.get(name)
        if joint is not None:
            bias[:, i] = joint.encoder_offset or 0.0, joint.torque_offset or 0.0
    return bias


def nominal_sim_params(model: mujoco.MjModel, index: ModelIndex) -> SimParams:
    """Every SimParams field read back from ``model`` (fully set; sysid's starting point).

    Body mass scales are relative to the index's nominal masses; the friction (level and
    transition) is the model's as loaded; the command delay and the sensor biases are 0.
    """
    joints = {}
    for i, name in enumerate(index.joint_names):
        dof = index.dof_adr[i]
        servo = {}
        if i < index.arm_dof:
            act, damper = index.ctrl_ids[i], index.velocity_ids[i]
            servo = {'kp': float(model.actuator_gainprm[act, 0]),
                     'kv': float(model.actuator_gainprm[damper, 0] if damper >= 0
                                 else -model.actuator_biasprm[act, 2])}
        joints[name] = JointParams(damping=float(model.dof_damping[dof]),
                                   armature=float(model.dof_armature[dof]),
                                   frictionloss=float(index.nominal_dof[2, dof]),
                                   friction_transition=float(index.nominal_transition[i]),
                                   encoder_offset=0.0, torque_offset=0.0, **servo)
    scales = {}
    for name in index.mass_bodies:
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, index.prefix + name)
        scales[name] = float(model.body_mass[bid] / index.nominal_mass[bid])
    obj = ObjectParams()
    if index.object_body >= 0:
        obj = ObjectParams(mass=float(model.body_mass[index.object_body]),
                           friction=float(model.geom_friction[index.object_geoms[0], 0]))
    return SimParams(joints=joints, command_delay=0.0, body_mass_scale=scales, object=obj,
                     provenance={'source': 'model nominal'})


@dataclass(frozen=True)
class SimState:
    """A snapshot of the simulation (copies; safe to keep). See the module docstring."""

    time: float                      # s of sim time
    position: np.ndarray             # (9,)
    velocity: np.ndarray             # (9,)
    effort: np.ndarray               # (9,)
    flange_pos: np.ndarray           # (3,) m, base frame
    flange_quat: np.ndarray          # (4,) w, x, y, z
    object_pos: np.ndarray | None    # (3,) or None without an object
    object_quat: np.ndarray | None   # (4,)


class Physics:
    """One MuJoCo model and data, driven by arm position targets and a gripper width.

    ``step`` is allocation-free and name-free; a command delay (from ``SimParams``) sits
    between the targets and the actuators. Same model, params, reset and target sequence
    give bit-identical states. ``reflexes``: stop on the arm's limits (module docstring).
    """

    def __init__(self, model: mujoco.MjModel, spec: RobotSpec,
                 joint_map: Mapping[str, str] | None = None,
                 params: SimParams | None = None, reflexes: bool = False,
                 prefix: str = '', data: mujoco.MjData | None = None) -> None:
        self.model = model
        self.spec = spec
        self.index = index_model(model, spec, joint_map, prefix)
        self.stop: ProtectiveStop | None = None
        self._reflexes = Reflexes(spec) if reflexes else None
        arm = self.index.arm_dof
        self._measured = np.zeros((3, arm))   # position, velocity, contact torque of the arm
        self._generalised = np.zeros(model.nv)
        self._arm_qpos, self._arm_dofs = self.index.qpos_adr[:arm], self.index.dof_adr[:arm]
        self.nominal = nominal_sim_params(model, self.index)
        self.shared = data is not None   # one arm of a World, which writes the model and resets
        self.data = mujoco.MjData(model) if data is None else data
        self.params = SimParams()
        dampers = self.index.velocity_ids
        self._slots = np.flatnonzero(dampers >= 0)   # arm joints with a velocity actuator
        self._ids = np.concatenate((self.index.ctrl_ids, dampers[self._slots]))
        self._command = np.zeros(self._ids.size)   # actuator inputs, delayed as one vector
        self._target = self._command[:self.index.ctrl_ids.size]   # (8,) arm rad, gripper m
        self._velocity = self._command[self.index.ctrl_ids.size:]  # desired rad/s
        self._delay = CommandDelay(0, self._command.size)
        self._bias = np.zeros((2, len(self.index.joint_names)))   # encoder rad, torque N*m
        self._smooth = SmoothFriction.none()
        self._plan: TrajectoryPlan | None = None
        self._plan_out = np.zeros((2, self.index.arm_dof))   # sampled rad, rad/s
        gripper = self.index.ctrl_ids[-1]
        self._gripper_force = float(model.actuator_forcerange[gripper, 1])   # N, the model's
        self._gripper_goal: tuple[float, float] | None = None   # width m, speed m/s
        warning = mujoco.mjtWarning
        self._reset_warnings = tuple(self.data.warning[w] for w in (
            warning.mjWARN_BADQPOS, warning.mjWARN_BADQVEL, warning.mjWARN_BADQACC))
        self._reported_resets = 0   # MuJoCo's own resets already reported
        if self.shared:
            self.take_params(params or SimParams())
        else:
            self.apply_params(params or SimParams())
            self.reset_keyframe(None)

    @property
    def time(self) -> float:
        """Sim time (s)."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Physics step (s)."""
        return float(self.model.opt.timestep)

    @property
    def arm_target(self) -> np.ndarray:
        """The arm target (7,) rad at the current sim time (a copy).

        While a plan is followed it is the plan's position now, where a new trajectory
        taken over now starts, as JointTrajectoryController starts one from its last
        commanded state.
        """
        target = self._target[:self.index.arm_dof].copy()
        if self._plan is not None:
            self._plan.sample(self.data.time, target)
        return target

    @property
    def delay_steps(self) -> int:
        """Physics steps between setting a target and the actuators seeing it."""
        return self._delay.steps

    def apply_params(self, params: SimParams) -> None:
        """Apply ``params`` (see :func:`apply_sim_params`), the sensor biases and the delay."""
        self._own_world('apply_params')
        apply_sim_params(self.model, params, self.index)
        self.take_params(params)

    def take_params(self, params: SimParams) -> None:
        """Take the parts of ``params`` that are not model fields (biases, friction, delay).

        The model fields are the caller's to write (:func:`apply_arm_params`).
        """
        self._bias[:] = sensor_bias(params, self.index.joint_names)
        self._smooth = SmoothFriction.of(params, self.index)
        steps = delay_steps(params.command_delay or 0.0, self.timestep)
        if steps != self._delay.steps:
            self._delay = CommandDelay(steps, self._command.size)
            self._delay.fill(self._command)
        self.params = params

    @property
    def following(self) -> bool:
        """Whether a trajectory plan drives the arm targets."""
        return self._plan is not None

    def arm_desired(self) -> tuple[np.ndarray, np.ndarray]:
        """The controller's current targets: position (7,) rad and velocity (7,) rad/s."""
        arm = self.index.arm_dof
        return self._target[:arm].copy(), self._velocity[:arm].copy()

    def follow(self, plan: TrajectoryPlan,
               speed: np.ndarray | None = None) -> ProtectiveStop | None:
        """Drive the arm targets from ``plan``, sampled at every physics step until it ends.

        Each step's targets are the plan's position and velocity at that step's sim time, as
        JointTrajectoryController samples its trajectory every control cycle. It replaces
        any plan being followed; :meth:`set_arm_target`, :meth:`hold` and the resets end it.
        With reflexes, returns the stop that refused the plan: the one in force, or the one
        a plan faster than the velocity limits trips (the arm then holds); else None.
        ``speed`` (7,) rad/s: the commanded speed to judge instead of the plan's
        :meth:`~TrajectoryPlan.peak_speed` (a stream's step as sent).
        """
        if self._reflexes is not None:
            if self.stop is None:
                commanded = plan.peak_speed() if speed is None else speed
                self._latch(self._reflexes.command(commanded, self.time, plan.segments()))
            if self.stop is not None:
                return self.stop
        self._plan = plan
        return None

    def set_collision_torque(self, threshold: np.ndarray) -> None:
        """The collision reflex's threshold (7,) N*m from now on (no effect without reflexes)."""
        if self._reflexes is not None:
            self._reflexes.set_collision_torque(threshold)

    def clear_stop(self) -> ProtectiveStop | None:
        """End a protective stop (franka_msgs' ErrorRecovery); return the one that ended.

        The arm keeps holding where it stopped.
        """
        cleared, self.stop = self.stop, None
        return cleared

    def _latch(self, stop: ProtectiveStop | None) -> None:
        if stop is not None:
            self.stop = stop
            self.hold()

    def contact_torque(self, out: np.ndarray) -> None:
        """Write the joint torques (7,) N*m that the contacts apply to the arm into ``out``.

        See :func:`contact_generalised`; the arm's entries of it.
        """
        contact_generalised(self.model, self.data, self._generalised)
        self._generalised.take(self._arm_dofs, out=out)

    def set_arm_target(self, q: np.ndarray, qd: np.ndarray | None = None) -> None:
        """Arm targets: position ``q`` (7,) rad and desired velocity ``qd`` (7,) rad/s.

        ``qd`` None means 0 (a position target). The controller acts on both errors,
        ``p (q - q_meas) + d (qd - qd_meas)``, like franka_ros2's JointTrajectoryController.
        A plan being followed ends.
        """
        self._plan = None
        self._put_target(q, qd)

    def _put_target(self, q: np.ndarray, qd: np.ndarray | None) -> None:
        self._target[:self.index.arm_dof] = q
        if qd is None:
            self._velocity[:] = 0.0
        else:
            np.take(qd, self._slots, out=self._velocity)   # no allocation at 1 kHz

    def set_gripper_width(self, width: float) -> None:
        """Gripper opening target (m); the servo clamps it to its ctrlrange.

        Ends a :meth:`move_gripper` motion and restores the model's gripper force.
        """
        self._gripper_goal = None
        self._set_gripper_force(self._gripper_force)
        self._target[self.index.arm_dof] = width

    def move_gripper(self, width: float, speed: float, force: float) -> None:
        """Ramp the gripper target from the measured opening to ``width`` (m) at ``speed``.

        ``speed`` m/s; the fingers push with at most ``force`` N (capped at the model's), so
        they stop where something blocks them.
        """
        self._target[self.index.arm_dof] = self.gripper_width()[0]
        self._gripper_goal = (width, speed)
        self._set_gripper_force(min(force, self._gripper_force))

    def gripper_width(self) -> tuple[float, float]:
        """The measured opening (m) and its rate (m/s): the ``gripper_width`` tendon."""
        adr = self.index.qpos_adr[self.index.arm_dof:]
        dofs = self.index.dof_adr[self.index.arm_dof:]
        return float(gripper_width(self.data.qpos[adr])), float(gripper_width(self.data.qvel[dofs]))

    def _set_gripper_force(self, force: float) -> None:
        self.model.actuator_forcerange[self.index.ctrl_ids[-1]] = (-force, force)

    def hold(self) -> None:
        """Target the arm's current position at rest (a stop), keeping the gripper target."""
        arm = self.index.arm_dof
        self._plan = None
        self._target[:arm] = self.data.qpos[self.index.qpos_adr[:arm]]
        self._velocity[:] = 0.0

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps with the current targets or the plan's."""
        self._own_world('step')
        model, data = self.model, self.data
        for _ in range(n):
            self.drive()
            mujoco.mj_step(model, data)
            self.check()

    def drive(self) -> None:
        """Before a physics step: sample the plan, ramp the gripper, set the actuators."""
        data = self.data
        if self._plan is not None:
            out = self._plan_out
            finished = self._plan.sample(data.time, out[0], out[1])
            self._put_target(out[0], out[1])
            if finished:
                self._plan = None
        if self._gripper_goal is not None:
            width, speed = self._gripper_goal
            gripper = self.index.arm_dof
            now = self._target[gripper]
            reach = speed * self.model.opt.timestep
            self._target[gripper] = now + max(-reach, min(reach, width - now))
        data.ctrl.put(self._ids, self._delay.push(self._command))
        if self._smooth.dofs.size:
            self._smooth.apply(data)

    def check(self) -> None:
        """After a physics step: latch the protective stop the measured state trips, if any."""
        if self._reflexes is not None and self.stop is None:
            self._check_reflexes(self._reflexes)

    def _own_world(self, action: str) -> None:
        if self.shared:
            raise RuntimeError(f'{action} acts on the whole world: call it on the World, not '
                               f'on arm {self.index.prefix!r}')

    def _check_reflexes(self, reflexes: Reflexes) -> None:
        """Latch the stop the measured arm state trips, if any (the true state, no bias)."""
        measured, data = self._measured, self.data
        data.qpos.take(self._arm_qpos, out=measured[0])
        data.qvel.take(self._arm_dofs, out=measured[1])
        self.contact_torque(measured[2])
        if not reflexes.within(measured):
            self._latch(reflexes.measure(measured[0], measured[1], measured[2], self.time))

    def diverged(self) -> str | None:
        """Why the state is unusable, or None when it is fine.

        Unusable: NaN or Inf, a dof faster than :data:`MAX_SPEED`, or MuJoCo's own reset on a
        bad position, velocity or acceleration (``mjWARN_BADQPOS``, ``_BADQVEL``,
        ``_BADQACC``), which moved the arm to the model's qpos0 and zeroed the clock; each
        such reset is reported once. The usual case costs about 1.5 us (two dot products and
        three counters), an eighth of a physics step.
        """
        data = self.data
        qvel = data.qvel
        resets = self._resets()
        if (qvel.dot(qvel) < MAX_SPEED**2 and math.isfinite(data.qpos.dot(data.qpos))
                and resets == self._reported_resets):
            return None
        if resets != self._reported_resets:
            self._reported_resets = resets
            kind, warning = next((k, w) for k, w in zip(('position', 'velocity', 'acceleration'),
                                                        self._reset_warnings, strict=True)
                                 if w.number)
            return f'MuJoCo reset an unstable simulation (bad {kind} at dof {warning.lastinfo})'
        if not (np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(qvel))):
            return 'non-finite position or velocity'
        speed = float(np.abs(qvel).max(initial=0.0))
        if speed > MAX_SPEED:
            return f'a dof moves at {speed:.3g}, beyond {MAX_SPEED:g} rad/s or m/s'
        return None

    def _resets(self) -> int:
        """How many times MuJoCo reset the data by itself since the last reset here."""
        bad_qpos, bad_qvel, bad_qacc = self._reset_warnings
        return bad_qpos.number + bad_qvel.number + bad_qacc.number

    def recover(self, name: str | None, time: float) -> None:
        """After a divergence: back to keyframe ``name``, holding it, at sim ``time`` (s).

        ``time`` is passed in because MuJoCo's own reset has already zeroed the clock.
        """
        self.reset_keyframe(name)
        self.data.time = time

    def reset_keyframe(self, name: str | None) -> None:
        """Reset to keyframe ``name`` with the keyframe's ctrl as targets.

        ``None`` resets to the model's qpos0, holding that position.

        Sim time restarts at 0 and queued delayed commands are dropped.
        """
        self._own_world('reset_keyframe')
        if name is None:
            self.reset_joints(self.model.qpos0[self.index.qpos_adr])
            return
        mujoco.mj_resetDataKeyframe(self.model, self.data, keyframe_id(self.model, name))
        self.settle()

    def reset_joints(self, position: np.ndarray, velocity: np.ndarray | None = None) -> None:
        """Reset to joint ``position`` / ``velocity`` (9,) with targets holding that position.

        Everything else (object, goal) returns to the model's qpos0; sim time restarts at 0.
        """
        self._own_world('reset_joints')
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.index.qpos_adr] = position
        if velocity is not None:
            self.data.qvel[self.index.dof_adr] = velocity
        mujoco.mj_forward(self.model, self.data)
        self.hold_here()

    def hold_here(self) -> None:
        """After a reset of the data: hold the arm's current position (see :meth:`settle`)."""
        self.data.ctrl[self.index.ctrl_ids] = self.data.actuator_length[self.index.ctrl_ids]
        self.data.ctrl[self._ids[self.index.ctrl_ids.size:]] = 0.0
        self.settle()

    def settle(self) -> None:
        """After a reset of the data: the actuators' inputs become the arm's targets.

        Queued delayed commands, a plan, a stop and a gripper motion end.
        """
        self._plan = None
        self.stop = None
        self._gripper_goal = None
        self._set_gripper_force(self._gripper_force)
        self._reported_resets = self._resets()
        mujoco.mj_forward(self.model, self.data)
        self._command[:] = self.data.ctrl[self._ids]
        self._delay.fill(self._command)

    def read_joints(self, out: np.ndarray | Sequence[np.ndarray]) -> None:
        """Fill ``out`` (a (3, 9) array or three (9,) arrays) with position, velocity, effort.

        As the arm's sensors measure them: position and effort include the encoder and
        torque-sensor biases of the applied SimParams.
        """
        data, index = self.data, self.index
        data.qpos.take(index.qpos_adr, out=out[0])
        data.qvel.take(index.dof_adr, out=out[1])
        data.qfrc_actuator.take(index.dof_adr, out=out[2])
        out[0] += self._bias[0]
        out[2] += self._bias[1]

    def state(self) -> SimState:
        """A copy of the current state (joints, flange and object poses in the base frame)."""
        joints = np.empty((3, len(self.index.joint_names)))
        self.read_joints(joints)
        flange_pos, flange_quat = self.body_pose(self.index.flange_body)
        object_pos = object_quat = None
        if self.index.object_body >= 0:
            object_pos, object_quat = self.body_pose(self.index.object_body)
        return SimState(self.time, joints[0], joints[1], joints[2], flange_pos, flange_quat,
                        object_pos, object_quat)

    def body_pose(self, body: int) -> tuple[np.ndarray, np.ndarray]:
        """Pose of body id ``body`` in the base frame: position (3,) m, quat (4,) wxyz."""
        data, base = self.data, self.index.base_body
        base_inv = np.empty(4)
        mujoco.mju_negQuat(base_inv, data.xquat[base])
        pos, quat = np.empty(3), np.empty(4)
        mujoco.mju_rotVecQuat(pos, data.xpos[body] - data.xpos[base], base_inv)
        mujoco.mju_mulQuat(quat, base_inv, data.xquat[body])
        return pos, quat

    def set_goal_pose(self, pos: np.ndarray, quat: np.ndarray) -> bool:
        """Move the goal marker to a base-frame pose (m, wxyz); False if the model has none."""
        mocap = self.index.goal_mocap
        if mocap < 0:
            return False
        data, base = self.data, self.index.base_body
        world = np.empty(3)
        mujoco.mju_rotVecQuat(world, np.asarray(pos, float), data.xquat[base])
        data.mocap_pos[mocap] = world + data.xpos[base]
        mujoco.mju_mulQuat(data.mocap_quat[mocap], data.xquat[base], np.asarray(quat, float))
        return True
