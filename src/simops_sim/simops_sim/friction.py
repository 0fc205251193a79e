"""Joint friction smooth across zero velocity: ``-c tanh(qd / v)`` (no rclpy)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simops_core.sim_params import SimParams
from simops_sim.model_index import ModelIndex


@dataclass(frozen=True)
class SmoothFriction:
    """Friction ``-c tanh(qd / v)`` on ``dofs``: Coulomb levels ``c`` (N*m), transitions ``v``.

    For joints whose SimParams set ``friction_transition``. MuJoCo's dry friction constraint
    switches within a fraction of a mrad/s; a real arm's friction (Gaz et al. identify a
    sigmoid on the Panda) changes sign over tenths of a rad/s, which this smooth law
    follows. The actuator law applies it as a joint force before every step
    (:func:`simops_sim.actuator_law.advance`).
    """

    dofs: np.ndarray
    level: np.ndarray
    transition: np.ndarray

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


def friction_transitions(params: SimParams, index: ModelIndex) -> np.ndarray:
    """Each joint's smooth-friction transition (9,) rad/s: ``params``' or the model's; 0: dry."""
    transition = index.nominal_transition.copy()
    for i, name in enumerate(index.joint_names):
        joint = params.joints.get(name)
        if joint is not None and joint.friction_transition is not None:
            transition[i] = joint.friction_transition
    return transition
