"""The MJCF model of an arm: loading, and where the robot spec's joints and actuators are in it.

:func:`index_model` maps a robot spec's joints (renamed through a ``joint_map``, prefixed
for an arm attached twice) onto a model's joints, actuators, bodies and tendon, keeps the
model's nominal values (what :mod:`simops_sim.model_params` restores), and writes the
spec's controller gains by the one rule, :func:`write_gains` (no rclpy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from simops_core.command_line import ConfigError
from simops_core.paths import resolve_resource
from simops_core.robot_spec import RobotSpec

GRIPPER_TENDON = 'gripper_width'
OBJECT_BODY = 'object'
TRANSITION_NUMERIC = 'friction_transition'   # <numeric name="friction_transition:JOINT">
GOAL_BODY = 'goal'
TCP_SITE = 'tcp'   # the hand's tool centre point, Franka's end-effector frame


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
    tcp_site: int                    # the hand's TCP (franka_description's <robot>_hand_tcp); -1
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
    for i, (servo, damper) in enumerate(zip(servos, dampers, strict=True)):
        write_gains(model, servo, damper, spec.gain_p[i], spec.gain_d[i])
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
        tcp_site=mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, prefix + TCP_SITE),
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

def write_gains(model: mujoco.MjModel, servo: int, damper: int, kp: float | None,
                kv: float | None) -> None:
    """Write a joint's controller gains into its actuators, in place (None: leave it).

    ``kp`` (N*m/rad) is the position servo's; ``kv`` (N*m*s/rad) the velocity actuator's
    (``damper``), the JointTrajectoryController's law ``kp (q_d - q) + kv (qd_d - qd)``; a
    joint without one (``damper`` < 0) gets ``kv`` as the servo's damping instead (the
    position-servo law, ``kp (q_d - q) - kv qd``: no velocity feed-forward).
    """
    if kp is not None:
        model.actuator_gainprm[servo, 0] = kp
        model.actuator_biasprm[servo, 1] = -kp
    if kv is not None:
        if damper >= 0:
            model.actuator_gainprm[damper, 0] = kv
            model.actuator_biasprm[damper, 2] = -kv
        else:
            model.actuator_biasprm[servo, 2] = -kv


def read_gains(model: mujoco.MjModel, servo: int, damper: int) -> tuple[float, float]:
    """A joint's (kp, kv) as :func:`write_gains` wrote them."""
    kv = model.actuator_gainprm[damper, 0] if damper >= 0 else -model.actuator_biasprm[servo, 2]
    return float(model.actuator_gainprm[servo, 0]), float(kv)

