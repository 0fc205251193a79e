"""The validation gate: grid parsing, verdicts and exit codes, reports, failure feedback, and
the committed validation of the shipped policy."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from learning_helpers import POLICY
from policy_helpers import write_policy
from ros_helpers import REPO

from simops_core.command_line import UsageError
from simops_core.policy_card import file_sha256
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.rollout import failure_mode, run_episodes
from simops_learning.validate import grid_conditions, parse_grid
from simops_learning.validation_report import FAILURE_MODES, Report, Thresholds
from simops_policy.model import load_policy
from simops_sim.randomization import Conditions, load_randomization
from simops_sim.sim_profiles import sim_profile

VALIDATE = str(REPO / '.venv/bin/simops-validate')


def report(successes: list[float], stops: int = 0) -> Report:
    """10 episodes per configuration; the last configuration's first ``stops`` stopped."""
    grid = {'mass': [0.5, 1.0, 2.0][:len(successes)]}
    configs = grid_conditions(grid)
    results = [[(i < round(10 * s), 0.01, 50, int(stopped := k == len(successes) - 1 and i < stops),
                 0, float('nan'), float('nan'),
                 0 if i < round(10 * s) else 1 if stopped else FAILURE_MODES.index('timeout'))
                for i in range(10)] for k, s in enumerate(successes)]
    return Report.build(Path('p.pt'), '0' * 64, None, grid, configs, results, 10, 0, 1.0)


def test_parse_grid() -> None:
    grid = parse_grid(['friction=0.3,0.8,1.5', 'mass=0.5,1,2', 'delay=0,1,2,3'])
    assert grid['delay'] == [0, 1, 2, 3]
    configs = grid_conditions(grid)
    assert len(configs) == 36 and configs[1] == Conditions(friction=0.3, mass=0.5, delay=1)
    for bad in (['gravity=1'], ['mass='], ['mass=a'], ['delay=0.5'], ['mass=1', 'mass=2'],
                ['mass=-1']):
        with pytest.raises(UsageError):
            parse_grid(bad)


@pytest.mark.parametrize(('successes', 'verdict'), [
    ([0.9, 0.9, 0.8], 'pass'), ([1.0, 1.0, 0.5], 'marginal'), ([0.9, 0.7, 0.6], 'marginal'),
    ([0.8, 0.6, 0.6], 'fail')])
def test_verdicts(successes: list[float], verdict: str) -> None:
    assert report(successes).judge(Thresholds()).verdict == verdict


def test_one_protective_stop_fails_the_gate() -> None:
    """A policy that would trip the real arm fails whatever its success rate."""
    judged = report([1.0, 1.0, 1.0], stops=1).judge(Thresholds())
    assert judged.verdict == 'fail' and judged.stops == 1
    assert [c.stops for c in judged.configs] == [0, 0, 1]
    assert '1 protective stops' in judged.summary()
    assert judged.to_dict()['configs'][2]['protective_stops'] == 1
    assert judged.to_dict()['configs'][2]['failures'] == {}   # stopped, then succeeded
    assert report([0.5, 0.8]).failures == {'timeout': 7}


def test_failure_modes_take_the_first_that_applies() -> None:
    ended = {'is_success': False, 'protective_stop': '', 'unsafe': False, 'dropped': False}
    modes = [FAILURE_MODES[failure_mode(ended | change, truncated)] for change, truncated in (
        ({'is_success': True, 'unsafe': True}, False), ({'protective_stop': 'reflex'}, True),
        ({'unsafe': True, 'dropped': True}, True), ({'dropped': True}, True), ({}, True),
        ({}, False))]
    assert modes == ['', 'protective_stop', 'unsafe', 'dropped', 'timeout', 'fault']


@pytest.mark.ros_free
def test_a_policy_that_trips_the_arm_fails_the_gate_with_its_stops_counted(
        tmp_path: Path) -> None:
    """Real rollouts: a policy that keeps tilting joint 2 forward presses the hand onto the
    table until the collision reflex stops the arm, in every episode."""
    model, _ = write_policy(tmp_path, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    run = subprocess.run([VALIDATE, '--policy', str(model), '--grid', 'mass=1,2',
                          '--episodes', '2', '--workers', '2', '--out', str(tmp_path / 'r')],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 4, run.stderr
    assert '4 protective stops' in run.stdout
    result = json.loads((tmp_path / 'r' / 'validation.json').read_text())
    assert result['protective_stops'] == 4
    assert [c['protective_stops'] for c in result['configs']] == [2, 2]
    assert result['failures'] == {'protective_stop': 4}
    assert '| stops |' in (tmp_path / 'r' / 'validation.md').read_text()


def test_thresholds_are_configurable() -> None:
    assert report([0.8, 0.8, 0.8]).judge(Thresholds(0.75, 0.5, 0.6)).verdict == 'pass'


def test_suggestion_covers_the_failing_configs(tmp_path: Path) -> None:
    judged = report([1.0, 0.3, 0.2]).judge(Thresholds())
    suggestion = judged.suggestion()
    low, high = suggestion['randomization']['mass']
    assert low <= 1.0 / 1.25 and high >= 2.0 * 1.25
    assert [c['mass'] for c in suggestion['worst_configs'][:2]] == [2.0, 1.0]
    path = tmp_path / 'dr.yaml'
    path.write_text(yaml.safe_dump(suggestion))
    assert load_randomization(path).mass == (low, high)   # what simops-train reads


def test_fields_a_ranges_file_leaves_out_keep_the_tasks_ranges(tmp_path: Path) -> None:
    """``simops-train --task pick_place --randomization`` with only ``delay`` keeps the other
    pick-and-place ranges (its object's mass, the identified links), not the reach task's."""
    from dataclasses import replace

    from simops_sim.randomization import default_randomization

    path = tmp_path / 'ranges.yaml'
    path.write_text('randomization:\n  delay: 0\n')
    pick = default_randomization('pick_place')
    assert load_randomization(path, base=pick) == replace(pick, delay=0)
    assert pick.mass != default_randomization().mass   # the two tasks' differ there


@pytest.mark.ros_free
def test_failing_policy_fails_with_feedback(tmp_path: Path) -> None:
    model, _ = write_policy(tmp_path, [0.0] * 8)         # never moves: never succeeds
    run = subprocess.run([VALIDATE, '--policy', str(model), '--grid', 'mass=1,2',
                          '--episodes', '1', '--workers', '2', '--out', str(tmp_path / 'r')],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 4, run.stderr
    assert 'verdict: FAIL' in run.stdout
    # progress: configurations done, episodes per second, time left
    assert 'validating (validation sim): 2/2 configurations' in run.stderr
    assert 'episodes/s' in run.stderr and 's left' in run.stderr
    result = json.loads((tmp_path / 'r' / 'validation.json').read_text())
    assert result['verdict'] == 'fail' and result['min_success'] == 0.0
    assert result['mean_success'] == 0.0 and len(result['configs']) == 2
    assert result['failures'] == {'timeout': 2}   # it never moved, for 200 steps each
    assert result['sha256'] == file_sha256(model)
    assert (tmp_path / 'r' / 'validation_heatmap.png').stat().st_size > 1000
    assert 'dr_suggestion.yaml' in (tmp_path / 'r' / 'validation.md').read_text()
    load_randomization(tmp_path / 'r' / 'dr_suggestion.yaml')


def sensor_params(folder: Path) -> Path:
    """A SimParams naming a learned sensor model: a 20 ms average of the model torque."""
    from simops_core.robot_spec import load_robot_spec
    from simops_sysid.actuator_export import export_actuator_model
    from simops_sysid.actuator_fit import INPUTS, LinearActuator

    weights = np.zeros((7, 61))
    weights[:, :20] = 1.0 / 20
    wide = {'min': [-1e6] * 7, 'max': [1e6] * 7}
    ranges = {name: wide for name in INPUTS}
    ref = export_actuator_model(LinearActuator(20, 0.001, weights), folder / 'sensor',
                                load_robot_spec('fr3').arm_joints,
                                {'robot': 'fr3', 'training_range': ranges})
    path = folder / 'sensor.yaml'
    path.write_text(yaml.safe_dump({'version': 1, 'actuator_model': {
        'path': ref.path, 'sha256': ref.sha256}}))
    return path


@pytest.mark.ros_free
def test_the_validation_sim_reports_efforts_through_a_named_sensor_model(
        tmp_path: Path) -> None:
    sensor = sensor_params(tmp_path)
    run = subprocess.run([VALIDATE, '--policy', str(POLICY), '--grid', 'friction=1.0',
                          '--episodes', '2', '--workers', '1', '--out', str(tmp_path / 'r'),
                          '--sensor-model', str(sensor), '--sim-gap'],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / 'r' / 'validation.json').read_text())
    assert result['sensor_model']['sha256'] == file_sha256(sensor)
    assert result['sensor_model']['model_sha256'] == file_sha256(tmp_path /
                                                                 'sensor.actuator.pt')
    assert result['sim_params'] is None          # the calibration is not the sensor's file
    assert 'torque sensors: the learned model' in (tmp_path / 'r' / 'validation.md').read_text()
    env = FR3ReachEnv(card_path=POLICY.with_suffix('.yaml'), sensor_model=sensor)
    env.reset(seed=0)
    assert env.physics.law.sensors[0] is not None   # the envs run it in the actuator law
    none = tmp_path / 'none.yaml'
    none.write_text('version: 1\n')
    refused = subprocess.run([VALIDATE, '--policy', str(POLICY), '--sensor-model', str(none)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and 'names no actuator_model' in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.ros_free
def test_the_gate_reads_through_the_validation_profiles_sensors_when_asked(
        tmp_path: Path) -> None:
    """``--sensors``: the report records the sensor errors the envs read through and says so;
    a profile that names none is refused in one line."""
    run = subprocess.run([VALIDATE, '--policy', str(POLICY), '--grid', 'friction=1.0',
                          '--episodes', '2', '--workers', '1', '--out', str(tmp_path / 'r'),
                          '--sensors'], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads((tmp_path / 'r' / 'validation.json').read_text())
    assert result['sensors'] == sim_profile('validation').sensors.as_dict()
    assert '- readings: joints with' in (tmp_path / 'r' / 'validation.md').read_text()
    refused = subprocess.run([VALIDATE, '--policy', str(POLICY), '--sensors', '--sim-profile',
                              'training'], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and 'training profile names no sensors' in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize('args', [
    ['--policy', 'missing.pt'], ['--policy', str(POLICY), '--grid', 'gravity=1'],
    ['--policy', str(POLICY), '--card', str(REPO / 'models/policy/fr3_reach.pt2.yaml')],
    ['--policy', str(POLICY), '--episodes', '0']])
@pytest.mark.ros_free
def test_usage_errors_exit_2(args: list[str]) -> None:
    run = subprocess.run([VALIDATE, *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith('simops-validate: error:') and len(
        run.stderr.strip().splitlines()) == 1


def test_shipped_policy_passes_its_committed_validation() -> None:
    result = json.loads((POLICY.parent / 'validation.json').read_text())
    assert result['sha256'] == file_sha256(POLICY)
    assert result['grid'] == {'friction': [0.3, 0.8, 1.5], 'mass': [0.5, 1.0, 1.5],
                              'delay': [0.0, 1.0, 2.0, 3.0]}
    assert result['verdict'] == 'pass' and result['mean_success'] >= 0.85
    assert result['min_success'] >= 0.60
    assert result['protective_stops'] == 0     # it never trips the arm
    assert (POLICY.parent / 'validation.md').read_text().count('| ') > 36
    nominal = json.loads((POLICY.parent / 'nominal' / 'validation.json').read_text())
    assert nominal['sha256'] == file_sha256(POLICY) and nominal['mean_success'] >= 0.95
    assert nominal['protective_stops'] == 0


def test_shipped_policy_reaches_nominal_goals() -> None:
    """A fresh rollout (not the committed figure): 10 nominal episodes in the env."""
    env = FR3ReachEnv(card_path=POLICY.with_suffix('.yaml'))
    model = load_policy(POLICY, env.card)
    results = run_episodes(env, model.infer, range(10), seed=123)
    assert np.mean([r.success for r in results]) >= 0.9, results


@pytest.mark.ros_free
def test_sim_gap_reports_the_training_sim_per_cell(tmp_path: Path) -> None:
    """--sim-gap runs the same cells in the training sim; the verdict stays the validation's."""
    run = subprocess.run([VALIDATE, '--policy', str(POLICY), '--grid', 'delay=0,3',
                          '--episodes', '4', '--workers', '2', '--out', str(tmp_path),
                          '--sim-gap', '--verdict-exit-zero'],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert 'validating (training sim): 2/2 configurations' in run.stderr
    result = json.loads((tmp_path / 'validation.json').read_text())
    assert result['sim_profile']['name'] == 'validation'
    for cell in result['configs']:
        assert cell['sim_gap'] == pytest.approx(cell['training_success'] - cell['success'])
    assert result['sim_gap_max'] == max(abs(c['sim_gap']) for c in result['configs'])
    assert 'sim-to-sim gap' in (tmp_path / 'validation.md').read_text()
