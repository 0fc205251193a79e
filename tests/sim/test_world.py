"""Two FR3s in one MuJoCo world (models/fr3_duo): one physics, each arm its own controller."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from sim_helpers import SCENE_XML

from simops_core.paths import resolve_resource
from simops_core.robot_spec import RobotSpec, load_robot_spec
from simops_core.sim_params import JointParams, SimParams, SimParamsError
from simops_sim.model_index import ModelError
from simops_sim.physics import Physics
from simops_sim.trajectory_plan import TrajectoryPlan, point_goal
from simops_sim.world import World

DUO_XML = resolve_resource('models/fr3_duo/scene.xml')


@pytest.fixture(scope='module')
def spec() -> RobotSpec:
    return load_robot_spec('fr3')


def duo(spec: RobotSpec, **kwargs: object) -> World:
    world = World(mujoco.MjModel.from_xml_path(str(DUO_XML)),
                  {'left_': spec, 'right_': spec}, **kwargs)  # type: ignore[arg-type]
    world.reset_keyframe('home')
    return world


def test_each_arm_is_indexed_under_its_prefix(spec: RobotSpec) -> None:
    world = duo(spec)
    left, right = world.arms['left_'].index, world.arms['right_'].index
    model = world.model
    assert [model.joint(j).name for j in left.joint_ids] == [f'left_{n}' for n in spec.joint_names]
    assert [model.joint(j).name for j in right.joint_ids] == [
        f'right_{n}' for n in spec.joint_names]
    assert not set(left.qpos_adr) & set(right.qpos_adr)
    assert not set(left.ctrl_ids) & set(right.ctrl_ids)
    assert left.mass_bodies == right.mass_bodies and 'fr3_link1' in left.mass_bodies
    mocap_bodies = model.body_mocapid.tolist()
    assert model.body(mocap_bodies.index(left.goal_mocap)).name == 'left_goal'
    assert model.body(mocap_bodies.index(right.goal_mocap)).name == 'right_goal'
    assert left.object_body == right.object_body == model.body('object').id
    # The friction transitions come with the prefixed <numeric>s of the attached model.
    lone = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), spec).index
    np.testing.assert_array_equal(left.nominal_transition, lone.nominal_transition)
    np.testing.assert_array_equal(right.nominal_transition, lone.nominal_transition)
    for arm in world.arms.values():
        np.testing.assert_allclose(arm.state().position[:7], spec.home, atol=1e-9)


def test_each_arm_follows_its_own_targets_and_moves_like_a_lone_arm(spec: RobotSpec) -> None:
    world = duo(spec)
    lone = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), spec)
    lone.reset_keyframe('home')
    target = spec.home + np.array([0.3, -0.2, 0.1, 0.2, -0.1, 0.2, 0.3])
    for physics in (world.arms['left_'], lone):
        physics.follow(TrajectoryPlan(point_goal(target, 1.0), physics.time,
                                      physics.arm_target, physics.time))
    for _ in range(1500):
        world.step()
        lone.step()
    left, right = world.arms['left_'].state(), world.arms['right_'].state()
    np.testing.assert_allclose(left.position[:7], target, atol=2e-3)
    np.testing.assert_allclose(right.position[:7], spec.home, atol=2e-3)
    # No contact between the arms: the left arm's motion is the lone arm's, within rounding.
    np.testing.assert_allclose(left.position, lone.state().position, atol=1e-9)
    np.testing.assert_allclose(left.flange_pos, lone.state().flange_pos, atol=1e-9)


def test_params_are_per_arm_and_written_in_one_pass(spec: RobotSpec) -> None:
    stiff = SimParams(joints={'fr3_joint1': JointParams(kp=2 * spec.gain_p[0], frictionloss=0.5)})
    world = duo(spec, params={'right_': stiff})
    model, left, right = world.model, world.arms['left_'].index, world.arms['right_'].index
    assert model.actuator_gainprm[right.ctrl_ids[0], 0] == pytest.approx(2 * spec.gain_p[0])
    assert model.actuator_gainprm[left.ctrl_ids[0], 0] == pytest.approx(spec.gain_p[0])
    # Both arms' friction is the smooth law: the dry constraint stays off on both, although
    # the right arm's write came after the left's.
    assert np.all(model.dof_frictionloss[left.dof_adr[:7]] == 0.0)
    assert np.all(model.dof_frictionloss[right.dof_adr[:7]] == 0.0)
    assert world.arms['right_'].params is stiff
    with pytest.raises(SimParamsError, match="arm 'middle_'"):
        world.apply_params({'middle_': stiff})


def test_a_stop_of_one_arm_leaves_the_other_moving(spec: RobotSpec) -> None:
    world = duo(spec, reflexes=True)
    left, right = world.arms['left_'], world.arms['right_']
    too_fast = TrajectoryPlan(point_goal(spec.home + 0.5, 0.05), world.time, left.arm_target,
                              world.time)
    assert left.follow(too_fast) is not None and left.stop is not None
    target = spec.home + 0.1
    assert right.follow(TrajectoryPlan(point_goal(target, 0.5), world.time, right.arm_target,
                                       world.time)) is None
    world.step(1000)
    assert left.stop is not None and right.stop is None
    np.testing.assert_allclose(left.state().position[:7], spec.home, atol=2e-3)
    np.testing.assert_allclose(right.state().position[:7], target, atol=2e-3)


def test_whole_world_actions_belong_to_the_world(spec: RobotSpec) -> None:
    world = duo(spec)
    arm = world.arms['left_']
    for action in (arm.step, lambda: arm.reset_keyframe('home'),
                   lambda: arm.apply_params(SimParams())):
        with pytest.raises(RuntimeError, match='call it on the World'):
            action()
    world.step(100)
    world.reset_keyframe(None)
    assert world.time == 0.0
    with pytest.raises(ModelError, match="no keyframe 'away'"):
        world.reset_keyframe('away')
    with pytest.raises(ModelError, match='at least one arm'):
        World(world.model, {})
