"""PPO's penalty terms for the gate's failure modes: parsed, paid once per episode, in the env.

The weights and events are checked against the module docstring's rules, written out here.
"""

from __future__ import annotations

import numpy as np
import pytest

from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_ppo import DecisionEnv
from simops_learning.pick_train import PickTrainConfig, new_policy
from simops_learning.reach_env import MAX_EPISODE_STEPS
from simops_learning.reward_terms import (
    TERMS,
    Penalties,
    RewardTermsError,
    failing_terms,
    format_reward_terms,
    parse_reward_terms,
)
from simops_sim.randomization import default_randomization


def info(stop: str = '', unsafe: bool = False, dropped: bool = False) -> dict[str, object]:
    return {'protective_stop': stop, 'unsafe': unsafe, 'dropped': dropped}


def test_terms_parse_and_print_as_the_command_line_gives_them() -> None:
    terms = parse_reward_terms(['dropped=5', 'protective_stop=10', 'timeout=0.5'])
    assert terms == {'dropped': 5.0, 'protective_stop': 10.0, 'timeout': 0.5}
    assert format_reward_terms(terms) == ['protective_stop=10', 'dropped=5', 'timeout=0.5']
    for bad, message in ((['fault=1'], "reward term 'fault' is not one of"),
                         (['dropped'], "reward term 'dropped' is not NAME=WEIGHT"),
                         (['dropped=x'], "reward term 'dropped=x' is not NAME=WEIGHT"),
                         (['unsafe=-1'], 'reward term unsafe weighs -1; a weight is >= 0'),
                         (['unsafe=nan'], 'reward term unsafe weighs nan')):
        with pytest.raises(RewardTermsError, match=message):
            parse_reward_terms(bad)


def test_each_event_is_paid_once_an_episode_and_a_timeout_over_the_whole_episode() -> None:
    penalties = Penalties({'protective_stop': 7.0, 'unsafe': 3.0, 'dropped': 2.0}, 200)
    assert penalties(info()) == 0.0
    assert penalties(info(dropped=True)) == 2.0
    assert penalties(info(dropped=False)) == 0.0
    assert penalties(info(dropped=True)) == 0.0          # dropped again: paid already
    assert penalties(info(unsafe=True, stop='joint 4 torque')) == 10.0
    assert penalties(info(unsafe=True, stop='joint 4 torque')) == 0.0
    penalties.reset()
    assert penalties(info(dropped=True)) == 2.0
    timeout = Penalties({'timeout': 4.0}, 150)
    assert sum(timeout(info()) for _ in range(150)) == pytest.approx(4.0)
    with pytest.raises(RewardTermsError):
        Penalties({'fault': 1.0}, 200)


def test_failing_modes_join_the_terms_at_a_successs_weight() -> None:
    failures = {mode: 1 for mode in ('protective_stop', 'unsafe', 'dropped', 'timeout',
                                     'fault')}
    assert failing_terms(failures, {}) == dict.fromkeys(TERMS, 10.0)
    assert failing_terms({'dropped': 0, 'timeout': 2}, {'unsafe': 1.5}) == {
        'unsafe': 1.5, 'timeout': 10.0}


def test_the_env_pays_its_terms_out_of_the_task_reward() -> None:
    """Same seed, same actions: an env with a timeout term earns its weight / 200 less each
    step, and nothing else differs; PPO's envs carry the terms they are given."""
    plain, taxed = FR3PickPlaceEnv(), FR3PickPlaceEnv(reward_terms={'timeout': 4.0})
    plain.reset(seed=5)
    taxed.reset(seed=5)
    action = np.zeros(8)
    for _ in range(5):
        *a, reward, _, _, _ = plain.step(action)
        *b, taxed_reward, _, _, _ = taxed.step(action)
        np.testing.assert_array_equal(a[0], b[0])
        assert reward - taxed_reward == pytest.approx(4.0 / MAX_EPISODE_STEPS, abs=1e-12)
    ppo = DecisionEnv(new_policy(plain, PickTrainConfig()), 1,
                      default_randomization('pick_place'), seed=0,
                      reward_terms={'dropped': 10.0})
    assert ppo.envs[0].penalties.terms == {'dropped': 10.0}
