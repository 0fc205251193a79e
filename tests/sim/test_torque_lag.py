"""A stand-in's hidden torque lag: the arm joints receive the actuators' torque through a
first-order lag (``Physics.set_torque_lag``), which no SimParams field expresses, while the
efforts read the actuators' torque.

The reference steps a second copy with plain ``mj_step``, the lag computed here from its
definition (``y += (1 - exp(-dt / tau)) (u - y)``, ``u`` MuJoCo's own actuator torque of the
step, from a forward pass of a scratch copy) and written into ``qfrc_applied`` as ``y - u``.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from ros_helpers import REPO

from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import JointParams, SimParams
from simops_sim.physics import Physics
from simops_sim.physics_batch import step_together
from simops_sim.trajectory_plan import TrajectoryPlan, point_goal

SPEC = load_robot_spec('fr3')
SCENE = REPO / 'models/fr3/scene.xml'
LAG = 0.010   # s


def arm(lag: float = 0.0) -> Physics:
    """The FR3 at home, its joints' torque lagged by ``lag`` s, without joint friction (so
    MuJoCo alone is the reference)."""
    joints = {name: JointParams(frictionloss=0.0) for name in SPEC.arm_joints}
    physics = Physics(mujoco.MjModel.from_xml_path(str(SCENE)), SPEC,
                      params=SimParams(joints=joints), reflexes=True)
    physics.reset_keyframe('home')
    physics.set_torque_lag(lag)
    return physics


def targets(home: np.ndarray, period: int) -> np.ndarray:
    """A step of the arm targets (7,) rad every period: the torque jumps, the lag shows."""
    return home + 0.15 * np.sin(0.7 * period) * np.linspace(0.3, 1.0, 7)


def test_the_joints_receive_the_lagged_torque_and_the_efforts_read_the_actuators() -> None:
    physics = arm(LAG)
    model, reference = physics.model, mujoco.MjData(physics.model)
    mujoco.mj_copyData(reference, model, physics.data)
    dofs = physics.site.dofs
    weight = -math.expm1(-physics.timestep / LAG)   # 1 - exp(-dt / tau), to the last bit
    scratch = mujoco.MjData(model)   # the step's torque, the reference's solver untouched

    def actuator_torque() -> np.ndarray:
        mujoco.mj_copyData(scratch, model, reference)
        mujoco.mj_forward(model, scratch)
        return scratch.qfrc_actuator[dofs].copy()

    lagged = actuator_torque()   # as if the torque had always held
    home, seen = physics.arm_target, 0.0
    for period in range(6):
        target = targets(home, period)
        physics.set_arm_target(target)
        reference.ctrl[physics.index.ctrl_ids[:7]] = target
        for _ in range(20):
            physics.step()
            torque = actuator_torque()
            lagged += weight * (torque - lagged)
            reference.qfrc_applied[dofs] = lagged - torque
            mujoco.mj_step(model, reference)
            reference.qfrc_applied[:] = 0.0
            assert np.array_equal(physics.data.qpos, reference.qpos)
            assert np.array_equal(physics.data.qvel, reference.qvel)
        # the efforts read the actuators' torque, not the lagged one the joints receive
        joints = np.empty((3, 9))
        physics.read_joints(joints)
        assert np.array_equal(joints[2, :7], physics.data.qfrc_actuator[dofs])
        seen = max(seen, np.abs(joints[2, :7] - lagged).max())
        assert not physics.data.qfrc_applied.any()   # nothing left between steps
    assert seen > 0.1   # N*m: a period after a target step the lag still shows


def test_the_lag_changes_the_motion_and_a_zero_lag_is_mujocos_step_bit_for_bit() -> None:
    lagging, off, plain = arm(LAG), arm(LAG), arm()
    off.set_torque_lag(0.0)
    home = plain.arm_target
    for period in range(5):
        for physics in (lagging, off, plain):
            physics.set_arm_target(targets(home, period))
            physics.step(20)
        assert np.array_equal(off.data.qpos, plain.data.qpos)
    assert np.abs(lagging.data.qpos - plain.data.qpos).max() > 1e-4   # rad


def test_a_reset_starts_the_lag_from_the_torque_then() -> None:
    """After a reset the arm holds still, lag or not, as a fresh arm does."""
    lagging, plain = arm(LAG), arm()
    home = plain.arm_target
    for physics in (lagging, plain):
        physics.set_arm_target(targets(home, 1))
        physics.step(30)
        physics.reset_keyframe('home')
        physics.step(200)
    np.testing.assert_allclose(lagging.data.qpos, plain.data.qpos, atol=1e-9)


def test_the_batched_path_equals_each_arm_alone_with_the_lag() -> None:
    def arms() -> list[Physics]:
        return [arm(LAG), arm(), arm(0.004)]

    together, alone = arms(), arms()
    home = together[0].arm_target
    for period in range(6):
        for group in (together, alone):
            for k, physics in enumerate(group):
                physics.follow(TrajectoryPlan(point_goal(targets(home, period + k), 0.02),
                                              physics.time, physics.arm_target))
        step_together(together, 37)
        for physics in alone:
            physics.step(37)
        for a, b in zip(together, alone, strict=True):
            assert np.array_equal(a.data.qpos, b.data.qpos)
            assert np.array_equal(a.data.qvel, b.data.qvel)
            assert np.array_equal(a.law.lagged, b.law.lagged)
