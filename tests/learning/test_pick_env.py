"""SimOps/FR3PickPlace-v0 and its scripted grasp expert, on the shared physics (no ROS)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import simops_learning  # noqa: F401 - registers the envs
from simops_learning.pick_env import (
    CUBE_HALF,
    ENV_ID,
    GOAL_HIGH,
    GOAL_LOW,
    MAX_YAW,
    MIN_TRAVEL,
    OBJECT_HIGH,
    OBJECT_LOW,
    SAFE_CONTACT_FORCE,
    FR3PickPlaceEnv,
)
from simops_learning.pick_expert import PickExpert
from simops_learning.pick_train import PickTrainConfig, expert_action, new_policy
from simops_sim.randomization import Conditions


def expert_for(env: FR3PickPlaceEnv) -> PickExpert:
    return PickExpert(new_policy(env, PickTrainConfig()).law)


def run_expert(env: FR3PickPlaceEnv, expert: PickExpert, seed: int, options: dict | None = None,
               gripper: float | None = None) -> tuple[dict, list[dict]]:
    """One expert episode; ``gripper`` overrides its gripper command (a disabled hand)."""
    env.reset(seed=seed, options=options)
    infos = []
    while True:
        action, _ = expert_action(expert, env)
        if gripper is not None:
            action[7] = gripper
        _, _, terminated, truncated, info = env.step(action)
        infos.append(info)
        if terminated or truncated:
            return info, infos


def test_registered_with_the_card_layout_and_checked_by_gymnasium() -> None:
    env = gymnasium.make(ENV_ID)
    assert env.observation_space.shape == (99,)      # 3 frames of 33
    assert env.action_space.shape == (8,)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_vector_env_steps_a_batch() -> None:
    envs = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode='sync')
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (2, 99)
    obs, reward, terminated, _, info = envs.step(np.zeros((2, 8), dtype=np.float32))
    assert obs.shape == (2, 99) and reward.shape == (2,) and not terminated.any()
    assert set(info) >= {'peak_contact_force', 'peak_joint_speed', 'grasped'}
    envs.close()


def test_reset_puts_cube_and_goal_in_the_workspace_reproducibly() -> None:
    env = FR3PickPlaceEnv()
    for seed in range(20):
        env.reset(seed=seed)
        x, y, yaw = env.object_start
        cube = env.object_position()
        np.testing.assert_allclose(cube, [x, y, CUBE_HALF], atol=1e-9)
        assert np.all(np.array([x, y]) >= OBJECT_LOW) and np.all(np.array([x, y]) <= OBJECT_HIGH)
        assert abs(yaw) <= MAX_YAW
        assert np.all(env.goal >= GOAL_LOW) and np.all(env.goal <= GOAL_HIGH)
        assert np.linalg.norm(cube - env.goal) >= MIN_TRAVEL
    first, _ = env.reset(seed=5)
    again, _ = env.reset(seed=5)
    np.testing.assert_array_equal(first, again)
    env.reset(seed=1, options={'object': (0.5, 0.1, 0.3), 'goal': (0.4, -0.2, 0.15)})
    np.testing.assert_allclose(env.object_position(), [0.5, 0.1, CUBE_HALF], atol=1e-9)
    np.testing.assert_allclose(env.goal, [0.4, -0.2, 0.15])


@pytest.mark.parametrize('conditions', [
    Conditions(), Conditions(friction=0.3, object_mass=2.0, delay=3),
    Conditions(friction=1.5, object_mass=0.5, delay=3, servo_gain=0.8)],
    ids=['nominal', 'slippery-heavy-delayed', 'grippy-light-delayed-weak'])
def test_the_expert_picks_and_places_within_the_safety_limits(conditions: Conditions) -> None:
    env = FR3PickPlaceEnv()
    expert = expert_for(env)
    for seed in range(4):
        info, infos = run_expert(env, expert, seed, {'conditions': conditions})
        assert info['is_success'], (seed, info['distance'], info['protective_stop'])
        assert any(i['lifted'] for i in infos)
        assert not info['unsafe'], (info['peak_joint_speed'], info['peak_contact_force'])
        assert info['distance'] < 0.02 and np.linalg.norm(
            info['object_position'] - env.goal) < 0.02


def test_a_disabled_gripper_never_lifts_the_cube() -> None:
    env = FR3PickPlaceEnv()
    expert = expert_for(env)
    for seed in range(2):
        info, infos = run_expert(env, expert, seed, gripper=1.0)
        assert not info['is_success']
        assert not any(i['lifted'] for i in infos)


def test_pressing_the_hand_on_the_table_is_measured_from_mujoco_contacts() -> None:
    """Driving the open hand down beside the cube: the contact force rises past the 20 N
    limit (``unsafe``), or the arm's collision reflex stops it first."""
    env = FR3PickPlaceEnv()
    expert = expert_for(env)
    env.reset(seed=0, options={'object': (0.6, 0.2, 0.0), 'goal': (0.6, 0.2, 0.2)})
    raw = env.policy_step.raw
    info: dict = {}
    for _ in range(120):
        q = raw.joint_position[:7].copy()
        action = expert.action(q, np.array([0.0, 0.0, -0.01]), 1.0, raw.object_quaternion)
        _, _, terminated, _, info = env.step(action)
        if terminated:
            break
    assert info['peak_contact_force'] > 5.0, info['peak_contact_force']
    assert info['unsafe'] or info['protective_stop'], info
    assert info['unsafe'] == (info['peak_contact_force'] > SAFE_CONTACT_FORCE
                              or info['peak_joint_speed'] > 1.5)
