"""The training and the validation simulator: one model, the options of config/sim_profiles.yaml."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from simops_core.paths import resolve_resource
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.reach_env import FR3ReachEnv
from simops_sim.model_index import load_model
from simops_sim.randomization import Conditions
from simops_sim.sim_profiles import (
    SimProfileError,
    apply_profile,
    load_sim_profiles,
    sim_profile,
    steps_per_period,
)

FILE = resolve_resource('config/sim_profiles.yaml')


def test_the_profiles_file_sets_what_the_issue_asks() -> None:
    """The fast one is coarser and shorter, the faithful one runs at 1 kHz on elliptic cones."""
    raw = yaml.safe_load(FILE.read_text())['profiles']
    training, validation = sim_profile('training'), sim_profile('validation')
    sensors = raw['validation'].pop('sensors')
    assert training.as_dict() == raw['training'] and validation.as_dict() == raw['validation']
    # the validation sim's readings: noisy joints; a late, noisy object pose that drops out
    assert training.sensors is None and validation.sensors.as_dict() == sensors
    assert sensors['joint_noise'] > 0 and sensors['object_latency'] >= 1
    assert 0 < sensors['object_dropout'] < 1
    assert validation.timestep == 0.001 and validation.cone == 'elliptic'
    assert training.cone == 'pyramidal' and training.timestep > validation.timestep
    assert training.iterations < validation.iterations


def test_apply_profile_writes_the_options() -> None:
    model = load_model('models/fr3/scene.xml')
    apply_profile(model, 'training')
    assert model.opt.timestep == 0.005 and model.opt.iterations == 10
    assert model.opt.ls_iterations == 10 and model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    apply_profile(model, 'validation')
    assert model.opt.timestep == 0.001 and model.opt.iterations == 100
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC


def test_envs_run_their_profile() -> None:
    """Same control period, different physics steps; the pick env samples its safety figures
    at 100 Hz in the validation sim and once a period (the profile's safety_sample) in the
    training sim."""
    fast, faithful = FR3ReachEnv(profile='training'), FR3ReachEnv()
    assert fast.physics.timestep == 0.005 and fast.substeps == 10
    assert faithful.physics.timestep == 0.001 and faithful.substeps == 50
    assert sim_profile('training').safety_sample == 0.05
    assert FR3PickPlaceEnv(profile='training').chunks() == (10,)
    assert FR3PickPlaceEnv().chunks() == (10,) * 5
    # the command delay is in time: 2 control periods are 20 and 100 steps
    for env in (fast, faithful):
        env.reset(seed=0)
        env._set_conditions(Conditions(delay=2))
        assert env.physics.delay_steps * env.physics.timestep == pytest.approx(0.1)


def test_the_profiles_agree_on_a_reach() -> None:
    """The same expert-free command, in both sims: the flange ends within 2 mm."""
    ends = []
    for profile in ('training', 'validation'):
        env = FR3ReachEnv(profile=profile)
        env.reset(seed=0, options={'goal': np.array([0.5, 0.1, 0.3]), 'ramp_time': 0.0})
        for _ in range(40):
            env.step(np.full(8, 0.3, np.float32))
        ends.append(env.flange_position())
    assert np.linalg.norm(ends[0] - ends[1]) < 0.002


@pytest.mark.parametrize(('text', 'field'), [
    ('version: 2\nprofiles: {}', 'version'),
    ('version: 1\nprofiles: {training: {}, validation: {cone: round}}',
     "'profiles.validation.cone'"),
    ('version: 1\nprofiles: {training: {timestep: 0}, validation: {}}',
     "'profiles.training.timestep'"),
    ('version: 1\nprofiles: {training: {iterations: 0.5}, validation: {}}',
     "'profiles.training.iterations'"),
    ('version: 1\nprofiles: {training: {substeps: 3}, validation: {}}',
     "'profiles.training.substeps'"),
    ('version: 1\nprofiles: {training: {}}', "'profiles.validation'"),
    ('version: 1\nprofiles: {training: {safety_sample: 0}, validation: {}}',
     "'profiles.training.safety_sample'"),
    ('version: 1\nprofiles: {training: {}, validation: {sensors: {blur: 1}}}',
     "'profiles.validation.sensors.blur'"),
    ('version: 1\nprofiles: {training: {}, validation: {sensors: {object_latency: 0.5}}}',
     "'profiles.validation.sensors.object_latency'"),
    ('version: 1\nprofiles: {training: {}, validation: {sensors: {object_dropout: 1.0}}}',
     "'profiles.validation.sensors.object_dropout'"),
    ('version: 1\nprofiles: {training: {}, validation: {sensors: {joint_noise: -1}}}',
     "'profiles.validation.sensors.joint_noise'"),
    ('version: 1\nprofiles: {training: {}, validation: {sensors: {joint_latency: -0.001}}}',
     "'profiles.validation.sensors.joint_latency'"),
])
def test_a_bad_profiles_file_gets_one_line(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / 'profiles.yaml'
    path.write_text(text)
    with pytest.raises(SimProfileError, match=field) as caught:
        load_sim_profiles(path)
    assert '\n' not in str(caught.value)


def test_a_timestep_that_does_not_divide_the_period_is_refused() -> None:
    assert steps_per_period(0.0025, 0.05) == 20
    with pytest.raises(SimProfileError, match='does not divide the control period'):
        steps_per_period(0.003, 0.05, 'training')
    with pytest.raises(SimProfileError, match="no sim profile 'fast'"):
        sim_profile('fast')


def test_the_gate_reads_the_object_late_noisy_and_with_dropouts_only_when_asked() -> None:
    """With ``sensors`` the pick env's observation holds the cube as the validation profile's
    perception delivers it; without, exactly as the simulator has it (what the node
    publishes); a seed gives the same readings, and the episode's other draws are kept."""
    from simops_sim.perception import Perception, SensorNoise

    plain, sensed = FR3PickPlaceEnv(), FR3PickPlaceEnv(sensors=True)
    assert plain.perception is None and sensed.sensors == sim_profile('validation').sensors
    first, _ = plain.reset(seed=3)
    again, _ = sensed.reset(seed=3)
    assert np.array_equal(plain.object_start, sensed.object_start)   # same cube, same goal
    assert np.array_equal(plain.goal, sensed.goal)
    assert not np.array_equal(first, again)
    twice, _ = FR3PickPlaceEnv(sensors=True).reset(seed=3)
    assert np.array_equal(again, twice)
    # the rule itself: one period late, the last delivered pose held through a dropout
    rng = np.random.default_rng(0)
    perception = Perception(SensorNoise(object_latency=1, object_dropout=0.3), rng)
    quaternion = np.array([1.0, 0.0, 0.0, 0.0])
    seen = [perception.object(np.full(3, float(k)), quaternion)[0][0] for k in range(2000)]
    assert seen[0] == 0.0 and seen[1] == 0.0   # the oldest there is, then one period late
    fresh = [s == k - 1 for k, s in enumerate(seen) if k > 1]
    assert abs(1.0 - np.mean(fresh) - 0.3) < 0.03   # 30 % of periods dropped
    assert np.all(np.diff(seen) >= 0)
    noisy = Perception(SensorNoise(joint_noise=1e-3, object_noise=0.002), rng)
    readings = np.array([noisy.object(np.zeros(3), quaternion)[0] for _ in range(4000)])
    assert abs(readings.std() - 0.002) < 1e-4
    position, velocity = noisy.joints(np.zeros(9), np.zeros(9))
    assert 0 < np.abs(position).max() < 5e-3 and np.abs(velocity).max() > np.abs(position).max()


def test_a_joint_latency_reads_the_state_of_that_step_before_the_period_ends() -> None:
    """The validation profile's joint latency (1 ms, one physics step): the env cuts the
    period's physics there and the node's joint reading is the state at that step, not the
    state at the period's end; without ``sensors`` it reads the end."""
    from simops_sim.perception import Perception, SensorNoise

    plain, late = FR3ReachEnv(profile='validation'), FR3ReachEnv(profile='validation', sensors=True)
    assert sim_profile('validation').sensors.joint_latency == 0.001
    assert plain.chunks() == (50,) and late.chunks() == (49, 1)
    for env in (plain, late):
        env.reset(seed=0)
    late.perception = Perception(SensorNoise(), np.random.default_rng(0))   # the reading alone
    states: dict[int, list[np.ndarray]] = {id(plain): [], id(late): []}
    for env in (plain, late):
        step = env.physics.step

        def recorded(n: int, env: FR3ReachEnv = env,
                     step: Callable[[int], None] = step) -> None:
            step(n)
            joints = np.zeros((3, len(env.spec_robot.joint_names)))
            env.physics.read_joints(joints)
            states[id(env)].append(joints[0])

        env.physics.step = recorded
    action = np.full(plain.card.action.size, 0.5)
    for _ in range(12):   # past the 0.5 s ramp: the arm moves
        plain.step(action)
        late.step(action)
    end, before_end = states[id(late)][-1], states[id(late)][-2]
    assert not np.array_equal(end, before_end)
    assert np.array_equal(late.policy_step.raw.joint_position, before_end)
    assert np.array_equal(plain.policy_step.raw.joint_position, states[id(plain)][-1])


def test_a_joint_latency_of_a_period_or_more_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    import simops_learning.reach_env as reach_env

    validation = sim_profile('validation')
    late = replace(validation, sensors=replace(validation.sensors, joint_latency=0.05))
    monkeypatch.setattr(reach_env, 'sim_profile', lambda name: late)
    with pytest.raises(ValueError, match=r'joint_latency 0.05 s is not shorter than a control '
                                         r'period \(0.05 s\)'):
        FR3ReachEnv(profile='validation', sensors=True)
