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
does). :class:`InverseDynamics` computes the last two terms from the desired positions,
velocities and accelerations with MuJoCo's own dynamics, one instant at a time (the
simulator's actuator law, :mod:`simops_sim.actuator_law`, every physics step);
:func:`dynamics_feedforward` runs it along a whole trajectory (``fit``'s replay). The desired
acceleration is the desired velocity's central difference one step back
(:func:`desired_acceleration`, :func:`step_acceleration`): causal, so the simulator, which
knows no future target, and the replay, which knows them all, compute the same torques. The
feedforward comes from the controller's model, the one the arm was given, whatever the arm
really carries.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np


def desired_acceleration(velocity: np.ndarray, dt: float) -> np.ndarray:
    """Accelerations (T, a) rad/s^2 of the desired velocities ``velocity`` (T, a) rad/s.

    Row k is :func:`step_acceleration` of rows k - 2 and k over the ``dt`` s steps, the
    central difference one step back (rows before the first count as the first).
    """
    padded = np.concatenate((velocity[:1], velocity[:1], velocity))
    return (padded[2:] - padded[:-2]) / (2.0 * dt)


def step_acceleration(velocity: np.ndarray, earlier: np.ndarray, dt: float,
                      out: np.ndarray) -> None:
    """The desired acceleration (a,) rad/s^2 into ``out``: ``(velocity - earlier) / 2 dt``.

    ``velocity`` (a,) rad/s now, ``earlier`` (a,) two physics steps of ``dt`` s before: the
    central difference at the step between, which a causal controller can compute. A
    stream at 1 kHz whose targets arrive with a millisecond of jitter alternates its
    step-to-step velocity; this difference cancels that alternation where a one-step
    difference doubles it into torque spikes (on Gaz et al.'s Panda recording the one-step
    rule's fit replays the held-out part at 1.54 mrad, this one at 0.53).
    """
    np.subtract(velocity, earlier, out=out)
    out /= 2.0 * dt


class InverseDynamics:
    """``M(q) qdd + c(q, qd)`` (N*m) of an arm's joints by ``model``, gravity excluded.

    ``qpos_adr`` (a,) and ``dof_adr`` (a,): the arm joints' addresses in ``model``; every
    other coordinate holds ``qpos0`` (nq,) at rest. ``model`` is copied (gravity off in the
    copy), so later changes to it are not seen. ``c`` is the Coriolis and centrifugal
    torque; ``M`` includes the joints' armature.
    """

    def __init__(self, model: mujoco.MjModel, qpos_adr: np.ndarray, dof_adr: np.ndarray,
                 qpos0: np.ndarray) -> None:
        self.model = copy.copy(model)
        self.model.opt.gravity[:] = 0.0
        self.data = mujoco.MjData(self.model)
        self.data.qpos[:] = qpos0
        self.qpos_adr, self.dof_adr = np.asarray(qpos_adr), np.asarray(dof_adr)
        self._full = np.zeros(self.model.nv)
        self._inertial = np.zeros(self.model.nv)
        self._bias = np.zeros(self.model.nv)

    def __call__(self, position: np.ndarray, velocity: np.ndarray,
                 acceleration: np.ndarray, out: np.ndarray) -> None:
        """The torques (a,) N*m into ``out`` at ``position``, ``velocity``, ``acceleration``.

        All three (a,): rad, rad/s, rad/s^2.
        """
        model, data = self.model, self.data
        data.qpos[self.qpos_adr] = position
        data.qvel[self.dof_adr] = velocity
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_makeM(model, data)
        mujoco.mj_comVel(model, data)
        mujoco.mj_rne(model, data, 0, self._bias)
        self._full[self.dof_adr] = acceleration
        mujoco.mj_mulM(model, data, self._inertial, self._full)
        np.add(self._inertial[self.dof_adr], self._bias[self.dof_adr], out=out)


def dynamics_feedforward(model: mujoco.MjModel, qpos_adr: np.ndarray, dof_adr: np.ndarray,
                         qpos0: np.ndarray, position: np.ndarray, velocity: np.ndarray,
                         acceleration: np.ndarray) -> np.ndarray:
    """Feedforward torques (T, a) N*m along a desired trajectory: ``M qdd + c(q, qd)``.

    ``position``, ``velocity``, ``acceleration`` (T, a) of the arm joints at ``qpos_adr``
    (a,) and ``dof_adr`` (a,) of ``model``; see :class:`InverseDynamics`.
    """
    dynamics = InverseDynamics(model, qpos_adr, dof_adr, qpos0)
    out = np.empty_like(position)
    for k in range(position.shape[0]):
        dynamics(position[k], velocity[k], acceleration[k], out[k])
    return out
