"""step_together: many arms stepped as rows of one actuator law end bit for bit where
Physics.step (the same law on one row) leaves each of them: plans, delays, smooth friction,
gripper ramps, stops and the impedance law's feedforward included."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from ros_helpers import REPO

from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import JointParams, SimParams
from simops_sim.physics import Physics
from simops_sim.physics_batch import step_together
from simops_sim.trajectory_plan import TrajectoryGoal, TrajectoryPlan, point_goal

SPEC = load_robot_spec('fr3')
SCENE = REPO / 'models/fr3/scene.xml'


def arm(delay: float, friction: float, transition: float | None) -> Physics:
    joints = {name: JointParams(frictionloss=friction, friction_transition=transition)
              for name in SPEC.arm_joints}
    physics = Physics(mujoco.MjModel.from_xml_path(str(SCENE)), SPEC,
                      params=SimParams(joints=joints, command_delay=delay), reflexes=True)
    physics.reset_keyframe('home')
    return physics


CASES = [(0.0, 0.5, 0.05), (0.002, 0.8, 0.1), (0.003, 0.3, None), (0.0, 1.0, 0.02)]


def state(physics: Physics) -> list[np.ndarray]:
    data = physics.data
    return [data.qpos.copy(), data.qvel.copy(), data.ctrl.copy(), data.qfrc_applied.copy(),
            np.array([data.time]), physics.law.command.copy(), physics.law.previous.copy(),
            physics.law.earlier.copy(),
            np.array([physics.following, physics.stop is None])]


@pytest.mark.parametrize('steps', [50, 73])
def test_step_together_matches_physics_step_bit_for_bit(steps: int) -> None:
    together = [arm(*case) for case in CASES]
    alone = [arm(*case) for case in CASES]
    home = together[0].arm_target
    stops = 0
    for period in range(40):
        for k, (a, b) in enumerate(zip(together, alone, strict=True)):
            target = home + 0.2 * np.sin(0.3 * period + k) * np.linspace(0.2, 1.0, 7)
            if k == 3:   # tilt joint 2 forward until the hand meets the table: a reflex stop
                target = home.copy()
                target[1] += min(0.09 * period, 1.6)
            for physics in (a, b):
                if physics.stop is None:
                    physics.follow(TrajectoryPlan(point_goal(target, 0.05), physics.time,
                                                  physics.arm_target))
                physics.set_gripper_width(0.02 + 0.001 * period)
        step_together(together, steps)
        for physics in alone:
            physics.step(steps)
        for a, b in zip(together, alone, strict=True):
            for x, y in zip(state(a), state(b), strict=True):
                assert np.array_equal(x, y)
            assert a.stop == b.stop
        stops = sum(a.stop is not None for a in together)
    assert stops == 1 and together[3].stop is not None   # the stop path ran


def test_rows_of_every_kind_stacked_together_match_each_arm_alone() -> None:
    """Multi-point cubic plans, a gripper ramp, different delays and friction layouts, an
    arm on the impedance law (its dynamics feedforward) and an arm without reflexes, in one
    stack: each row as its arm alone."""
    def arms() -> list[Physics]:
        out = [arm(*case) for case in CASES]
        out[1].set_controller('joint_impedance')
        out.append(Physics(mujoco.MjModel.from_xml_path(str(SCENE)), SPEC))   # no reflexes
        out[-1].reset_keyframe('home')
        return out

    together, alone = arms(), arms()
    home = together[0].arm_target
    for group in (together, alone):
        group[0].move_gripper(0.07, 0.05, 20.0)   # a gripper ramp
        for k, physics in enumerate(group[1:3], start=1):   # cubic through three points
            times = np.array([0.05, 0.1, 0.15])
            positions = home + 0.05 * k * np.outer([1.0, 2.0, 1.5], np.linspace(0.2, 1.0, 7))
            velocities = np.vstack((np.full(7, 0.3 * k), np.full(7, 0.1), np.zeros(7)))
            goal = TrajectoryGoal(times, positions, velocities, np.arange(7), None)
            q, qd = physics.arm_measured()
            physics.follow(TrajectoryPlan(goal, physics.time, q, physics.time, qd))
        group[4].follow(TrajectoryPlan(point_goal(home + 0.1, 0.08), group[4].time,
                                       group[4].arm_target))
    for _ in range(4):
        step_together(together, 53)
        for physics in alone:
            physics.step(53)
        for a, b in zip(together, alone, strict=True):
            for x, y in zip(state(a), state(b), strict=True):
                assert np.array_equal(x, y)
    assert not any(a.following for a in together)   # every plan ran to its end
