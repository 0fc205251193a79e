"""SimParams written into a model, and read back from one (no rclpy).

:func:`apply_sim_params` is the one code path by which fitted or randomised physics reach
MuJoCo, for the simulator node, the envs and sysid alike: joint damping, armature and
friction, the controller's gains, body masses, the object, the end effector and a payload.
The command delay and the sensor biases are no model fields (:mod:`simops_sim.delay`,
:func:`sensor_bias`). :func:`controller_gains` gives an arm's gains under either controller
law (``SimParams.controller``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import (
    CONTROLLER_LAWS,
    SERVO_FIELDS,
    JointParams,
    ObjectParams,
    SimParams,
    SimParamsError,
)
from simops_sim.friction import friction_transitions
from simops_sim.model_index import OBJECT_BODY, ModelIndex, read_gains, write_gains

# end_effector: none keeps this fraction of the hand's masses and inertias (MuJoCo needs a
# positive mass under a joint); each finger slide keeps its own inertia as armature, so the
# finger dofs integrate as before while the arm carries nothing.
REMOVED_MASS = 1e-6


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
            write_gains(model, index.ctrl_ids[i], index.velocity_ids[i], joint.kp, joint.kv)
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


def controller_model(model: mujoco.MjModel, params: SimParams, index: ModelIndex
                     ) -> mujoco.MjModel:
    """A copy of ``model`` as the arm's own controller knows it.

    The nominal dynamics carrying ``params``' end effector and payload (what a user
    configures on the arm, as Desk's end-effector settings), none of the fitted or
    randomised physics: the impedance loop's feedforward (:mod:`simops_sim.feedforward`)
    comes from it, in the simulator and in ``fit``'s replay alike.
    """
    out = copy.copy(model)
    apply_sim_params(out, SimParams(end_effector=params.end_effector, payload=params.payload),
                     index)
    return out


def controller_gains(spec: RobotSpec, params: SimParams, law: str
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The arm joints' gains under controller ``law``: p (a,) N*m/rad and d (a,) N*m*s/rad.

    ``law`` is one of :data:`~simops_core.sim_params.CONTROLLER_LAWS`. The robot spec's
    nominal gains of that law (``controller`` for ``joint_trajectory``, ``joint_impedance``
    for the arm's own loop), each replaced by ``params``' ``kp`` or ``kv`` where ``params``
    are that law's (:attr:`SimParams.controller`, default ``joint_trajectory``).
    """
    if law not in CONTROLLER_LAWS:
        raise ValueError(f'unknown controller law {law!r}; use one of '
                         f'{", ".join(CONTROLLER_LAWS)}')
    if law == 'joint_trajectory':
        p, d = spec.gain_p.copy(), spec.gain_d.copy()
    else:
        p, d = spec.impedance_p.copy(), spec.impedance_d.copy()
    if (params.controller or CONTROLLER_LAWS[0]) == law:
        for i, name in enumerate(spec.arm_joints):
            joint = params.joints.get(name)
            if joint is not None:
                p[i] = p[i] if joint.kp is None else joint.kp
                d[i] = d[i] if joint.kv is None else joint.kv
    return p, d


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
            servo = dict(zip(('kp', 'kv'), read_gains(model, index.ctrl_ids[i],
                                                        index.velocity_ids[i]), strict=True))
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
