"""The physics wrapper offline: mapping, SimParams, delay, determinism, effort, frames."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
from sim_helpers import SCENE_XML, renamed_scene

from simops_core.robot_spec import RobotSpec, load_robot_spec
from simops_core.sim_params import JointParams, ObjectParams, SimParams, SimParamsError
from simops_sim.delay import shift_commands
from simops_sim.joint_commands import CommandError, parse_joint_command
from simops_sim.model_index import ModelError, index_model, load_model, parse_joint_map
from simops_sim.model_params import apply_sim_params, nominal_sim_params
from simops_sim.physics import Physics
from simops_sim.randomization import default_randomization
from simops_sim.trajectory_plan import (
    TrajectoryError,
    TrajectoryGoal,
    TrajectoryPlan,
    goal_from_message,
    parse_trajectory,
    stream_goal,
)


@pytest.fixture(scope='module')
def spec() -> RobotSpec:
    return load_robot_spec('fr3')


def scene() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(SCENE_XML))


def step_response(physics: Physics, spec: RobotSpec, steps: int = 300,
                  offset: float = 0.2) -> np.ndarray:
    """Arm positions (steps, 7) after a step of ``offset`` rad on every joint from home."""
    physics.reset_keyframe('home')
    physics.set_arm_target(spec.home + offset)
    out = np.empty((steps, 7))
    for k in range(steps):
        physics.step()
        out[k] = physics.state().position[:7]
    return out


def test_maps_joints_and_actuators_by_name(spec: RobotSpec) -> None:
    model = scene()
    index = index_model(model, spec)
    assert [model.joint(j).name for j in index.joint_ids] == list(spec.joint_names)
    assert [model.actuator(a).name for a in index.ctrl_ids] == [
        f'{j}_p' for j in spec.arm_joints] + ['gripper_servo']
    assert [model.actuator(a).name for a in index.velocity_ids] == [
        f'{j}_d' for j in spec.arm_joints]
    assert index.object_body == model.body('object').id


def test_joint_map_runs_a_renamed_model(spec: RobotSpec, tmp_path: Path) -> None:
    renamed = mujoco.MjModel.from_xml_path(str(renamed_scene(tmp_path)))
    with pytest.raises(ModelError, match=r"no joint 'fr3_joint1'.*joint_map"):
        Physics(renamed, spec)
    joint_map = parse_joint_map([f'{j}=arm_{i}' for i, j in enumerate(spec.arm_joints)])
    mapped = step_response(Physics(renamed, spec, joint_map), spec, steps=50)
    reference = step_response(Physics(scene(), spec), spec, steps=50)
    assert np.array_equal(mapped, reference)


def test_load_model_errors_say_what_and_how(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match='does not exist; set the model parameter'):
        load_model(tmp_path / 'missing.xml')
    (tmp_path / 'bad.xml').write_text('<mujoco><worldbody><body></mujoco>')
    with pytest.raises(ModelError, match=r'cannot load model .*; fix the MJCF') as info:
        load_model(tmp_path / 'bad.xml')
    assert '\n' not in str(info.value)
    assert load_model('models/fr3/scene.xml').nu == 15   # 7 p, 7 d, the gripper


@pytest.mark.parametrize('pairs', [['fr3_joint1'], ['=x'], ['nope=x']])
def test_bad_joint_map(spec: RobotSpec, pairs: list[str]) -> None:
    with pytest.raises(ModelError):
        index_model(scene(), spec, parse_joint_map(pairs))


def test_apply_is_idempotent_and_unset_means_nominal(spec: RobotSpec) -> None:
    model = scene()
    index = index_model(model, spec)
    pristine = scene()
    params = SimParams(joints={'fr3_joint2': JointParams(damping=3.0, kp=5000.0, kv=100.0)},
                       body_mass_scale={'fr3_link3': 1.5},
                       object=ObjectParams(mass=0.3, friction=0.5))
    apply_sim_params(model, params, index)
    once = (model.dof_damping.copy(), model.body_mass.copy(), model.actuator_biasprm.copy())
    apply_sim_params(model, params, index)
    assert np.array_equal(once[0], model.dof_damping)
    assert np.array_equal(once[1], model.body_mass)
    assert np.array_equal(once[2], model.actuator_biasprm)
    dof, act = model.joint('fr3_joint2').dofadr[0], model.actuator('fr3_joint2_p').id
    damper = model.actuator('fr3_joint2_d').id
    assert model.dof_damping[dof] == 3.0
    assert tuple(model.actuator_biasprm[act, :3]) == (0.0, -5000.0, 0.0)
    assert model.actuator_gainprm[act, 0] == 5000.0
    assert tuple(model.actuator_biasprm[damper, :3]) == (0.0, 0.0, -100.0)
    assert model.actuator_gainprm[damper, 0] == 100.0
    assert model.body_mass[model.body('fr3_link3').id] == pytest.approx(
        1.5 * pristine.body_mass[model.body('fr3_link3').id])
    assert model.body_mass[model.body('object').id] == 0.3
    assert model.geom_friction[model.geom('object_geom').id, 0] == 0.5
    read = nominal_sim_params(model, index)
    assert read.joints['fr3_joint2'].kv == 100.0
    assert read.body_mass_scale['fr3_link3'] == pytest.approx(1.5)
    apply_sim_params(model, SimParams(), index)  # back to nominal
    for name in ('dof_damping', 'actuator_biasprm', 'body_mass', 'body_inertia',
                 'geom_friction', 'body_subtreemass'):
        assert np.array_equal(getattr(model, name), getattr(pristine, name)), name


@pytest.mark.parametrize(('params', 'field'), [
    (SimParams(joints={'fr3_joint9': JointParams(damping=1.0)}), 'joints.fr3_joint9'),
    (SimParams(joints={'fr3_finger_joint1': JointParams(kp=1.0)}), 'fr3_finger_joint1'),
    (SimParams(body_mass_scale={'table': 2.0}), 'body_mass_scale.table'),
])
def test_params_naming_unknown_things_are_rejected(spec: RobotSpec, params: SimParams,
                                                   field: str) -> None:
    model = scene()
    with pytest.raises(SimParamsError, match=field):
        apply_sim_params(model, params, index_model(model, spec))


def test_triple_damping_changes_the_step_response(spec: RobotSpec) -> None:
    nominal = step_response(Physics(scene(), spec), spec)
    triple = SimParams(joints={j: JointParams(damping=3.0) for j in spec.arm_joints})
    damped = step_response(Physics(scene(), spec, params=triple), spec)
    assert np.abs(damped - nominal).max() > 1e-3
    # More damping, slower rise: after 50 ms joint 1 is further from the target.
    assert abs(damped[49, 0] - spec.home[0] - 0.2) > abs(nominal[49, 0] - spec.home[0] - 0.2)


@pytest.mark.parametrize('steps', [0, 1, 5, 60])
def test_the_laws_delay_ring_matches_shift_commands(spec: RobotSpec, steps: int) -> None:
    """The actuators see the targets the actuator law's ring delays, exactly as
    shift_commands delays a whole sequence (sysid's replay uses that one)."""
    model = scene()
    physics = Physics(model, spec, params=SimParams(command_delay=steps * model.opt.timestep))
    physics.reset_keyframe('home')
    assert physics.delay_steps == steps
    rng = np.random.default_rng(3)
    ids = physics.site.ids
    initial = physics.data.ctrl[ids].copy()
    commands = np.zeros((40, ids.size))
    commands[:, :7] = physics.arm_target + 0.01 * rng.normal(size=(40, 7))
    commands[:, 7] = initial[7]
    seen = np.empty_like(commands)
    for k, command in enumerate(commands):
        physics.set_arm_target(command[:7])
        physics.step(1)
        seen[k] = physics.data.ctrl[ids]
    assert np.array_equal(seen, shift_commands(commands, steps, initial))


@pytest.mark.parametrize('steps', [0, 1, 5, 60])
def test_the_commands_in_flight_are_the_target_less_the_next_one_the_actuators_see(
        spec: RobotSpec, steps: int) -> None:
    """arm_in_flight: the target set last minus what the actuators see next step (the
    delayed sequence of shift_commands, one step on); zero without a delay."""
    model = scene()
    physics = Physics(model, spec, params=SimParams(command_delay=steps * model.opt.timestep))
    physics.reset_keyframe('home')
    initial = physics.arm_target
    commands = initial + 0.01 * np.random.default_rng(4).normal(size=(41, 7))
    ahead = np.empty((40, 7))
    for k, command in enumerate(commands[:40]):
        physics.set_arm_target(command)
        physics.step(1)
        ahead[k] = physics.arm_in_flight
    if steps == 0:   # the next step's actuators see the next target itself
        assert not ahead.any()
    else:            # the next step's actuators see a command already set
        seen = shift_commands(commands, steps, initial)
        assert np.array_equal(ahead, commands[:40] - seen[1:])


def test_command_delay_shifts_the_response_by_whole_steps(spec: RobotSpec) -> None:
    delayed = Physics(scene(), spec, params=SimParams(command_delay=0.0052))
    assert delayed.delay_steps == 5
    late = step_response(delayed, spec, steps=100)
    prompt = Physics(scene(), spec)
    prompt.reset_keyframe('home')
    prompt.step(5)
    prompt.set_arm_target(spec.home + 0.2)
    shifted = np.array([(prompt.step(), prompt.state().position[:7])[1] for _ in range(95)])
    assert np.array_equal(late[5:], shifted)


def test_randomised_rollouts_are_bit_identical_per_seed(spec: RobotSpec) -> None:
    def rollout(seed: int) -> np.ndarray:
        physics = Physics(scene(), spec)
        conditions, _ = default_randomization().sample(np.random.default_rng(seed), 1.0)
        physics.apply_params(conditions.sim_params(physics.nominal, spec.arm_joints,
                                                   physics.index.mass_bodies, 0.05))
        return step_response(physics, spec, steps=200)

    assert np.array_equal(rollout(11), rollout(11))
    assert not np.array_equal(rollout(11), rollout(12))


def test_effort_at_rest_is_the_gravity_torque(spec: RobotSpec) -> None:
    physics = Physics(scene(), spec)
    physics.reset_keyframe('home')
    physics.step(500)
    state = physics.state()
    data, dofs = physics.data, physics.index.dof_adr[:7]
    mujoco.mj_forward(physics.model, data)
    assert np.abs(state.velocity[:7]).max() < 1e-6
    assert np.allclose(state.effort[:7], data.qfrc_bias[dofs], atol=1e-3)
    assert np.abs(state.effort[:7]).max() > 1.0  # not trivially zero


def test_poses_are_in_the_base_frame(spec: RobotSpec) -> None:
    here = Physics(scene(), spec)
    here.reset_keyframe('home')
    moved_spec = mujoco.MjSpec.from_file(str(SCENE_XML))
    base = moved_spec.body(spec.base_frame)
    base.pos = [0.3, -0.2, 0.1]
    base.quat = [np.cos(0.4), 0.0, 0.0, np.sin(0.4)]
    moved = Physics(moved_spec.compile(), spec)
    moved.reset_keyframe('home')
    a, b = here.state(), moved.state()
    assert np.allclose(a.flange_pos, b.flange_pos, atol=1e-9)
    assert np.allclose(a.flange_quat, b.flange_quat, atol=1e-9)
    assert np.allclose(a.flange_pos, here.data.site('flange').xpos, atol=1e-12)  # world = base
    assert not np.allclose(moved.data.body(spec.flange_frame).xpos, b.flange_pos)
    goal = np.array([0.4, 0.1, 0.3])
    moved.set_goal_pose(goal, np.array([1.0, 0.0, 0.0, 0.0]))
    mujoco.mj_forward(moved.model, moved.data)
    assert np.allclose(moved.body_pose(moved.model.body('goal').id)[0], goal)


def test_reset_joints_holds_the_given_state(spec: RobotSpec) -> None:
    physics = Physics(scene(), spec)
    q = np.concatenate([spec.home + 0.1, [0.01, 0.01]])
    physics.reset_joints(q)
    assert physics.time == 0.0
    assert np.allclose(physics.arm_target, q[:7])
    physics.step(200)
    assert np.abs(physics.state().position - q).max() < 2e-3


def test_joint_commands_are_validated(spec: RobotSpec) -> None:
    ok = parse_joint_command([0.0] * 8, spec.arm_joints)
    assert ok.gripper_width == 0.0 and ok.arm.shape == (7,)
    assert parse_joint_command([0.0] * 7, spec.arm_joints).gripper_width is None
    for bad, message in (([0.0] * 6, 'got 6'), ([0.0] * 9, 'got 9'),
                         ([0.0, float('nan')] + [0.0] * 5, 'fr3_joint2 target is nan'),
                         ([0.0] * 7 + [float('inf')], 'gripper width target is inf')):
        with pytest.raises(CommandError, match=message):
            parse_joint_command(bad, spec.arm_joints)


def test_trajectory_interpolation(spec: RobotSpec) -> None:
    names = ['fr3_joint3', 'fr3_joint1']  # any order, a subset
    goal = parse_trajectory(names, [1.0, 2.0], [[0.2, 0.4], [0.6, 0.8]], [[], []],
                            spec.arm_joints, None)
    current = spec.home.copy()
    plan = TrajectoryPlan(goal, start=10.0, current=current)
    out = np.empty(7)
    assert not plan.sample(10.5, out)  # linear from the current target
    assert out[0] == pytest.approx(0.2) and out[2] == pytest.approx(0.1)
    assert np.array_equal(out[[1, 3, 4, 5, 6]], current[[1, 3, 4, 5, 6]])
    plan.sample(11.5, out)
    assert out[0] == pytest.approx(0.6) and out[2] == pytest.approx(0.4)
    assert plan.sample(12.5, out) and out[0] == pytest.approx(0.8)
    cubic = TrajectoryPlan(parse_trajectory(['fr3_joint1'], [1.0], [[1.0]], [[0.0]],
                                            spec.arm_joints, None), 0.0, np.zeros(7))
    cubic.sample(0.5, out)
    assert out[0] == pytest.approx(0.5)  # symmetric smoothstep midpoint
    cubic.sample(0.25, out)
    assert out[0] == pytest.approx(3 * 0.25**2 - 2 * 0.25**3)


def test_points_with_accelerations_are_joined_by_quintic_splines(spec: RobotSpec) -> None:
    """JointTrajectoryController interpolates quintic when every point carries accelerations
    (trajectory.cpp, interpolate_between_points): position, velocity and acceleration match
    at both ends. The oracle is the quintic through those six conditions, solved here."""
    names = list(spec.arm_joints)
    p = [[0.1 * j for j in range(7)], [0.3 + 0.1 * j for j in range(7)]]
    v = [[0.2] * 7, [-0.1] * 7]
    a = [[1.5] * 7, [-2.0] * 7]
    goal = parse_trajectory(names, [0.0, 1.5], p, v, spec.arm_joints, None, a)
    plan = TrajectoryPlan(goal, start=4.0, current=np.zeros(7))
    h = 1.5
    # c0 + c1 t + ... + c5 t^5 with p, v, a given at t = 0 and t = h
    rows = [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0],
            [1, h, h**2, h**3, h**4, h**5], [0, 1, 2 * h, 3 * h**2, 4 * h**3, 5 * h**4],
            [0, 0, 2, 6 * h, 12 * h**2, 20 * h**3]]
    out, velocity = np.empty(7), np.empty(7)
    for j in (0, 6):
        c = np.linalg.solve(np.array(rows, float), [p[0][j], v[0][j], a[0][j], p[1][j],
                                                    v[1][j], a[1][j]])
        for t in (0.1, 0.6, 1.2):
            plan.sample(4.0 + t, out, velocity)
            assert out[j] == pytest.approx(np.polyval(c[::-1], t), abs=1e-12)
            assert velocity[j] == pytest.approx(np.polyval(np.polyder(c[::-1]), t), abs=1e-12)
    cubic = TrajectoryPlan(parse_trajectory(names, [0.0, 1.5], p, v, spec.arm_joints, None),
                           4.0, np.zeros(7))
    cubic.sample(4.6, out)
    plan.sample(4.6, velocity)
    assert abs(out[0] - velocity[0]) > 1e-3   # without accelerations: cubic, another path


def test_goal_from_message_reads_the_accelerations(spec: RobotSpec) -> None:
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    point = JointTrajectoryPoint(positions=[0.0] * 7, velocities=[0.0] * 7,
                                 accelerations=[0.5] * 7)
    point.time_from_start.sec = 1
    goal = goal_from_message(JointTrajectory(joint_names=list(spec.arm_joints),
                                             points=[point]), spec.arm_joints)
    assert goal.accelerations is not None and np.all(goal.accelerations == 0.5)
    del point.accelerations[:]   # positions and velocities only: cubic, as before
    assert goal_from_message(JointTrajectory(joint_names=list(spec.arm_joints),
                                             points=[point]), spec.arm_joints
                             ).accelerations is None


@pytest.mark.parametrize(('names', 'times', 'points', 'message'), [
    (['fr3_joint9'], [1.0], [[0.0]], 'unknown joint'),
    (['fr3_joint1', 'fr3_joint1'], [1.0], [[0.0, 0.0]], 'duplicates'),
    (['fr3_joint1'], [1.0, 1.0], [[0.0], [0.1]], 'strictly increasing'),
    (['fr3_joint1'], [1.0], [[0.0, 1.0]], '2 positions for 1 joints'),
    (['fr3_joint1'], [1.0], [[float('nan')]], 'NaN'),
    (['fr3_joint1'], [], [], 'no points'),
])
def test_bad_trajectories(spec: RobotSpec, names: list[str], times: list[float],
                          points: list[list[float]], message: str) -> None:
    with pytest.raises(TrajectoryError, match=message):
        parse_trajectory(names, times, points, [[] for _ in points], spec.arm_joints, None)


@pytest.mark.parametrize(('poke', 'words'), [
    (lambda d: d.qvel.__setitem__(0, np.nan), 'bad velocity at dof 0'),   # MuJoCo resets
    (lambda d: d.qpos.__setitem__(2, np.inf), 'bad position'),
    (lambda d: d.qvel.__setitem__(3, 500.0), 'beyond 100 rad/s'),
])
def test_a_diverged_state_is_caught_once_and_recovered_at_the_same_time(
        spec: RobotSpec, poke: object, words: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)                        # MuJoCo writes MUJOCO_LOG.TXT here
    physics = Physics(scene(), spec)
    physics.reset_keyframe('home')
    physics.step(10)
    assert physics.diverged() is None
    poke(physics.data)                                 # type: ignore[operator]
    before = physics.time
    physics.step()
    problem = physics.diverged()
    assert problem is not None and words in problem, problem
    physics.recover('home', before + physics.timestep)
    assert physics.diverged() is None                  # reported once, not again
    assert physics.time == pytest.approx(before + physics.timestep)
    np.testing.assert_allclose(physics.arm_target, spec.home)
    physics.step(100)
    assert physics.diverged() is None


def _follow(goals: list[TrajectoryGoal], taken: list[float], steps: int,
            dt: float = 1e-3) -> np.ndarray:
    """Targets (steps, 7) when ``goals`` are taken over at ``taken`` s, as the node does."""
    plan, current, out = None, np.zeros(7), np.empty((steps, 7))
    pending = 0
    for k in range(steps):
        now = k * dt
        while pending < len(goals) and taken[pending] <= now + 1e-12:
            if plan is not None:
                plan.sample(now, current)
            goal = goals[pending]
            plan = TrajectoryPlan(goal, goal.start, current.copy(), now)
            pending += 1
        if plan is not None:
            plan.sample(now, current)
        out[k] = current
    return out


def test_a_chain_of_two_point_segments_does_not_depend_on_arrival() -> None:
    """excite's chain: [previous target at 0, target at one period] on a fixed grid, each
    message arriving before its stamp (excite stamps half a period ahead)."""
    period, rng = 0.02, np.random.default_rng(3)
    targets = np.cumsum(rng.normal(0.0, 0.01, (30, 7)), axis=0)
    previous = np.vstack((np.zeros(7), targets[:-1]))
    goals = [TrajectoryGoal(np.array([0.0, period]), np.vstack((p, t)), None, np.arange(7),
                            0.1 + n * period)
             for n, (p, t) in enumerate(zip(previous, targets, strict=True))]
    early = _follow(goals, [g.start - 0.0097 for g in goals], 800)
    late = _follow(goals, [g.start - rng.uniform(0.0, 0.005) for g in goals], 800)
    np.testing.assert_allclose(early, late, rtol=0, atol=1e-15)


def test_a_one_point_trajectory_leaves_from_the_target_at_arrival() -> None:
    """JTC's rule: from the target where it arrives to the point at stamp + time_from_start,
    so a stamp in the past shortens the segment and the target never jumps."""
    goal = TrajectoryGoal(np.array([0.05]), np.ones((1, 7)), None, np.arange(7), 0.2)
    out = _follow([goal], [0.23], 300)
    assert np.abs(np.diff(out, axis=0)).max() < 0.05 + 1e-12   # 1 rad over 20 ms
    assert np.all(out[230] == 0.0) and np.allclose(out[250], 1.0)
    np.testing.assert_allclose(out[240], 0.5)


def test_replayed_streamed_targets_slow_to_the_velocity_limits(spec: RobotSpec) -> None:
    """sysid's replay keeps a recorded stream moving (the simulator stops on it instead)."""
    current = spec.home.copy()
    near = stream_goal(current + 0.01, current, 0.05, spec.velocity)
    assert near.times[-1] == pytest.approx(0.05)
    far = current + 0.5
    goal = stream_goal(far, current, 0.05, spec.velocity)
    assert goal.times[-1] == pytest.approx(float(np.max(0.5 / spec.velocity)))
    peak = TrajectoryPlan(goal, 0.0, current).peak_speed()
    assert np.all(peak <= spec.velocity * (1 + 1e-9)) and np.any(
        np.isclose(peak, spec.velocity))
    jump = parse_trajectory(['fr3_joint5'], [0.01], [[current[4] + 0.5]], [[]],
                            spec.arm_joints, None)
    assert TrajectoryPlan(jump, 0.0, current).peak_speed()[4] == pytest.approx(50.0)


@pytest.mark.parametrize('robot', ['fr3', 'panda'])
def test_nominal_friction_is_gaz_s_smooth_sigmoid(robot: str) -> None:
    """The shipped models' arm friction is smooth, -c tanh(qd / v), with Gaz et al.'s
    identified Panda sigmoid: c = phi1 / 2, v = 2 / phi2; the fingers keep MuJoCo's dry
    friction; a SimParams transition overrides the model's, and nominal_sim_params reads it."""
    phi1 = np.array([0.546, 0.872, 0.641, 1.279, 0.839, 0.303, 0.565])
    phi2 = np.array([5.12, 9.07, 10.14, 5.59, 8.35, 17.13, 10.34])
    robot_spec = load_robot_spec(robot)
    scene = Path(SCENE_XML).parents[1] / robot / 'scene.xml'
    physics = Physics(mujoco.MjModel.from_xml_path(str(scene)), robot_spec)
    arm = physics.index.dof_adr[:7]
    assert np.allclose(physics.index.nominal_transition[:7], 2 / phi2, rtol=1e-3)
    assert np.all(physics.index.nominal_transition[7:] == 0)
    assert np.all(physics.model.dof_frictionloss[arm] == 0)   # no dry constraint on the arm
    data = physics.data
    data.qvel[:] = 0.0
    data.qvel[arm] = 0.05
    physics.step(1)   # the law applies the friction at the velocities before the step
    expected = -phi1 / 2 * np.tanh(0.05 * phi2 / 2)
    assert np.allclose(data.qfrc_applied[arm], expected, rtol=5e-3)   # levels to 1e-3 N*m
    nominal = physics.nominal.joints[robot_spec.arm_joints[5]]
    assert nominal.friction_transition == pytest.approx(2 / phi2[5], rel=1e-3)
    assert nominal.frictionloss == pytest.approx(phi1[5] / 2, rel=1e-2)
    physics.apply_params(SimParams(joints={robot_spec.arm_joints[0]: JointParams(
        friction_transition=1.0)}))
    data.qvel[:] = 0.0
    data.qvel[arm] = 0.05
    physics.step(1)
    assert data.qfrc_applied[arm[0]] == pytest.approx(-phi1[0] / 2 * np.tanh(0.05), rel=1e-2)
    finger = physics.index.dof_adr[7]
    assert physics.model.dof_frictionloss[finger] == physics.index.nominal_dof[2, finger]


def test_a_payload_is_a_compensated_point_mass_at_the_flange(spec: RobotSpec) -> None:
    """SimParams.payload: mass and centre of mass at the flange; none (the default) is none."""
    from simops_core.sim_params import PayloadParams

    model = mujoco.MjModel.from_xml_path(str(SCENE_XML))
    bare = Physics(model, spec)
    flange = bare.index.flange_body
    before = float(model.body_subtreemass[flange])
    loaded = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), spec, params=SimParams(
        payload=PayloadParams(mass=1.5, com_x=0.02, com_z=0.1)))
    lm = loaded.model
    assert lm.body_subtreemass[flange] == pytest.approx(before + 1.5)
    # The flange body itself was massless: it now is the point, where it was put.
    np.testing.assert_allclose(lm.body_ipos[flange], [0.02, 0.0, 0.1], atol=1e-12)
    assert lm.body_mass[flange] == pytest.approx(1.5)
    for physics in (bare, loaded):   # compensated: the arm holds home under the extra weight
        physics.reset_keyframe('home')
        physics.set_arm_target(spec.home)
        physics.step(1000)
        assert np.abs(physics.state().position[:7] - spec.home).max() < 2e-3
    loaded.apply_params(SimParams())   # back to none
    assert loaded.model.body_mass[flange] == pytest.approx(model.body_mass[flange])
    assert loaded.model.body_subtreemass[flange] == pytest.approx(before)


def test_an_arm_without_a_hand_carries_nothing_and_still_runs(spec: RobotSpec) -> None:
    """end_effector: none takes the hand's mass and contacts off; a payload goes on top."""
    from simops_core.sim_params import PayloadParams

    model = mujoco.MjModel.from_xml_path(str(SCENE_XML))
    hand = Physics(model, spec)
    flange = hand.index.flange_body
    with_hand = float(model.body_subtreemass[flange])
    assert with_hand == pytest.approx(0.76)   # the Franka Hand: 0.73 kg and two 15 g fingers
    bare = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), spec,
                   params=SimParams(end_effector='none'))
    m = bare.model
    assert m.body_subtreemass[flange] < 1e-5
    assert not np.any(m.geom_contype[bare.index.hand_geoms] | m.geom_conaffinity[
        bare.index.hand_geoms])
    # Gravity at home: joint 2 carries the hand's weight times its lever, and no longer.
    torques = []
    for physics in (hand, bare):
        physics.reset_keyframe('home')
        mujoco.mj_forward(physics.model, physics.data)
        torques.append(physics.data.qfrc_bias[physics.index.dof_adr[1]])
    assert abs(torques[0] - torques[1]) > 0.76 * 9.81 * 0.3
    for physics in (hand, bare):   # the fingers still follow the gripper; the arm holds
        physics.set_arm_target(spec.home)
        physics.set_gripper_width(0.02)
        physics.step(1000)
        state = physics.state()
        assert np.all(np.isfinite(state.position))
        assert np.abs(state.position[:7] - spec.home).max() < 2e-3
        assert abs(state.position[7] + state.position[8] - 0.02) < 2e-3
    bare.apply_params(SimParams(end_effector='none', payload=PayloadParams(mass=1.0, com_z=0.1)))
    assert bare.model.body_subtreemass[flange] == pytest.approx(1.0, abs=1e-5)
    bare.apply_params(SimParams())   # back to the hand, contacts and all
    assert bare.model.body_subtreemass[flange] == pytest.approx(with_hand)
    np.testing.assert_array_equal(bare.model.geom_contype, hand.model.geom_contype)


def test_a_position_servo_model_is_the_documented_alternative(spec: RobotSpec) -> None:
    """A model whose arm joints have a MuJoCo position actuator with kv and no velocity
    actuator runs the position-servo law: no velocity feed-forward, kv from SimParams."""
    edit = mujoco.MjSpec.from_file(str(SCENE_XML))
    for i, joint in enumerate(spec.arm_joints):
        edit.delete(edit.actuator(f'{joint}_d'))
        edit.actuator(f'{joint}_p').biasprm[2] = -spec.gain_d[i]
    home = edit.key('home')
    home.ctrl = list(home.ctrl)[:len(spec.arm_joints) + 1]   # the servos' and the gripper's
    servo = Physics(edit.compile(), spec)
    assert np.all(servo.index.velocity_ids == -1)
    servo.apply_params(SimParams(joints={'fr3_joint1': JointParams(kv=12.0)}))
    assert servo.model.actuator_biasprm[servo.index.ctrl_ids[0], 2] == -12.0
    # A 0.5 rad/s ramp: the servo trails by about kv / kp (its lag), the JTC law does not.
    lag = {}
    for name, physics in (('servo', servo), ('jtc', Physics(scene(), spec))):
        physics.reset_keyframe('home')
        for k in range(500):
            target = spec.home.copy()
            target[3] += 0.5 * k * physics.timestep
            velocity = np.zeros(7)
            velocity[3] = 0.5
            physics.set_arm_target(target, velocity)
            physics.step()
        lag[name] = float(target[3] - physics.state().position[3])
    assert lag['servo'] > 10 * abs(lag['jtc'])
    assert lag['servo'] == pytest.approx(0.5 * spec.gain_d[3] / spec.gain_p[3], rel=0.3)


def test_a_stalled_stepper_applies_what_arrived_at_its_next_step(spec: RobotSpec) -> None:
    """Realtime pacing catching up after a 0.3 s hiccup: three streamed targets that arrived
    50 ms apart during it are applied at the first step after it (a command waits for no
    deadline, so the simulator's lag never delays one), and the last is reached over the
    stream's own period, not in one step: the stream rule's catch-up, no faster than half
    the velocity limits."""
    import threading
    import time

    from simops_sim.joint_commands import ArmCommand
    from simops_sim.stepper import Stepper, Timing
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec})
    physics = world.arms['']
    timing = Timing('realtime', 1.0, 0.05, 0.5, 5.0, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    taken: list[tuple[float, Any]] = []
    follow = physics.follow
    physics.follow = lambda plan, speed=None: (  # type: ignore
        taken.append((physics.time, plan)), follow(plan, speed))[1]
    stall = threading.Event()
    stalled: list[float] = []

    def publish(frame: object) -> None:
        if stall.is_set():
            stall.clear()
            stalled.append(physics.time)
            time.sleep(0.3)   # the physics thread is held up, outside the lock

    with stepping(stepper, publish):
        time.sleep(0.2)
        stall.set()
        time.sleep(0.05)   # inside the hiccup
        for k in range(3):
            stepper.arm.submit(ArmCommand(spec.home + 0.01 * (k + 1), None))
            time.sleep(0.05)
        time.sleep(0.4)
    assert len(taken) == 3, taken
    times = [t for t, _ in taken]
    assert times == [times[0]] * 3, times   # all at one step ...
    assert times[0] - stalled[0] <= 0.0021, (stalled, times)   # ... the first after the stall
    last = taken[-1][1]
    _, velocities = last.segments()
    assert np.abs(velocities).max() <= 0.5 * spec.velocity.min() + 1e-9
    assert last.times[-1] >= 0.05 - 1e-9   # time_from_start of its one point


def test_a_catch_up_runs_no_further_than_a_follower_allows(spec: RobotSpec) -> None:
    """After a 0.3 s stall the realtime stepper catches up in a burst. With a follower (the
    camera loop, whose next frame is due 10 ms after the stall) the burst stops FOLLOW_LEAD
    past that frame and waits there until the follower has looked; then it catches up all
    the same. Without it a wall-paced camera saw 325 ms of sim time pass between two frames."""
    import math
    import threading
    import time

    from simops_sim.stepper import FOLLOW_LEAD, Stepper, Timing
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec})
    timing = Timing('realtime', 1.0, 0.05, 0.5, 5.0, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    needs = [math.inf]
    due: list[float] = []
    stall = threading.Event()

    def publish(frame: object) -> None:
        if stall.is_set():
            stall.clear()
            due.append(world.time + 0.01)
            needs[0] = due[0]
            time.sleep(0.3)   # the physics thread is held up, outside the lock

    def sim_time() -> float:
        with stepper.lock:
            return world.time

    with stepper.followed_by(lambda: needs[0]), stepping(stepper, publish):
        started = time.monotonic()
        time.sleep(0.2)
        stall.set()
        time.sleep(0.5)
        held = sim_time()
        time.sleep(0.2)
        still = sim_time()
        needs[0] = math.inf   # the follower has looked
        time.sleep(0.5)
        behind = (time.monotonic() - started) - sim_time()
        values = stepper.report().values
    assert held == still, (held, still)   # waiting for the follower ...
    assert due[0] + FOLLOW_LEAD <= held <= due[0] + FOLLOW_LEAD + 0.0015, (due, held)
    assert values['follower_wait_ms'] >= 300, values
    assert values['overruns'] == 0 and abs(behind) < 0.05, (behind, values)   # ... caught up


def test_a_simulator_behind_real_time_applies_a_command_when_it_runs(spec: RobotSpec) -> None:
    """A step running 0.2 s late (the simulator behind real time) applies a command that
    arrived before it ran, though after the step was due: waiting for the schedule to catch
    up delayed every command by the simulator's lag (up to 0.34 s measured with two arms on
    two cores), a delay in a sim-time policy's loop that overshot an arm into the table."""
    from simops_sim.joint_commands import ArmCommand
    from simops_sim.stepper import Stepper, Timing
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec})
    timing = Timing('realtime', 1.0, 0.05, 0.5, 5.0, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    number = stepper.arm.queue(ArmCommand(spec.home + 0.01, None), 10.0)
    stepper.advance(0.2, 9.85)   # due at 9.85 s, runs at 10.05 s
    assert stepper.arm.follow_state().applied == number
    later = stepper.arm.queue(ArmCommand(spec.home + 0.02, None), 10.5)
    stepper.advance(0.0, 10.051)   # on time, before it arrived
    assert stepper.arm.follow_state().applied == number != later


def test_with_system_stamps_a_late_step_applies_what_arrived_by_its_stamp(
        spec: RobotSpec) -> None:
    """Without /clock the stamps are the steps' due times on the system clock, as a real
    arm's driver stamps: a command takes effect at the step due after it arrived, the stamp
    of its arrival, as fit's replay applies a recorded one, also when the simulator runs
    late (applying it when the step ran put the stand-in 0.1-0.3 s ahead of its
    recording); a stall beyond MAX_CATCH_UP applies everything."""
    import time

    from simops_sim.joint_commands import ArmCommand
    from simops_sim.stepper import Stepper, Timing
    from simops_sim.stream_rule import MAX_CATCH_UP
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec})
    timing = Timing('realtime', 1.0, 0.05, 0.5, 5.0, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, time.time_ns, lambda key, text: None)
    before = stepper.arm.follow_state().applied   # the start's hold
    number = stepper.arm.queue(ArmCommand(spec.home + 0.01, None), 10.0)
    stepper.advance(0.2, 9.85)   # due before it arrived: not yet
    assert stepper.arm.follow_state().applied == before != number
    stepper.advance(0.2, 10.0005)   # the step due after it
    assert stepper.arm.follow_state().applied == number
    later = stepper.arm.queue(ArmCommand(spec.home + 0.02, None), 12.0)
    stepper.advance(MAX_CATCH_UP + 0.5, 11.0)   # a stall: everything that had arrived
    assert stepper.arm.follow_state().applied == later


@contextmanager
def realtime_stepper(spec: RobotSpec, publish: Callable[[object], None] = lambda frame: None
                     ) -> Iterator[Any]:
    """A realtime Stepper of the FR3 scene (reflexes on, 0.3 s command timeout) stepping on
    its own thread until the block ends."""

    from simops_sim.stepper import Stepper, Timing
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec}, reflexes=True)
    timing = Timing('realtime', 1.0, 0.05, 0.5, 0.3, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    with stepping(stepper, publish):
        yield stepper


@contextmanager
def stepping(stepper: Any, publish: Callable[[object], None]) -> Iterator[None]:
    """``stepper`` running on its own thread, handing frames to ``publish``, until the block
    ends."""
    import threading

    running = threading.Event()
    running.set()
    thread = threading.Thread(target=stepper.run, args=(running, publish))
    thread.start()
    try:
        yield
    finally:
        running.clear()
        stepper.wake()
        thread.join(timeout=5)


def test_a_stream_with_dropped_targets_keeps_its_pace(spec: RobotSpec) -> None:
    """Streamed targets 0.05 rad apart at 20 Hz (1 rad/s), then three the node never got
    (dropped while it stalled): the next target, 0.2 rad on, is reached over the 0.2 s since
    the last one arrived, at the stream's pace, with no stop; so is one 0.6 s later, after
    the command timeout held the arm. The same 0.2 rad more than 1 s after the stream (a
    step from rest) moves at 4 rad/s: a protective stop."""
    import time

    from simops_sim.joint_commands import ArmCommand

    target = spec.home.copy()
    with realtime_stepper(spec) as stepper:
        time.sleep(0.2)
        for _ in range(3):
            target[0] += 0.05
            stepper.arm.submit(ArmCommand(target.copy(), None))
            time.sleep(0.05)
        time.sleep(0.15)   # three targets the node never got
        target[0] += 0.2
        stepper.arm.submit(ArmCommand(target.copy(), None))
        time.sleep(0.6)
        target[0] += 0.2   # 0.6 s after the last one: the 0.3 s command timeout held
        stepper.arm.submit(ArmCommand(target.copy(), None))
        time.sleep(0.6)
        paced = stepper.arm.stopped()
        reached = stepper.arm.follow_state().actual_q
        time.sleep(1.2)   # the stream has ended
        target[0] += 0.2
        stepper.arm.submit(ArmCommand(target.copy(), None))
        time.sleep(0.2)
        step = stepper.arm.stopped()
    assert paced is None, paced
    assert abs(reached[0] - (spec.home[0] + 0.55)) < 0.01, reached
    assert step is not None and step.error == 'joint_velocity_violation'
    assert step.joint == spec.arm_joints[0] and 'a command moves' in step.text


def test_a_stall_of_the_node_costs_lag_not_a_stop(spec: RobotSpec) -> None:
    """A stream at half of fr3_joint6's velocity limit (the policy's default scale) whose
    targets reach the node bunched: one 120 ms late, the next 5 ms after it. Reached over
    a period from where the late one left the arm, the second would move the joint at its
    limit, and the tracking overshoot would stop the arm for a stall of the simulator's
    own. It catches up at no more than CATCH_UP_SPEED of the limit: no stop, the measured
    speed stays under the limit, and the stream ends where it was sent."""
    import time

    from simops_sim.joint_commands import ArmCommand
    from simops_sim.stream_rule import CATCH_UP_SPEED

    peak = np.zeros(7)
    arms: list[Any] = []

    def publish(frame: object) -> None:   # from the first step; the lane comes just after
        if arms:
            np.maximum(peak, np.abs(arms[0].physics.state().velocity[:7]), out=peak)

    joint, step = 5, 0.5 * spec.velocity[5] * 0.05
    target = spec.home.copy()
    with realtime_stepper(spec, publish) as stepper:
        arms.append(stepper.arm)
        time.sleep(0.2)
        for k in range(10):
            target[joint] += step
            stepper.arm.submit(ArmCommand(target.copy(), None))
            time.sleep(0.12 if k == 4 else 0.005 if k == 5 else 0.05)
        time.sleep(0.5)
        stop, reached = stepper.arm.stopped(), stepper.arm.follow_state().actual_q
    assert stop is None, stop.message()
    assert peak[joint] < spec.velocity[joint], (peak[joint], CATCH_UP_SPEED)
    assert abs(reached[joint] - target[joint]) < 0.01, (reached[joint], target[joint])


def test_targets_taken_late_keep_the_pace_they_were_received_at(spec: RobotSpec) -> None:
    """A 20 Hz stream (0.05 rad a target, 1 rad/s) whose node stalls: the target received at
    T is taken at T + 0.2 s, together with the one received at T + 0.2 s, 0.2 rad on (the
    three between were dropped). Judged by when they were taken, the second would move the
    joint 0.2 rad in one period (4 rad/s): a protective stop the stream never asked for.
    Judged by their DDS receipt times (``received_ns``), it moves at the stream's 1 rad/s."""
    import time

    from simops_sim.joint_commands import ArmCommand

    target = spec.home.copy()
    with realtime_stepper(spec) as stepper:
        time.sleep(0.2)
        for _ in range(3):
            target[0] += 0.05
            stepper.arm.submit(ArmCommand(target.copy(), None), time.time_ns())
            time.sleep(0.05)
        late = target.copy()
        late[0] += 0.05
        received = time.time_ns()
        time.sleep(0.2)   # the executor stalls with that target in hand
        target = late.copy()
        target[0] += 0.2
        stepper.arm.submit(ArmCommand(late, None), received)
        stepper.arm.submit(ArmCommand(target.copy(), None), time.time_ns())
        time.sleep(0.5)
        stop, reached = stepper.arm.stopped(), stepper.arm.follow_state().actual_q
    assert stop is None, stop.message()
    assert abs(reached[0] - target[0]) < 0.01, (reached[0], target[0])


@pytest.mark.parametrize(('rate', 'every'), [(1000.0, 50), (20.0, 50), (10.0, 100), (7.0, 150)])
def test_lockstep_publishes_joint_states_at_period_ends_only(rate: float, every: int,
                                                             spec: RobotSpec) -> None:
    """A period's states go out together after it; a controller on its own clock must only
    ever find the period's last one (docs/interfaces.md, ``joint_state_rate``)."""
    from simops_sim.stepper import Stepper, Timing
    from simops_sim.world import World

    world = World(mujoco.MjModel.from_xml_path(str(SCENE_XML)), {'': spec})
    timing = Timing('lockstep', 1.0, 0.05, 0.5, 5.0, rate, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    assert stepper.state_every == every   # 1 ms steps: 50 per 0.05 s period


def test_the_impedance_law_applies_its_gains_and_the_dynamics_feedforward(
        spec: RobotSpec) -> None:
    """One step on the arm's own loop: effort = K (q_d - q) + D (qd_d - qd) + M qdd_d + c
    + gravity, with M qdd_d + c from mj_inverse (not the code under test) and qdd_d the
    desired velocity's change from rest over two steps; the spec's stiffness, not the JTC's."""
    physics = Physics(scene(), spec)
    physics.reset_keyframe('home')
    physics.set_controller('joint_impedance')
    physics.step(5)
    q = physics.arm_measured()[0]
    target = q + np.linspace(0.0005, -0.0005, 7)   # inside every joint's torque limit
    velocity = np.linspace(-0.01, 0.01, 7)
    physics.set_arm_target(target, velocity)
    data, model, dofs = physics.data, physics.model, physics.index.dof_adr[:7]
    before = data.qpos.copy(), data.qvel.copy()
    physics.step()
    effort = data.qfrc_actuator[dofs].copy()

    check_model = scene()
    check_model.dof_damping[:] = 0.0
    check_model.dof_frictionloss[:] = 0.0
    check = mujoco.MjData(check_model)
    home = model.key_qpos[model.key('home').id]
    torques = []
    for qvel, qacc in ((velocity, velocity / (2 * physics.timestep)),
                       (0 * velocity, 0 * velocity)):
        check.qpos[:] = home
        check.qpos[physics.index.qpos_adr[:7]] = target
        check.qvel[:] = 0.0
        check.qvel[dofs] = qvel
        check.qacc[:] = 0.0
        check.qacc[dofs] = qacc
        mujoco.mj_inverse(check_model, check)
        torques.append(check.qfrc_inverse[dofs].copy())
    gravity = mujoco.MjData(model)
    gravity.qpos[:] = before[0]
    mujoco.mj_forward(model, gravity)
    stiffness, damping = spec.impedance_p, spec.impedance_d
    expected = (stiffness * (target - q) + damping * (velocity - before[1][dofs])
                + torques[0] - torques[1] + gravity.qfrc_gravcomp[dofs])
    np.testing.assert_allclose(effort, expected, rtol=1e-6, atol=1e-6)


def test_the_impedance_law_tracks_what_the_effort_jtc_lags_behind(spec: RobotSpec) -> None:
    """A 0.5 Hz sweep of 0.3 rad on every joint, targets set every 1 ms step: the arm's own
    loop follows within 0.3 mrad RMS (its stiffness and feedforward), the effort JTC lags
    by more than 2 mrad; switching back restores the JTC's gains."""
    def sweep(law: str) -> float:
        physics = Physics(scene(), spec)
        physics.reset_keyframe('home')
        physics.set_controller(law)
        home, dt = physics.arm_measured()[0], physics.timestep
        w = 2 * np.pi * 0.5
        errors = []
        for k in range(2000):
            t = k * dt
            physics.set_arm_target(home + 0.3 * np.sin(w * t), np.full(7, 0.3 * w * np.cos(w * t)))
            physics.step()
            if k >= 500:
                errors.append(physics.arm_measured()[0] - home - 0.3 * np.sin(w * (t + dt)))
        return float(np.sqrt(np.mean(np.square(errors))))

    assert sweep('joint_impedance') < 0.3e-3
    assert sweep('joint_trajectory') > 2e-3
    physics = Physics(scene(), spec)
    physics.set_controller('joint_impedance')
    physics.set_controller('joint_trajectory')
    assert physics.law.dynamics[0] is None
    np.testing.assert_array_equal(
        physics.model.actuator_gainprm[physics.index.ctrl_ids[:7], 0], spec.gain_p)


def test_fitted_impedance_gains_serve_the_impedance_law_only(spec: RobotSpec) -> None:
    """SimParams whose kp and kv are the impedance loop's (controller: joint_impedance) set
    that law's gains; the effort JTC keeps the spec's."""
    joints = {name: JointParams(kp=0.8 * p, kv=0.8 * d) for name, p, d in
              zip(spec.arm_joints, spec.impedance_p, spec.impedance_d, strict=True)}
    physics = Physics(scene(), spec, params=SimParams(joints=joints,
                                                      controller='joint_impedance'))
    servos = physics.index.ctrl_ids[:7]
    np.testing.assert_array_equal(physics.model.actuator_gainprm[servos, 0], spec.gain_p)
    physics.set_controller('joint_impedance')
    np.testing.assert_allclose(physics.model.actuator_gainprm[servos, 0], 0.8 * spec.impedance_p)
    np.testing.assert_allclose(physics.law.stiffness[0], 0.8 * spec.impedance_p)
