"""The batched evaluation path gives today's per-episode outcomes for the same seeds: the
gate's tasks (envs stepped together, reused across configurations) against one fresh env
per configuration stepping alone."""

from __future__ import annotations

from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO

from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.rollout import run_episodes, run_episodes_batched
from simops_learning.validate import Task, run_task
from simops_policy.model import load_policy
from simops_sim.randomization import Conditions

CASES = {
    'reach': (FR3ReachEnv, REPO / 'models/policy/fr3_reach.pt',
              [Conditions(friction=0.3, mass=1.5, delay=3), Conditions(friction=1.5),
               Conditions(mass=0.5, delay=1)]),
    'pick_place': (FR3PickPlaceEnv, REPO / 'models/policy/fr3_pick_place.pt',
                   [Conditions(friction=0.3, object_mass=2.0, delay=3),
                    Conditions(friction=1.0, object_mass=0.5)]),
}


def same(a: tuple, b: tuple) -> bool:
    return np.array_equal(np.array(a, dtype=float), np.array(b, dtype=float), equal_nan=True)


@pytest.mark.parametrize('task', list(CASES))
def test_batched_gate_tasks_give_the_single_env_outcomes(task: str) -> None:
    kind, policy, grid = CASES[task]
    card = policy.with_suffix('.yaml')
    episodes = range(2, 9)   # 7 episodes: one env of the batch runs two
    for config, conditions in enumerate(grid):
        env = kind(card_path=card, conditions=conditions)
        model = load_policy(policy, env.card)
        alone = [astuple(r) for r in run_episodes(env, model.infer, episodes, 5)]
        index, batched = run_task(Task(config, conditions, episodes, policy, card, None, 5,
                                       'fr3', task))
        assert index == config
        assert all(same(a, b) for a, b in zip(alone, batched, strict=True)), (alone, batched)


def test_a_batch_of_one_is_the_single_env() -> None:
    kind, policy, grid = CASES['reach']
    env, other = (kind(card_path=policy.with_suffix('.yaml')) for _ in range(2))
    model = load_policy(policy, env.card)
    a = run_episodes(env, model.infer, range(3), 0, grid[0])
    b = run_episodes_batched([other], model.infer, range(3), 0, grid[0])
    assert all(same(astuple(x), astuple(y)) for x, y in zip(a, b, strict=True))
    assert Path(policy).is_file()


@pytest.mark.parametrize('env_id', ['SimOps/FR3Reach-v0', 'SimOps/FR3PickPlace-v0'])
def test_make_vec_steps_the_envs_together_as_each_alone(env_id: str) -> None:
    import gymnasium

    import simops_learning  # noqa: F401 - registers the ids

    vector = gymnasium.make_vec(env_id, num_envs=3, vectorization_mode='vector_entry_point',
                                max_episode_steps=25)
    kind = FR3PickPlaceEnv if 'Pick' in env_id else FR3ReachEnv
    alone = [kind(max_episode_steps=25) for _ in range(3)]
    ended = 0
    obs, _ = vector.reset(seed=11)
    expected = np.stack([env.reset(seed=11 + i)[0] for i, env in enumerate(alone)])
    assert np.array_equal(obs, expected)
    rng = np.random.default_rng(0)
    for _ in range(80):   # long enough for episodes to end and autoreset
        actions = rng.uniform(-0.3, 0.3, vector.action_space.shape).astype(np.float32)
        obs, reward, terminated, truncated, infos = vector.step(actions)
        for i, env in enumerate(alone):
            o, r, term, trunc, _ = env.step(actions[i])
            if term or trunc:
                assert np.array_equal(infos['final_obs'][i], o)
                o, _ = env.reset()
                ended += 1
            assert np.array_equal(obs[i], o) and reward[i] == r
            assert (terminated[i], truncated[i]) == (term, trunc)
    assert ended >= 6   # every sub-env ended and was reset at least twice
    vector.close()
