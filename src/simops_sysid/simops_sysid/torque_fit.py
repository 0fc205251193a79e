"""Torque mode: joint friction and torque-sensor offsets from measured efforts (no rclpy).

Franka publishes its link-side joint torques ``tau_J`` as ``JointState.effort``. They equal
the rigid-body inverse dynamics of the measured motion plus joint friction plus the
sensor's offset (and noise); rotor inertia is not seen (the sensors are link-side). So with
``tau_rb = mj_inverse(q, qd, qdd)`` on the model without friction, damping or armature,
each arm joint's residual ``tau_J - tau_rb`` is linear in its friction parameters,

    tau_J - tau_rb = c * tanh(qd / v) + b * qd + o,

Coulomb level ``c`` (N*m), viscous ``b`` (N*m*s/rad), offset ``o`` (N*m), for a fixed
transition velocity ``v`` (rad/s). Per joint, each ``v`` of :data:`TRANSITIONS` gets an
least-squares fit (``c, b >= 0``) and the best one is kept: seconds for a minute of data, no
commands needed, so any ``ros2 bag record`` of the arm's joint states works. Accelerations
come from a Savitzky-Golay filter of the measured velocities.

A load at the flange (:func:`fit_payload`: mass and centre of mass) enters ``tau_rb``, which
is nonlinear in its centre of mass; it is fitted by Gauss-Newton steps, each a bounded
least-squares solve for the payload's change and every joint's friction together, on the
inverse dynamics finite-differenced in the payload.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import mujoco
import numpy as np
from scipy.optimize import lsq_linear
from scipy.signal import savgol_filter

from simops_core.sim_params import JointParams, SimParams
from simops_sim.model_index import ModelIndex
from simops_sysid import fit_parameters
from simops_sysid.torque_figures import residual_rms

TRANSITIONS = tuple(float(v) for v in np.geomspace(0.005, 1.0, 48))   # rad/s
FILTER_WINDOW = 0.05    # s, the Savitzky-Golay window (cubic) for velocity and acceleration
EDGE = 0.05             # s dropped at each end, where the filter is one-sided
MIN_SAMPLES = 200       # per joint: fewer cannot separate three parameters from noise
# Coulomb level and viscous coefficient are physical only when >= 0; the offset is free.
LOWER_UPPER = (np.array([0.0, 0.0, -np.inf]), np.array([np.inf, np.inf, np.inf]))
# The payload fit (start and bounds as trajectory mode's) of (mass kg, com_x, com_y, com_z m
# in the flange frame): finite-difference steps, samples used (every PAYLOAD_STRIDE-th) and
# Gauss-Newton steps.
PAYLOAD_START = np.array(fit_parameters.PAYLOAD_START)
PAYLOAD_LIMITS = tuple(np.array(side) for side in zip(*fit_parameters.PAYLOAD_BOUNDS,
                                                       strict=True))
PAYLOAD_STEP = np.array([0.01, 1e-3, 1e-3, 1e-3])
PAYLOAD_STRIDE = 10
PAYLOAD_ITERATIONS = 6
PAYLOAD_TOLERANCE = np.array([1e-4, 1e-5, 1e-5, 1e-5])   # kg, m: a smaller step ends the fit

# The rigid-body model of the arm carrying a payload (mass, com_x, com_y, com_z) (4,).
RigidBodyFn = Callable[[np.ndarray], mujoco.MjModel]


class TorqueDataError(ValueError):
    """The states cannot support a torque fit (no efforts, too little or no motion)."""


@dataclass(frozen=True)
class JointFriction:
    """One joint's fit and its torque RMS before and after (N*m).

    ``coulomb`` and ``offset`` N*m, ``viscous`` N*m*s/rad, ``transition`` rad/s.
    """

    coulomb: float
    viscous: float
    offset: float
    transition: float
    rms_before: float
    rms_after: float


@dataclass(frozen=True)
class TorqueData:
    """Regression samples (N, 7): measured ``effort`` and ``rigid_body`` N*m, ``qd`` rad/s.

    ``effort`` and ``qd`` are filtered (:data:`FILTER_WINDOW`); ``raw`` (N, 7) N*m are the
    same efforts as measured, unfiltered, at the recorded rate (what published figures
    score). ``motion`` (N, 3, 9) is the filtered position (rad, m), velocity and acceleration
    of every joint, what :func:`inverse_dynamics` needs to recompute ``rigid_body``.
    """

    effort: np.ndarray
    rigid_body: np.ndarray
    qd: np.ndarray
    motion: np.ndarray
    raw: np.ndarray


def torque_data(model: mujoco.MjModel, index: ModelIndex, t: np.ndarray, q: np.ndarray,
                qd: np.ndarray, effort: np.ndarray) -> TorqueData:
    """Rigid-body torques of the measured motion: ``t`` (N,) s, ``q``/``qd``/``effort`` (N, 9).

    Velocities are the measured ones, accelerations their derivative, both through the same
    Savitzky-Golay filter as the efforts (differentiating positions twice would amplify
    encoder noise into newton-metres; filtering one side only would leave the controller's
    fast torque changes unexplained).

    ``model`` must be the rigid body alone (see :func:`rigid_body_model`). Raises
    :class:`TorqueDataError` when efforts are missing or the data are too short.
    """
    arm = index.arm_dof
    if not np.any(effort[:, :arm]) or not np.all(np.isfinite(effort[:, :arm])):
        raise TorqueDataError('the joint states carry no efforts (torques): torque mode needs '
                              'them; record a JointState with effort, as franka_ros2 publishes')
    window, keep, period = filter_window(t), kept_samples(t), sample_period(t)
    edge = keep.start
    if t.size < 2 * edge + MIN_SAMPLES:
        raise TorqueDataError(f'only {t.size} joint states ({t[-1] - t[0]:.2f} s): torque mode '
                              f'needs at least {(2 * edge + MIN_SAMPLES) * period:.1f} s')
    qdd = savgol_filter(qd, window, 3, deriv=1, delta=period, axis=0)
    qd = savgol_filter(qd, window, 3, axis=0)
    filtered = savgol_filter(effort, window, 3, axis=0)   # filtered like the acceleration
    motion = np.stack((q[keep], qd[keep], qdd[keep]), axis=1)
    return TorqueData(filtered[keep, :arm], inverse_dynamics(model, index, motion),
                      qd[keep, :arm], motion, np.array(effort[keep, :arm], dtype=float))


def sample_period(t: np.ndarray) -> float:
    """The sample period (s) of the times ``t`` (N,) s: the median of their steps."""
    return float(np.median(np.diff(t)))


def filter_window(t: np.ndarray) -> int:
    """The Savitzky-Golay window (odd, samples) of :data:`FILTER_WINDOW` at ``t``'s rate."""
    return max(5, round(FILTER_WINDOW / sample_period(t)) | 1)


def kept_samples(t: np.ndarray) -> slice:
    """The samples of ``t`` (N,) s that :func:`torque_data` keeps.

    :data:`EDGE` (at least a filter window) is dropped at each end, where the filter is
    one-sided.
    """
    edge = max(filter_window(t), round(EDGE / sample_period(t)))
    return slice(edge, t.size - edge)


def inverse_dynamics(model: mujoco.MjModel, index: ModelIndex, motion: np.ndarray
                     ) -> np.ndarray:
    """The arm joints' torques (N, 7) N*m that ``model`` needs for ``motion`` (N, 3, 9)."""
    data = mujoco.MjData(model)
    qpos, dofs, arm = index.qpos_adr, index.dof_adr, index.arm_dof
    out = np.empty((motion.shape[0], arm))
    for row, (q, qd, qdd) in enumerate(motion):
        data.qpos[qpos] = q
        data.qvel[dofs] = qd
        data.qacc[dofs] = qdd
        mujoco.mj_inverse(model, data)
        out[row] = data.qfrc_inverse[dofs[:arm]]
    return out


def fit_payload(rigid_body: RigidBodyFn, index: ModelIndex, data: TorqueData,
                transitions: np.ndarray, start: np.ndarray = PAYLOAD_START
                ) -> tuple[np.ndarray, TorqueData]:
    """The flange payload that, with each joint's friction, best explains ``data``.

    ``rigid_body`` builds the rigid-body model for a payload (mass kg, com_x, com_y, com_z m);
    ``transitions`` (7,) rad/s are the joints' friction transitions, kept fixed; ``start``
    (4,) is the first guess. Returns the payload (4,) and ``data`` with its rigid-body torques
    recomputed for it.
    """
    motion, effort, qd = (data.motion[::PAYLOAD_STRIDE], data.effort[::PAYLOAD_STRIDE],
                          data.qd[::PAYLOAD_STRIDE])
    n, arm = effort.shape
    friction = np.zeros((n * arm, 3 * arm))
    for j in range(arm):
        friction[j::arm, 3 * j:3 * j + 3] = np.column_stack(
            (np.tanh(qd[:, j] / transitions[j]), qd[:, j], np.ones(n)))
    lower = np.concatenate([np.zeros(4), np.tile(LOWER_UPPER[0], arm)])
    upper = np.concatenate([np.zeros(4), np.tile(LOWER_UPPER[1], arm)])
    theta = np.clip(start, *PAYLOAD_LIMITS)
    for _ in range(PAYLOAD_ITERATIONS):
        tau = inverse_dynamics(rigid_body(theta), index, motion)
        columns = []
        for i, step in enumerate(PAYLOAD_STEP):
            moved = theta.copy()
            moved[i] += step
            columns.append(((inverse_dynamics(rigid_body(moved), index, motion) - tau)
                            / step).reshape(-1))
        lower[:4], upper[:4] = PAYLOAD_LIMITS[0] - theta, PAYLOAD_LIMITS[1] - theta
        solved = lsq_linear(np.hstack((np.column_stack(columns), friction)),
                            (effort - tau).reshape(-1), bounds=(lower, upper)).x
        theta = np.clip(theta + solved[:4], *PAYLOAD_LIMITS)
        if np.all(np.abs(solved[:4]) < PAYLOAD_TOLERANCE):
            break
    return theta, replace(data, rigid_body=inverse_dynamics(rigid_body(theta), index,
                                                           data.motion))


def rigid_body_model(model: mujoco.MjModel, index: ModelIndex) -> mujoco.MjModel:
    """A copy of ``model`` with the arm's friction, damping and armature removed.

    What the link-side torque sensors see: inertia, Coriolis and gravity of the links only.
    """
    rigid = copy.copy(model)
    dofs = index.dof_adr[:index.arm_dof]
    rigid.dof_frictionloss[dofs] = 0.0
    rigid.dof_damping[dofs] = 0.0
    rigid.dof_armature[dofs] = 0.0
    return rigid


def nominal_friction(qd: np.ndarray, nominal: np.ndarray) -> np.ndarray:
    """The model's friction torque (n, 7) N*m at joint speeds ``qd`` (n, 7) rad/s.

    ``nominal`` (2, 7): Coulomb levels c (N*m) and transitions v (rad/s) of the smooth law
    ``c tanh(qd / v)``; a transition of 0 is dry friction, ``c sign(qd)``.
    """
    level, transition = nominal
    smooth = transition > 0
    return level * np.where(smooth, np.tanh(qd / np.where(smooth, transition, 1.0)),
                            np.sign(qd))


def fit_friction(data: TorqueData, nominal: np.ndarray | None = None) -> list[JointFriction]:
    """Least-squares friction per joint; the model's friction ``nominal`` gives ``rms_before``.

    ``rms_before`` is the RMS of ``tau_J - tau_rb`` less the model's friction (``nominal``
    (2, 7), see :func:`nominal_friction`); without ``nominal`` that of ``tau_J - tau_rb``.
    """
    out = []
    before_all = data.effort - data.rigid_body
    if nominal is not None:
        before_all = before_all - nominal_friction(data.qd, nominal)
    for j in range(data.effort.shape[1]):
        residual = data.effort[:, j] - data.rigid_body[:, j]
        qd = data.qd[:, j]
        before = before_all[:, j]
        best: tuple[float, np.ndarray, float] | None = None
        for transition in TRANSITIONS:
            basis = np.column_stack((np.tanh(qd / transition), qd, np.ones_like(qd)))
            coeffs = lsq_linear(basis, residual, bounds=LOWER_UPPER).x
            rms = float(np.sqrt(np.mean((residual - basis @ coeffs) ** 2)))
            if best is None or rms < best[2]:
                best = (transition, coeffs, rms)
        assert best is not None
        transition, coeffs, rms = best
        out.append(JointFriction(float(coeffs[0]), float(coeffs[1]), float(coeffs[2]),
                                 transition, float(np.sqrt(np.mean(before ** 2))), rms))
    return out


def friction_torque(qd: np.ndarray, fits: list[JointFriction]) -> np.ndarray:
    """The friction and offset (n, 7) N*m of ``fits`` at joint speeds ``qd`` (n, 7) rad/s."""
    levels = np.array([[f.coulomb for f in fits], [f.transition for f in fits]])
    viscous, offset = (np.array([getattr(f, key) for f in fits]) for key in ('viscous', 'offset'))
    return nominal_friction(qd, levels) + viscous * qd + offset


def apply_friction(data: TorqueData, fits: list[JointFriction], raw: bool = False
                   ) -> np.ndarray:
    """Torque RMS (7,) N*m of ``data`` after the friction of ``fits`` (held-out checks).

    Against the filtered efforts, or with ``raw`` the unfiltered ones.
    """
    return residual_rms(data.raw if raw else data.effort,
                        data.rigid_body + friction_torque(data.qd, fits))


def friction_params(joints: tuple[str, ...], fits: list[JointFriction]) -> SimParams:
    """The fits as SimParams: frictionloss, friction_transition, damping, torque_offset."""
    return SimParams(joints={
        name: JointParams(frictionloss=fit.coulomb, damping=fit.viscous,
                          friction_transition=fit.transition, torque_offset=fit.offset)
        for name, fit in zip(joints, fits, strict=True)})
