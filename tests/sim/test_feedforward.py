"""The impedance loop's dynamics feedforward is MuJoCo's inverse dynamics less gravity."""

from __future__ import annotations

import mujoco
import numpy as np
from sim_helpers import SCENE_XML

from simops_core.robot_spec import load_robot_spec
from simops_sim.feedforward import desired_acceleration, dynamics_feedforward, step_acceleration
from simops_sim.model_index import index_model


def test_feedforward_is_inertia_times_acceleration_plus_coriolis_without_gravity() -> None:
    model = mujoco.MjModel.from_xml_path(str(SCENE_XML))
    index = index_model(model, load_robot_spec('fr3'))
    # Joint friction and damping are the arm's, not the controller model's: mj_inverse would
    # count their forces; without them it is M qacc + bias exactly.
    model.dof_frictionloss[:] = 0.0
    model.dof_damping[:] = 0.0
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key('home').id)
    qpos_adr, dof_adr = index.qpos_adr[:7], index.dof_adr[:7]
    rng = np.random.default_rng(0)
    position = data.qpos[qpos_adr] + rng.uniform(-0.3, 0.3, (4, 7))
    velocity = rng.uniform(-1.0, 1.0, (4, 7))
    acceleration = rng.uniform(-5.0, 5.0, (4, 7))
    got = dynamics_feedforward(model, qpos_adr, dof_adr, data.qpos.copy(), position, velocity,
                               acceleration)
    at_rest = dynamics_feedforward(model, qpos_adr, dof_adr, data.qpos.copy(), position,
                                   0 * velocity, 0 * acceleration)
    np.testing.assert_allclose(at_rest, 0.0, atol=1e-9)   # gravity is compensated apart
    check = mujoco.MjData(model)
    for k in range(4):
        for qvel, qacc in ((velocity[k], acceleration[k]), (0 * velocity[k], 0 * velocity[k])):
            check.qpos[:] = data.qpos
            check.qpos[qpos_adr] = position[k]
            check.qvel[:] = 0.0
            check.qvel[dof_adr] = qvel
            check.qacc[:] = 0.0
            check.qacc[dof_adr] = qacc
            mujoco.mj_inverse(model, check)
            if qvel.any():
                full = check.qfrc_inverse[dof_adr].copy()
            else:
                gravity = check.qfrc_inverse[dof_adr].copy()
        np.testing.assert_allclose(got[k], full - gravity, atol=1e-6)


def test_desired_acceleration_is_the_central_difference_one_step_back() -> None:
    # The simulator knows no future target, so the replay differentiates as it does: row k
    # from rows k - 2 and k (a sine's derivative one step back), rows before 0 as row 0.
    dt = 0.001
    t = dt * np.arange(100)
    velocity = np.column_stack([np.sin(t), 2 * t])
    acceleration = desired_acceleration(velocity, dt)
    np.testing.assert_allclose(acceleration[2:, 0], np.cos(t[2:] - dt), atol=1e-6)
    np.testing.assert_allclose(acceleration[2:, 1], 2.0, atol=1e-9)
    np.testing.assert_array_equal(acceleration[0], 0.0)
    np.testing.assert_allclose(acceleration[1], (velocity[1] - velocity[0]) / (2 * dt))
    out = np.empty(2)
    for k in range(2, 100):   # the simulator's step rule gives the same rows
        step_acceleration(velocity[k], velocity[k - 2], dt, out)
        np.testing.assert_array_equal(out, acceleration[k])
    # a 1 kHz stream's alternating step-to-step velocity is cancelled, not doubled
    alternating = np.tile([[1.0], [1.2]], (10, 1))
    np.testing.assert_allclose(desired_acceleration(alternating, dt)[2:], 0.0, atol=1e-9)
