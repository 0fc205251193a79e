"""Velocity commands to joint velocities, as moveit_servo servoes an arm (no rclpy).

A teleoperator commands the hand's velocity (a twist: linear m/s and angular rad/s about the
TCP, in the robot's base frame) or joint velocities (rad/s). :func:`twist_velocities` and
:func:`jog_velocities` turn them into arm joint velocities (7,) rad/s by moveit_servo's
rules (moveit2 2.15.0, ``moveit_ros/moveit_servo``; defaults from its
``config/servo_parameters.yaml``, kept in SimOps' config/parameters/teleop.yaml):

- **speed caps** (``command_in_type: speed_units``): a twist whose linear (angular) speed
  exceeds ``scale.linear`` (``scale.rotational``) is scaled down to it, direction kept
  (src/utils/command.cpp:181-198);
- **the inverse**: ``J qd = v`` on the TCP Jacobian (6, 7), by least squares
  (command.cpp:301-360 uses the Jacobian's pseudo-inverse when no IK plugin is loaded);
  here damped by ``damping``, so a command near a singularity asks for bounded speeds;
- **singularities**: with κ the Jacobian's condition number, full speed below
  ``lower_singularity_threshold`` (17), a halt above ``hard_stop_singularity_threshold``
  (30), and in between a scale ``1 - (κ - lower) / (upper - lower)``, ``upper`` the hard
  stop when the command moves towards the singularity, ``lower + 2 (hard - lower)`` when
  it moves away (``leaving_singularity_threshold_multiplier``); the direction towards it is
  the left singular vector of the smallest singular value, its sign fixed by a small step
  (``singularity_step_scale``) along it (src/utils/common.cpp:282-377,
  servo_parameters.yaml:274-310);
- **joint bounds**: a joint within ``joint_limit_margins`` (0.1 rad) of a position bound
  and moving towards it halts every joint (``halt_all_joints_in_cartesian_mode`` and
  ``_in_joint_mode``, both true: common.cpp:406-443, servo_parameters.yaml:314-330;
  servo.cpp:351-352); a joint velocity beyond its limit scales the whole vector down
  (``jointLimitVelocityScalingFactor``, common.cpp:379-404).

A **joint jog** (control_msgs/JointJog) names some joints and a velocity for each: a name
the arm lacks, or a count of velocities other than of names, makes the whole command invalid
(command.cpp:95-120); displacements are not served (servo_node.cpp:235-238): see
:func:`jog_command`.

SimOps adds a **workspace box** for the TCP: a linear velocity component that would take the
TCP out of the box (above the table) is removed before the inverse. Every output still goes
through the shared safety pipeline (:mod:`simops_core.safety`) in the node, as every policy
target does.

Status codes are moveit_servo's ``StatusCode`` (include/moveit_servo/utils/datatypes.hpp:52-72).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from functools import partial
from typing import Any

import mujoco
import numpy as np

from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_core.robot_spec import RobotSpec
from simops_sim.model_index import index_model


class ServoStatus(IntEnum):
    """moveit_servo's ``StatusCode`` values (datatypes.hpp:52-62)."""

    INVALID = -1
    NO_WARNING = 0
    DECELERATE_FOR_APPROACHING_SINGULARITY = 1
    HALT_FOR_SINGULARITY = 2
    DECELERATE_FOR_LEAVING_SINGULARITY = 3
    DECELERATE_FOR_COLLISION = 4
    HALT_FOR_COLLISION = 5
    JOINT_BOUND = 6


STATUS_TEXT = {   # moveit_servo's SERVO_STATUS_CODE_MAP (datatypes.hpp:64-72)
    ServoStatus.INVALID: 'Invalid',
    ServoStatus.NO_WARNING: 'No warnings',
    ServoStatus.DECELERATE_FOR_APPROACHING_SINGULARITY:
        'Moving closer to a singularity, decelerating',
    ServoStatus.HALT_FOR_SINGULARITY: 'Very close to a singularity, emergency stop',
    ServoStatus.DECELERATE_FOR_LEAVING_SINGULARITY: 'Moving away from a singularity, decelerating',
    ServoStatus.DECELERATE_FOR_COLLISION: 'Close to a collision, decelerating',
    ServoStatus.HALT_FOR_COLLISION: 'Collision detected, emergency stop',
    ServoStatus.JOINT_BOUND: 'Close to a joint bound (position or velocity), halting',
}


@dataclass(frozen=True)
class ServoSettings:
    """moveit_servo's parameters that the law uses, and SimOps' box.

    ``linear`` m/s and ``rotational`` rad/s: the speed caps (``scale``); the singularity
    thresholds are condition numbers; ``margin`` rad: ``joint_limit_margins``; ``damping``:
    the least-squares damping (m, rad); ``box`` (2, 3) m: the TCP's lower and upper corners
    in the base frame. The node's parameters set the caps, thresholds and margin; their
    defaults (moveit_servo's) live once, in config/parameters/teleop.yaml:
    :meth:`defaults`.
    """

    linear: float
    rotational: float
    lower_singularity_threshold: float
    hard_stop_singularity_threshold: float
    margin: float
    leaving_singularity_threshold_multiplier: float = 2.0
    singularity_step_scale: float = 0.01
    damping: float = 0.01
    box: tuple[tuple[float, float, float], tuple[float, float, float]] = (
        (0.1, -0.6, 0.01), (0.85, 0.6, 0.9))

    @classmethod
    def from_parameters(cls, values: Any, **others: Any) -> ServoSettings:
        """From the teleop node's parameter values, as attributes or a mapping.

        They are ``linear_speed``, ``rotational_speed``, the two singularity thresholds and
        ``joint_limit_margin``.
        """
        get = values.get if isinstance(values, Mapping) else partial(getattr, values)
        return cls(linear=float(get('linear_speed')), rotational=float(get('rotational_speed')),
                   lower_singularity_threshold=float(get('lower_singularity_threshold')),
                   hard_stop_singularity_threshold=float(
                       get('hard_stop_singularity_threshold')),
                   margin=float(get('joint_limit_margin')), **others)

    @classmethod
    def defaults(cls, **others: Any) -> ServoSettings:
        """The teleop node's defaults (config/parameters/teleop.yaml); ``others`` replace."""
        return replace(cls.from_parameters(defaults(load_parameter_schema('teleop'))),
                       **others)


@dataclass(frozen=True)
class ServoResult:
    """Joint velocities (7,) rad/s and the moveit_servo status that shaped them."""

    velocity: np.ndarray
    status: ServoStatus


class TcpKinematics:
    """The arm's TCP from its MJCF: position (3,) m and Jacobian (6, 7), base frame.

    The hand's ``tcp`` site (franka_description's ``<robot>_hand_tcp``), or the flange for
    an arm without a hand. Kinematics only: its own ``MjData``, positions set, no dynamics.
    """

    def __init__(self, model: mujoco.MjModel, spec: RobotSpec) -> None:
        self.model, self.spec = model, spec
        self.data = mujoco.MjData(model)
        self.index = index_model(model, spec)
        arm = len(spec.arm_joints)
        self._qpos, self._dofs = self.index.qpos_adr[:arm], self.index.dof_adr[:arm]
        self._jacp, self._jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))

    def at(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The TCP position (3,) m and Jacobian (6, 7) (linear rows first) at ``q`` (7,) rad."""
        model, data, index = self.model, self.data, self.index
        data.qpos[self._qpos] = q
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        if index.tcp_site >= 0:
            mujoco.mj_jacSite(model, data, self._jacp, self._jacr, index.tcp_site)
            point = data.site_xpos[index.tcp_site]
        else:
            mujoco.mj_jacBody(model, data, self._jacp, self._jacr, index.flange_body)
            point = data.xpos[index.flange_body]
        to_base = data.xmat[index.base_body].reshape(3, 3).T
        jacobian = np.vstack((to_base @ self._jacp[:, self._dofs],
                              to_base @ self._jacr[:, self._dofs]))
        return to_base @ (point - data.xpos[index.base_body]), jacobian


    def rotation(self, q: np.ndarray) -> np.ndarray:
        """The TCP frame's orientation (3, 3) in the base frame at ``q`` (7,) rad.

        Maps a vector given in the TCP frame (a twist in ``<robot>_hand_tcp``) to the base
        frame.
        """
        self.at(q)
        data, index = self.data, self.index
        tcp = (data.site_xmat[index.tcp_site] if index.tcp_site >= 0
               else data.xmat[index.flange_body]).reshape(3, 3)
        return data.xmat[index.base_body].reshape(3, 3).T @ tcp


def cap_speed(twist: np.ndarray, settings: ServoSettings) -> np.ndarray:
    """``twist`` (6,) with its linear and angular parts scaled down to the speed caps."""
    out = np.array(twist, dtype=float)
    for part, cap in ((slice(0, 3), settings.linear), (slice(3, 6), settings.rotational)):
        speed = float(np.linalg.norm(out[part]))
        if cap > 0.0 and speed > cap:
            out[part] *= cap / speed
    return out


def keep_in_box(position: np.ndarray, twist: np.ndarray, settings: ServoSettings
                ) -> np.ndarray:
    """``twist`` (6,) without the linear components that leave the box at ``position`` (3,)."""
    low, high = np.asarray(settings.box, dtype=float)
    out = np.array(twist, dtype=float)
    leaving = ((position <= low) & (out[:3] < 0.0)) | ((position >= high) & (out[:3] > 0.0))
    out[:3][leaving] = 0.0
    return out


def _solve(jacobian: np.ndarray, twist: np.ndarray, damping: float) -> np.ndarray:
    """Damped least squares: ``J^T (J J^T + damping^2 I)^-1 twist`` (7,)."""
    gram = jacobian @ jacobian.T + damping**2 * np.eye(jacobian.shape[0])
    return jacobian.T @ np.linalg.solve(gram, twist)


def singularity_scale(kinematics: TcpKinematics, q: np.ndarray, jacobian: np.ndarray,
                      delta: np.ndarray, settings: ServoSettings
                      ) -> tuple[float, ServoStatus]:
    """moveit_servo's ``velocityScalingFactorForSingularity`` (common.cpp:282-377).

    ``jacobian`` (6, 7) at ``q`` (7,) rad; ``delta`` (6,) the commanded Cartesian motion.
    """
    u, s, vt = np.linalg.svd(jacobian, full_matrices=False)
    condition = float(s[0] / s[-1])
    towards = u[:, -1].copy()
    step = towards * settings.singularity_step_scale
    pinv = vt.T @ np.diag(1.0 / s) @ u.T
    _, next_jacobian = kinematics.at(q + pinv @ step)
    next_s = np.linalg.svd(next_jacobian, compute_uv=False)
    if next_s[0] / next_s[-1] <= condition:
        towards = -towards
    approaching = float(towards @ delta) > 0.0
    lower, hard = settings.lower_singularity_threshold, settings.hard_stop_singularity_threshold
    upper = hard if approaching else (
        lower + (hard - lower) * settings.leaving_singularity_threshold_multiplier)
    if lower < condition < hard:
        status = (ServoStatus.DECELERATE_FOR_APPROACHING_SINGULARITY if approaching
                  else ServoStatus.DECELERATE_FOR_LEAVING_SINGULARITY)
        return 1.0 - (condition - lower) / (upper - lower), status
    if condition >= hard:
        return 0.0, ServoStatus.HALT_FOR_SINGULARITY
    return 1.0, ServoStatus.NO_WARNING


def bound_joints(q: np.ndarray, velocity: np.ndarray, spec: RobotSpec,
                 settings: ServoSettings) -> tuple[np.ndarray, bool]:
    """The velocity (7,) rad/s within the joint bounds, and whether a joint bound halted it.

    Scaled down as a whole to the velocity limits (``jointLimitVelocityScalingFactor``); all
    joints halted when one, within ``margin`` of a position bound, moves towards it
    (``jointVariablesToHalt`` with ``halt_all_joints_*`` true).
    """
    moving = velocity != 0.0   # each moving joint's clipped share of its velocity, <= 1
    ratios = np.clip(velocity[moving], -spec.velocity[moving], spec.velocity[moving]
                     ) / velocity[moving]
    out = velocity * float(ratios.min(initial=1.0))
    towards = (((out < 0.0) & (q < spec.position_lower + settings.margin))
               | ((out > 0.0) & (q > spec.position_upper - settings.margin)))
    if towards.any():
        return np.zeros_like(out), True
    return out, False


def twist_velocities(kinematics: TcpKinematics, q: np.ndarray, twist: np.ndarray,
                     period: float, settings: ServoSettings) -> ServoResult:
    """Joint velocities (7,) rad/s for the TCP ``twist`` (6,) (m/s, rad/s, base frame).

    ``q`` (7,) rad: where the arm is (or its current target); ``period`` s: the servo
    period, over which moveit_servo judges the commanded motion.
    """
    if not (np.all(np.isfinite(twist)) and np.all(np.isfinite(q))):
        return ServoResult(np.zeros(len(q)), ServoStatus.INVALID)
    if not np.any(twist):
        return ServoResult(np.zeros(len(q)), ServoStatus.NO_WARNING)
    position, jacobian = kinematics.at(q)
    commanded = keep_in_box(position, cap_speed(twist, settings), settings)
    if not np.any(commanded):   # the box took all of it
        return ServoResult(np.zeros(len(q)), ServoStatus.NO_WARNING)
    velocity = _solve(jacobian, commanded, settings.damping)
    scale, status = singularity_scale(kinematics, q, jacobian, commanded * period, settings)
    velocity, halted = bound_joints(q, velocity * scale, kinematics.spec, settings)
    return ServoResult(velocity, ServoStatus.JOINT_BOUND if halted else status)


def jog_velocities(q: np.ndarray, velocity: np.ndarray, spec: RobotSpec,
                   settings: ServoSettings) -> ServoResult:
    """Joint jog ``velocity`` (7,) rad/s at ``q`` (7,) rad, within the joint bounds."""
    velocity = np.asarray(velocity, dtype=float)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(velocity))):
        return ServoResult(np.zeros(len(q)), ServoStatus.INVALID)
    out, halted = bound_joints(q, velocity, spec, settings)
    return ServoResult(out, ServoStatus.JOINT_BOUND if halted else ServoStatus.NO_WARNING)


def jog_command(names: Sequence[str], velocities: Sequence[float],
                displacements: Sequence[float], arm_joints: Sequence[str]
                ) -> tuple[np.ndarray | None, str]:
    """A JointJog's velocities (a,) rad/s in ``arm_joints`` order, and a note ('' if none).

    Joints it does not name jog at zero. None, with the reason, for a command moveit_servo
    refuses: a name that is not an arm joint, a velocity count other than the names', a
    non-finite velocity, or only displacements; displacements beside velocities are
    ignored, with a note.
    """
    if len(velocities) != len(names):
        note = ('displacements are not served; send velocities' if displacements
                and not velocities else f'{len(names)} joint names with {len(velocities)} '
                'velocities; each name needs one')
        return None, note
    out = np.zeros(len(arm_joints))
    for name, velocity in zip(names, velocities, strict=True):
        if name not in arm_joints:
            return None, f'no arm joint {name!r} (the arm\'s: {", ".join(arm_joints)})'
        out[list(arm_joints).index(name)] = velocity
    if not np.all(np.isfinite(out)):
        return None, 'a velocity is not finite'
    return out, 'displacements are ignored; velocities are served' if displacements else ''
