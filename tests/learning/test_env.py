"""SimOps/FR3Reach-v0: registration, spaces, the shared builder and safety pipeline, physics
conditions, sim params, determinism, and Gymnasium's vector API."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simops_learning  # noqa: F401 - registers the env
from simops_core import safety
from simops_core.observation import ObservationBuilder, RobotObservation
from simops_core.policy_step import StepSettings
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import JointParams, SimParams, save_sim_params
from simops_learning.curriculum import Curriculum
from simops_learning.expert import ReachExpert
from simops_learning.reach_env import ENV_ID, WORKSPACE_HIGH, WORKSPACE_LOW, FR3ReachEnv
from simops_sim.randomization import Conditions, default_randomization

SPEC = load_robot_spec('fr3')


@pytest.fixture(scope='module')
def env() -> FR3ReachEnv:
    return FR3ReachEnv()


def test_registered_env_passes_gymnasium_checks() -> None:
    env = gym.make(ENV_ID)
    assert env.observation_space.shape == (66,)
    assert env.action_space.shape == (8,)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_make_imports_the_package_on_demand() -> None:
    env = gym.make(f'simops_learning:{ENV_ID}', max_episode_steps=5)
    env.reset(seed=0)
    steps = 0
    while not any(env.step(np.zeros(8, np.float32))[2:4]):
        steps += 1
    assert steps == 4   # truncated at step 5
    env.close()


def test_goals_are_sampled_in_the_workspace(env: FR3ReachEnv) -> None:
    goals = np.array([env.reset(seed=s)[1]['goal'] for s in range(50)])
    assert np.all(goals >= WORKSPACE_LOW) and np.all(goals <= WORKSPACE_HIGH)
    assert np.all(goals.max(axis=0) - goals.min(axis=0) > 0.5 * (WORKSPACE_HIGH - WORKSPACE_LOW))


def test_observation_and_command_follow_the_node_pipeline(env: FR3ReachEnv) -> None:
    """Rebuild obs and commands from the physics state with the shared modules directly."""
    goal = np.array([0.5, 0.1, 0.3])
    obs, _ = env.reset(seed=3, options={'goal': goal, 'ramp_time': 0.5})
    builder = ObservationBuilder(env.card, SPEC.joint_names, SPEC.gripper.joints)
    config = StepSettings(ramp_time=0.5)
    limits = safety.SafetyLimits.from_spec(SPEC, 0.05, config.velocity_scale,
                                           config.joint_limit_margin)
    mapping = safety.ActionMapping(np.arange(7), 7, 1.0, 0.05, 'last_command',
                                   safety.lowpass_alpha(config.lpf_cutoff_hz, 20.0))

    def raw(last_action: np.ndarray) -> RobotObservation:
        state = env.physics.state()
        quat = state.object_quat[[1, 2, 3, 0]]
        return RobotObservation(state.position, state.velocity, state.object_pos, quat,
                                goal, last_action)

    expected = builder.reset(raw(np.zeros(8)))
    np.testing.assert_array_equal(obs, expected)
    state = safety.start(env.physics.state().position[:7], 0.08, limits)
    rng = np.random.default_rng(0)
    previous = env.physics.arm_target
    for tick in range(15):
        action = rng.uniform(-1.5, 1.5, 8)
        measured = env.physics.state().position[:7]
        out = safety.step(state, action, measured, min(tick * 0.05 / 0.5, 1.0), limits,
                          mapping)
        state = out.state
        before = env.physics.arm_target
        obs, _, _, _, info = env.step(action.astype(np.float32))
        np.testing.assert_allclose(info['command'], [*state.target, state.gripper],
                                   atol=1e-6)   # float32 action
        # JTC's one-point segment from the previous command reaches this one after a period
        np.testing.assert_allclose(before, previous, rtol=0, atol=1e-12)
        np.testing.assert_allclose(env.physics.arm_target, info['command'][:7], rtol=0,
                                   atol=1e-12)
        previous = info['command'][:7]
        np.testing.assert_allclose(obs, builder.build(raw(out.action)), atol=1e-6)


def test_success_terminates_and_is_reported(env: FR3ReachEnv) -> None:
    env.reset(seed=0)
    home_flange = env.flange_position()
    env.reset(seed=0, options={'goal': home_flange + np.array([0.0, 0.0, 0.005])})
    _, reward, terminated, truncated, info = env.step(np.zeros(8, np.float32))
    assert terminated and not truncated and info['is_success'] and reward > 5.0
    env.reset(seed=0, options={'goal': home_flange + np.array([0.0, 0.0, -0.1])})
    _, reward, terminated, _, info = env.step(np.zeros(8, np.float32))
    assert not terminated and not info['is_success'] and reward == pytest.approx(-0.1, abs=2e-3)


def test_same_seed_same_episode() -> None:
    rollouts = []
    for _ in range(2):
        env = FR3ReachEnv(randomization=default_randomization())
        obs, _ = env.reset(seed=11)
        trace = [obs]
        for k in range(10):
            trace.append(env.step(np.full(8, 0.3 if k % 2 else -0.3, np.float32))[0])
        rollouts.append(np.array(trace))
    np.testing.assert_array_equal(*rollouts)


def test_conditions_reach_the_model_and_delay_the_command() -> None:
    env = FR3ReachEnv()
    nominal_mass = env.physics.model.body_mass.copy()
    nominal_damping = env.physics.model.dof_damping.copy()
    conditions = Conditions(friction=0.5, mass=2.0, damping=1.5, servo_gain=0.8, delay=2)
    env.reset(seed=0, options={'conditions': conditions, 'ramp_time': 0.0})
    model, index = env.physics.model, env.physics.index
    link = index.joint_ids[3]
    assert model.body_mass[model.jnt_bodyid[link]] == pytest.approx(
        2.0 * nominal_mass[model.jnt_bodyid[link]])
    assert model.body_mass[index.object_body] == pytest.approx(0.2)
    assert model.dof_damping[index.dof_adr[0]] == pytest.approx(1.5 * nominal_damping[0])
    assert model.actuator_gainprm[index.ctrl_ids[0], 0] == pytest.approx(0.8 * SPEC.gain_p[0])
    assert model.geom_friction[index.object_geoms[0], 0] == pytest.approx(0.5)
    assert env.physics.delay_steps == 2 * env.substeps
    # The first two commands have not reached the actuators yet: the arm holds home.
    start = env.physics.state().position[:7]
    for _ in range(2):
        env.step(np.ones(8, np.float32))
        np.testing.assert_allclose(env.physics.state().position[:7], start, atol=1e-4)
    env.step(np.ones(8, np.float32))
    assert np.all(env.physics.state().position[:7] - start > 1e-3)
    env.reset(seed=0, options={'conditions': Conditions()})
    np.testing.assert_array_equal(env.physics.model.body_mass, nominal_mass)
    assert env.physics.delay_steps == 0


def test_curriculum_widens_the_randomisation() -> None:
    env = FR3ReachEnv(randomization=default_randomization(), curriculum=Curriculum(0, 50))
    rng_draws = []
    for episode in range(100):
        _, info = env.reset(seed=episode)
        rng_draws.append(info['conditions'])
    assert rng_draws[0] == Conditions()           # level 0: nominal
    late = rng_draws[60:]
    assert max(c.mass for c in late) > 1.5 and min(c.mass for c in late) < 0.7
    assert {c.delay for c in late} == {0, 1, 2, 3}
    assert max(c.obs_noise for c in late) > 0.001


def test_observation_noise_perturbs_joints_only() -> None:
    env = FR3ReachEnv(conditions=Conditions(obs_noise=0.01))
    obs, _ = env.reset(seed=0, options={'goal': [0.5, 0.0, 0.3]})
    frame = obs[33:]
    home_offset = frame[:7]                      # (q + noise) - home
    assert 0.001 < np.abs(home_offset).max() < 0.06
    np.testing.assert_array_equal(frame[22:25], np.float32([0.5, 0.0, 0.3]))   # exact


def test_sim_params_file_gives_a_calibrated_env(tmp_path: Path) -> None:
    params = tmp_path / 'fitted.yaml'
    save_sim_params(SimParams(joints={'fr3_joint2': JointParams(damping=7.5)},
                              command_delay=0.002), params)
    env = FR3ReachEnv(sim_params_file=params, conditions=Conditions(delay=1))
    env.reset(seed=0)
    assert env.physics.model.dof_damping[env.physics.index.dof_adr[1]] == pytest.approx(7.5)
    assert env.physics.delay_steps == 2 + env.substeps   # fitted 2 ms + one period


@pytest.mark.parametrize('mode', ['sync', 'async'])
def test_vector_api(mode: str) -> None:
    envs = gym.make_vec(ENV_ID, num_envs=2, vectorization_mode=mode)
    obs, info = envs.reset(seed=5)
    assert obs.shape == (2, 66) and not np.array_equal(obs[0], obs[1])  # different goals
    for _ in range(3):
        obs, reward, *_, info = envs.step(np.zeros((2, 8), np.float32))
    assert obs.shape == (2, 66) and reward.shape == (2,) and info['distance'].shape == (2,)
    envs.close()


def test_expert_reaches_low_and_high_goals() -> None:
    env = FR3ReachEnv(conditions=Conditions(delay=2, mass=2.0))
    expert = ReachExpert(env.physics.model, env.physics.index, SPEC, env.card.action.scale)
    for goal in ([0.6, -0.2, 0.08], [0.35, 0.2, 0.42], [0.32, 0.0, 0.2]):
        env.reset(seed=0, options={'goal': goal})
        for _ in range(200):
            *_, terminated, truncated, info = env.step(
                expert.act(env.policy_step.raw.joint_position, env.goal))
            if terminated or truncated:
                break
        assert info['is_success'], (goal, info['distance'])
