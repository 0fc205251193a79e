"""Analytic reaching expert: an IK goal posture, then joint-space tracking of it.

Per goal, :meth:`ReachExpert.solve` finds a joint posture ``q*`` that puts the flange on the
goal by damped least squares on the MuJoCo flange Jacobian (kinematics only), with the joint
limits (minus a margin) enforced at every iteration. It starts from, and in the null space
pulls toward, a reference posture: ``home`` with joint 5 turned by ``wrist_bend``, which keeps
link 6 above the hand when the hand tilts for goals near the table. Task priorities: the
flange position, then the hand's approach axis, then the reference posture. The approach
axis points down for high goals and tilts radially outward for goals near the table (the
fingers reach 0.11 m below the flange, so a vertical hand cannot bring the flange below
about 0.12 m) or near the base. Nothing else constrains the roll, so ``q*`` is a smooth
function of the goal (a roll target made it jump between wrist branches), which is what
makes the expert easy to imitate.

:meth:`ReachExpert.act` then commands ``k · (q* - q)`` per control step from the measured arm
position ``q``, scaled down as a vector (so joints arrive together) to at most one action
unit, and keeps the gripper open. Its action is a function of the observation alone (``q``
and the goal are both observed), so a learner can imitate it exactly; with the card's
``last_command`` reference the arm's speed does not drop with the action delay, and the
gain keeps the delayed loop stable up to several periods of delay.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_sim.model_index import ModelIndex

HAND_BODY = 'fr3_hand'


@dataclass(frozen=True)
class ExpertGains:
    """Expert settings.

    ``gain``: fraction of the joint error commanded per control step; ``damping``: DLS
    damping; ``iterations`` of the IK, which stops early once no joint moves more than
    ``tolerance`` (rad); ``orientation_weight`` of the
    axis errors against the position error (m per rad); ``posture``: null-space pull toward
    home per iteration; ``tilt_high``/``tilt_low`` goal heights (m) between which the approach
    axis tilts from straight down to ``tilt_max`` (rad) radially outward; ``margin`` (rad)
    kept clear of the joint limits. Goals closer to the base axis than ``near_far`` (m) tilt
    the approach axis outward too, up to ``tilt_near`` (rad) at ``near_close``, where a
    vertical hand would fold the elbow into its limit. ``wrist_bend`` (rad) turns joint 5 of
    the reference posture (start and null-space target) away from ``home``.
    """

    gain: float = 0.2
    damping: float = 0.02
    iterations: int = 300
    tolerance: float = 1e-4
    orientation_weight: float = 0.5
    posture: float = 0.2
    tilt_high: float = 0.30
    tilt_low: float = 0.08
    tilt_max: float = 1.3
    tilt_near: float = 1.0
    near_far: float = 0.45
    near_close: float = 0.3
    margin: float = 0.06
    wrist_bend: float = 1.0


class ReachExpert:
    """Maps (true joint positions, goal) to a card action: 7 joint deltas, gripper open."""

    def __init__(self, model: mujoco.MjModel, index: ModelIndex, spec: RobotSpec,
                 action_scale: float, gains: ExpertGains | None = None) -> None:
        self.model = model
        self.data = mujoco.MjData(model)
        self.index = index
        self.spec = spec
        self.scale = action_scale
        self.gains = gains or ExpertGains()
        self.hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, HAND_BODY)
        self._jacp = np.zeros((3, model.nv))
        self._jacr = np.zeros((3, model.nv))
        self._goal: np.ndarray | None = None
        self._posture = spec.home.copy()
        self.reference = spec.home.copy()
        self.reference[4] += self.gains.wrist_bend

    def desired_axis(self, goal: np.ndarray) -> np.ndarray:
        """Approach axis (3,) for ``goal``: down, tilted radially outward near table or base."""
        g = self.gains
        low = g.tilt_max * np.clip((g.tilt_high - goal[2]) / (g.tilt_high - g.tilt_low),
                                   0.0, 1.0)
        radial = np.array([goal[0], goal[1], 0.0])
        reach = max(float(np.linalg.norm(radial)), 1e-6)
        near = g.tilt_near * np.clip((g.near_far - reach) / (g.near_far - g.near_close),
                                     0.0, 1.0)
        tilt = max(low, near)
        radial /= reach
        return np.cos(tilt) * np.array([0.0, 0.0, -1.0]) + np.sin(tilt) * radial

    def solve(self, goal: np.ndarray) -> np.ndarray:
        """The goal posture q* (7,) rad."""
        g, data, index, model = self.gains, self.data, self.index, self.model
        lower = self.spec.position_lower + g.margin
        upper = self.spec.position_upper - g.margin
        axis = self.desired_axis(goal)
        q = self.reference.copy()
        arm = index.arm_dof
        dofs = index.dof_adr[:arm]
        eye = np.eye(arm)
        for _ in range(g.iterations):
            data.qpos[index.qpos_adr[:arm]] = q
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            error = goal - data.xpos[index.flange_body]
            approach = data.xmat[self.hand].reshape(3, 3)[:, 2]
            omega = np.cross(approach, axis)
            mujoco.mj_jacBody(model, data, self._jacp, self._jacr, index.flange_body)
            jac_p = self._jacp[:, dofs]
            # Only the two rotations that tilt the approach axis: the roll stays free for
            # the posture task, so q* does not depend on the path the iterations take.
            jac_r = (np.eye(3) - np.outer(approach, approach)) @ self._jacr[:, dofs]
            # Position first; orientation, then posture, in the remaining null spaces.
            pinv_p = _damped_pinv(jac_p, g.damping)
            step = pinv_p @ error
            null = eye - pinv_p @ jac_p
            reduced = jac_r @ null
            pinv_r = _damped_pinv(reduced, g.damping * 5)
            step += null @ pinv_r @ (g.orientation_weight * omega - jac_r @ step)
            null = null @ (eye - pinv_r @ reduced)
            step += null @ ((self.reference - q) * g.posture)
            largest = np.max(np.abs(step))
            if largest > 0.2:
                step *= 0.2 / largest
            q = np.clip(q + step, lower, upper)
            if largest < g.tolerance:
                break
        return q

    def act(self, measured: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Action (8,) from the ``measured`` arm position (7,) rad toward ``goal`` (3,) m."""
        if self._goal is None or not np.array_equal(goal, self._goal):
            self._posture = self.solve(goal)
            self._goal = np.array(goal, dtype=float)
        dq = (self._posture - measured[:self.index.arm_dof]) * self.gains.gain / self.scale
        largest = np.max(np.abs(dq))
        if largest > 1.0:
            dq /= largest
        return np.append(dq, 1.0)


def _damped_pinv(jac: np.ndarray, damping: float) -> np.ndarray:
    """Damped right pseudo-inverse of a (m, n) Jacobian: Jᵀ (J Jᵀ + λ² I)⁻¹, shape (n, m)."""
    return jac.T @ np.linalg.inv(jac @ jac.T + damping ** 2 * np.eye(jac.shape[0]))
