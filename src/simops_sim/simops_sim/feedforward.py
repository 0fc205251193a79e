"""The arm's own joint-impedance loop compensates the arm's dynamics (no rclpy).

Behind a position or velocity interface, a Franka arm tracks the streamed target as if its
dynamics were cancelled: on Gaz et al.'s Panda recording (1 kHz through the position
interface, joints at up to 2 rad/s) the measured positions are the commanded ones 16 ms
later within 0.46 mrad RMS over the held-out 7 s, once each joint's constant offset is
removed, where a stiffness-only loop (libfranka's default 3000 N*m/rad) would lag by the
inertial torques over the stiffness, several mrad. The loop is modelled as the impedance
law plus an inverse-dynamics feedforward along the desired trajectory,

    tau = K (q_d - q) + D (qd_d - qd) + M(q_d) qdd_d + c(q_d, qd_d),

gravity being compensated apart (the model's ``actuatorgravcomp``, as the arm's firmware
does). :func:`dynamics_feedforward` computes the last two terms from the desired positions
and velocities with MuJoCo's own dynamics; the feedforward comes from the controller's
model, the nominal one, whatever the arm really carries.
"""

from __future__ import annotations

import mujoco
import numpy as np


def desired_acceleration(velocity: np.ndarray, dt: float) -> np.ndarray:
    """Accelerations (T, a) rad/s^2 of the desired velocities ``velocity`` (T, a) rad/s.

    Central differences over the ``dt`` s steps (one-sided at the ends), as a motion
    generator differentiates the commands it receives.
    """
    if velocity.shape[0] < 2:
        return np.zeros_like(velocity)
    return np.gradient(velocity, dt, axis=0)


def dynamics_feedforward(model: mujoco.MjModel, qpos_adr: np.ndarray, dof_adr: np.ndarray,
                         qpos0: np.ndarray, position: np.ndarray, velocity: np.ndarray,
                         acceleration: np.ndarray) -> np.ndarray:
    """Feedforward torques (T, a) N*m along a desired trajectory: ``M qdd + c(q, qd)``.

    ``position``, ``velocity``, ``acceleration`` (T, a) of the arm joints at ``qpos_adr``
    (a,) and ``dof_adr`` (a,) of ``model``; every other coordinate holds ``qpos0`` (nq,) at
    rest. ``c`` is the Coriolis and centrifugal torque: the bias force less gravity.
    """
    data = mujoco.MjData(model)
    out = np.empty_like(position)
    full = np.zeros(model.nv)
    inertial = np.zeros(model.nv)
    for k in range(position.shape[0]):
        data.qpos[:] = qpos0
        data.qpos[qpos_adr] = position[k]
        data.qvel[:] = 0.0
        mujoco.mj_fwdPosition(model, data)
        mujoco.mj_fwdVelocity(model, data)
        gravity = data.qfrc_bias[dof_adr].copy()
        data.qvel[dof_adr] = velocity[k]
        mujoco.mj_fwdVelocity(model, data)
        full[:] = 0.0
        full[dof_adr] = acceleration[k]
        mujoco.mj_mulM(model, data, inertial, full)
        out[k] = inertial[dof_adr] + data.qfrc_bias[dof_adr] - gravity
    return out
