"""The FR3 and Panda MJCFs against published kinematics, the robot spec and inertials."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from simops_core.paths import resolve_resource
from simops_core.robot_spec import RobotSpec, load_robot_spec

ROBOT_XML = resolve_resource('models/fr3/fr3.xml')
SCENE_XML = resolve_resource('models/fr3/scene.xml')

# Franka docs, DH table (modified / Craig convention): (a, d, alpha) per joint, then flange.
DH = [(0.0, 0.333, 0.0), (0.0, 0.0, -np.pi / 2), (0.0, 0.316, np.pi / 2),
      (0.0825, 0.0, np.pi / 2), (-0.0825, 0.384, -np.pi / 2), (0.0, 0.0, np.pi / 2),
      (0.088, 0.0, np.pi / 2)]
FLANGE_D = 0.107

# Gaz et al., IEEE RA-L 2019, identified link masses (kg), links 1..7.
GAZ_MASSES = [4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 0.7355220]


def dh_flange(q: np.ndarray) -> np.ndarray:
    """4x4 base-to-flange transform from the modified DH table, independent of the MJCF."""
    def link(a: float, d: float, alpha: float, theta: float) -> np.ndarray:
        ca, sa, ct, st = np.cos(alpha), np.sin(alpha), np.cos(theta), np.sin(theta)
        return np.array([[ct, -st, 0.0, a],
                         [st * ca, ct * ca, -sa, -sa * d],
                         [st * sa, ct * sa, ca, ca * d],
                         [0.0, 0.0, 0.0, 1.0]])

    pose = np.eye(4)
    for (a, d, alpha), theta in zip(DH, q, strict=True):
        pose = pose @ link(a, d, alpha, theta)
    return pose @ link(0.0, FLANGE_D, 0.0, 0.0)


@pytest.fixture(scope='module', params=['fr3', 'panda'])
def spec(request: pytest.FixtureRequest) -> RobotSpec:
    return load_robot_spec(request.param)


@pytest.fixture(scope='module')
def model(spec: RobotSpec) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(resolve_resource(f'models/{spec.name}/scene.xml')))


def mjcf_flange(model: mujoco.MjModel, spec: RobotSpec, q: np.ndarray) -> np.ndarray:
    data = mujoco.MjData(model)
    for name, value in zip(spec.arm_joints, q, strict=True):
        data.qpos[model.joint(name).qposadr[0]] = value
    mujoco.mj_kinematics(model, data)
    pose = np.eye(4)
    pose[:3, :3] = data.site('flange').xmat.reshape(3, 3)
    pose[:3, 3] = data.site('flange').xpos
    return pose


@pytest.mark.parametrize('pose', ['zero', 'home', 'random'])
def test_flange_matches_dh_table(model: mujoco.MjModel, spec: RobotSpec, pose: str) -> None:
    rng = np.random.default_rng(7)
    samples = {'zero': [np.zeros(7)], 'home': [spec.home],
               'random': rng.uniform(spec.position_lower, spec.position_upper, (20, 7))}[pose]
    for q in samples:
        expected, actual = dh_flange(q), mjcf_flange(model, spec, q)
        assert np.linalg.norm(actual[:3, 3] - expected[:3, 3]) < 1e-3, q
        assert np.allclose(actual[:3, :3], expected[:3, :3], atol=1e-6), q


def test_dh_reference_is_not_trivially_equal(model: mujoco.MjModel, spec: RobotSpec) -> None:
    """The comparison above can fail: a wrong joint angle moves the flange by centimetres."""
    q = spec.home.copy()
    q[1] += 0.1
    assert np.linalg.norm(dh_flange(q)[:3, 3] - mjcf_flange(model, spec, spec.home)[:3, 3]) > 0.02


def test_joint_names_and_ranges_equal_spec(model: mujoco.MjModel, spec: RobotSpec) -> None:
    hinges = [model.joint(i).name for i in range(model.njnt)
              if model.jnt_type[i] == mujoco.mjtJoint.mjJNT_HINGE]
    assert tuple(hinges) == spec.arm_joints
    for i, name in enumerate(spec.arm_joints):
        joint = model.joint(name)
        assert joint.limited[0]
        assert tuple(joint.range) == (spec.position_lower[i], spec.position_upper[i])
        assert tuple(model.jnt_actfrcrange[joint.id]) == (-spec.effort[i], spec.effort[i])
        # The JointTrajectoryController's PID: p on the position, d on the velocity error,
        # with the spec's gains (franka_ros2's), unclamped (the joint's torque limit clamps).
        p, d = model.actuator(f'{name}_p'), model.actuator(f'{name}_d')
        assert p.gainprm[0] == -p.biasprm[1] == spec.gain_p[i] and p.biasprm[2] == 0.0
        assert d.gainprm[0] == -d.biasprm[2] == spec.gain_d[i] and d.biasprm[1] == 0.0
        assert not p.ctrllimited[0] and not d.ctrllimited[0]
    for name in spec.gripper.joints:
        assert model.jnt_type[model.joint(name).id] == mujoco.mjtJoint.mjJNT_SLIDE
    assert tuple(model.actuator('gripper_servo').ctrlrange) == (spec.gripper.width_min,
                                                                 spec.gripper.width_max)


def test_link_masses_match_cited_source(model: mujoco.MjModel, spec: RobotSpec) -> None:
    assert 'Gaz' in ROBOT_XML.read_text() and 'RA-L' in ROBOT_XML.read_text()
    for i, published in enumerate(GAZ_MASSES, start=1):
        assert model.body(f'{spec.name}_link{i}').mass[0] == pytest.approx(published, rel=0.01)


def test_model_options(model: mujoco.MjModel, spec: RobotSpec) -> None:
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.timestep == pytest.approx(0.001)
    assert model.key('home') is not None
    arm_bodies = [f'{spec.name}_link{i}' for i in range(1, 8)] + [f'{spec.name}_hand']
    assert all(model.body_gravcomp[model.body(b).id] == 1.0 for b in arm_bodies)
    assert all(model.jnt_actgravcomp[j] for j in range(model.njnt)
               if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE)


def test_scene_has_object_and_goal(model: mujoco.MjModel) -> None:
    cube = model.geom('object_geom')
    assert cube.type[0] == mujoco.mjtGeom.mjGEOM_BOX
    assert np.allclose(2 * cube.size, 0.04)
    assert model.jnt_type[model.body('object').jntadr[0]] == mujoco.mjtJoint.mjJNT_FREE
    assert model.body('goal').mocapid[0] >= 0
    assert model.site('goal') is not None


def hold_home_error(model: mujoco.MjModel, spec: RobotSpec, seconds: float) -> float:
    """Max |q - home| (rad) over ``seconds`` of simulation with the servos at home."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key('home').id)
    adr = [model.joint(n).qposadr[0] for n in spec.arm_joints]
    worst = 0.0
    for _ in range(round(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
        worst = max(worst, float(np.max(np.abs(data.qpos[adr] - spec.home))))
    return worst


@pytest.mark.parametrize('xml', ['robot', 'scene'])
def test_gravity_compensated_hold_at_home(spec: RobotSpec, xml: str) -> None:
    name = spec.name if xml == 'robot' else 'scene'
    model = mujoco.MjModel.from_xml_path(str(resolve_resource(f'models/{spec.name}/{name}.xml')))
    assert hold_home_error(model, spec, seconds=10.0) < 1e-3


def test_hold_fails_without_gravity_compensation(spec: RobotSpec) -> None:
    """Control for the hold test: without gravcomp the servos sag by more than 1 mrad."""
    robot = resolve_resource(f'models/{spec.name}/{spec.name}.xml')
    model = mujoco.MjModel.from_xml_path(str(robot))
    model.body_gravcomp[:] = 0.0
    assert hold_home_error(model, spec, seconds=1.0) > 1e-3
