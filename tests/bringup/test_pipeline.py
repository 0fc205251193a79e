"""simops-pipeline: the pipeline file, checked in one line, and the loop run by DVC.

The run is a small real one on the stand-in: a recorded excitation fitted with ``fit``, a
tiny reach policy trained in that physics, gated against it (thresholds at zero: only a
protective stop fails it) and promoted. A rerun runs nothing; a changed bag re-runs ``fit``
and everything after it. The feedback test runs the loop on pick and place: a policy trained
without action delay fails the gate's delay cells, and the improve stage makes it pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from dataset_helpers import write_episode
from ros_helpers import REPO, installed_executable, wait_until
from sysid_helpers import simulate, write_bag

from simops_bringup.arguments import robot_names
from simops_bringup.improve import failing_cells, next_reward_terms, next_scenarios
from simops_bringup.pipeline import stages
from simops_bringup.pipeline_commands import gate_command, train_command
from simops_bringup.pipeline_file import PipelineError, load_pipeline
from simops_core.promotion import check_deployable

STAGES = ('calibrate', 'train', 'gate', 'promote')
FIXTURES = Path(__file__).resolve().parent / 'fixtures'


def pipeline_file(tmp_path: Path, **changes: object) -> Path:
    body = {'version': 1, 'robot': 'fr3', 'task': 'reach',
            'calibration': {'bags': ['bags/excite']},
            'train': {'seed': 0, 'goals': 40, 'updates': 100, 'eval_episodes': 1,
                      'workers': 1},
            'gate': {'grid': {'friction': [1.0]}, 'episodes': 2, 'workers': 1,
                     'thresholds': {'pass_mean': 0.0, 'pass_min': 0.0,
                                    'marginal_mean': 0.0}},
            'promote': True}
    body.update(changes)
    path = tmp_path / 'fr3_reach.yaml'
    path.write_text(yaml.safe_dump(body))
    return path


def pipeline(*args: object, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed_executable('simops_bringup', 'simops-pipeline')),
                           *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


@pytest.mark.parametrize(('changes', 'message'), [
    ({'version': 2}, "field 'version' must be 1"),
    ({'robot': 'ur5'}, "field 'robot' must be one of"),
    ({'task': 'stack'}, "field 'task' must be one of"),
    ({'colour': 'red'}, "field 'colour' is not a known field"),
    ({'calibration': {'bags': ['nowhere']}}, "field 'calibration.bags' names"),
    ({'calibration': {'bags': 'bags/excite'}}, "field 'calibration.bags' must be a list"),
    ({'calibration': {'bags': ['bags/excite'], 'sim_params': 'x.yaml'}},
     "field 'calibration' gives both bags and sim_params"),
    ({'calibration': {'sim_params': 'x.yaml'}}, "field 'calibration.sim_params' names"),
    ({'train': {'goals': 0}}, "field 'train.goals' must be a whole number >= 1"),
    ({'train': {'epochs': 3}}, "field 'train.epochs' is not a known field"),
    ({'train': {'in_flight': 'yes'}}, "field 'train.in_flight' must be true or false"),
    ({'train': {'in_flight': True}}, "field 'train' asks simops-train for what it refuses: "
                                     '--in-flight trains a pick_place policy'),
    ({'gate': {'grid': {'gravity': [1.0]}}}, "field 'gate.grid' grid axis 'gravity=1.0'"),
    ({'gate': {'grid': {'delay': [0.5]}}}, "field 'gate.grid' delay is in whole"),
    ({'gate': {'thresholds': {'pass_mean': 1.5}}}, "field 'gate.thresholds' are success"),
    ({'gate': {'scenarios': ['earthquake']}}, "field 'gate.scenarios' .* has no scenario"),
    ({'gate': {'scenarios': ['push_cube']}}, "field 'gate.scenarios' scenario 'push_cube' is "
                                             'not for the reach task'),
    ({'gate': {'scenarios': 'estop'}}, "field 'gate.scenarios' lists scenario names"),
    ({'gate': {'scenarios': ['estop', 'estop']}}, "field 'gate.scenarios' names a scenario"),
    ({'promote': 'yes'}, "field 'promote' must be true or false"),
    ({'sims': {'training': 'turbo'}}, "field 'sims.training' must be one of"),
    ({'sims': {'gap': 1}}, "field 'sims.gap' must be true or false"),
    ({'sims': {'sensors': 'yes'}}, "field 'sims.sensors' must be true or false"),
    ({'sims': {'validation': 'training', 'sensors': True}},
     "field 'sims.sensors' the training profile names no sensors"),
    ({'sims': {'render': True}}, "field 'sims.render' is not a known field"),
    ({'calibration': {'bags': ['bags/excite'], 'actuator_model': 'cubic'}},
     "field 'calibration.actuator_model' must be one of"),
    ({'calibration': {'actuator_model': 'linear'}},
     "field 'calibration.actuator_model' is learned from bags"),
    ({'randomization': {'delay': -1}}, "field 'randomization.delay' has a bad value"),
    ({'randomization': {'gravity': [1, 2]}}, "field 'randomization.gravity' is not a known"),
    ({'feedback': {'max_rounds': -1}}, "field 'feedback.max_rounds' must be a whole number"),
    ({'feedback': {'change': ['gravity']}}, "field 'feedback.change' lists what the loop"),
    ({'feedback': {'change': ['reward']}},
     "field 'feedback.change' lists reward, and simops-train refuses the improve stage's "
     'training with it: --reward-terms shape the reward PPO fine-tunes on; add --task '
     'pick_place and --ppo-iterations N, without --dataset'),
    ({'feedback': {'rounds': 3}}, "field 'feedback.rounds' is not a known field"),
    ({'calibration': {'bags': ['bags/excite'], 'fit': {'weights': 'heavy'}}},
     "field 'calibration.fit.weights' must be one of"),
    ({'calibration': {'bags': ['bags/excite'], 'fit': {'full_iters': 0}}},
     "field 'calibration.fit.full_iters' must be a whole number >= 1"),
    ({'calibration': {'bags': ['bags/excite'], 'fit': {'threads': 2}}},
     "field 'calibration.fit.threads' is not a known field"),
    ({'calibration': {'fit': {'weights': 'fixed'}}}, "field 'calibration.fit' sets fit's"),
    ({'policy': 'policy.onnx'}, "field 'policy' must be a TorchScript policy file"),
    ({'policy': 'nowhere.pt'}, "field 'policy' names"),
    ({'policy': 'bags/excite/cardless.pt'}, "field 'policy' names .* whose card"),
    ({'policy': str(REPO / 'models/policy/panda_reach.pt')},
     "field 'policy' names a panda policy; this pipeline is fr3 reach"),
    ({'policy': str(REPO / 'models/policy/fr3_pick_place.pt')},
     "field 'policy' names a fr3 pick_place policy; this pipeline is fr3 reach"),
    ({'datasets': {'paths': ['bags/excite']}},
     "field 'datasets' train the pick_place decision network"),
    ({'task': 'pick_place', 'datasets': {'paths': 'bags/excite'}},
     "field 'datasets.paths' must be a list of LeRobot dataset folders"),
    ({'task': 'pick_place', 'datasets': {'paths': ['nowhere']}}, "field 'datasets.paths' names"),
    ({'task': 'pick_place', 'datasets': {'expert_rounds': 2}},
     "field 'datasets' names no data: give paths"),
    ({'task': 'pick_place', 'datasets': {'bags': ['nowhere']}}, "field 'datasets.bags' names"),
    ({'task': 'pick_place', 'datasets': {'bags': ['bags']}},
     "field 'datasets.bags' names .* which neither is a rosbag2 recording nor holds one"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'share': 1.5}},
     "field 'datasets.share' must be a fraction between 0 and 1"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'expert_rounds': 0,
                                         'share': 0.2}},
     "field 'datasets.share' splits the batches with the expert rounds"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'expert_rounds': -1}},
     "field 'datasets.expert_rounds' must be a whole number >= 0"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'twist_at_cap': 'loose'}},
     "field 'datasets.twist_at_cap' must be one of"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'weights': [1.0]}},
     "field 'datasets.weights' is not a known field"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite'], 'init_policy': str(
        REPO / 'models/policy/fr3_reach.pt')}},
     "field 'datasets.init_policy' names a fr3 reach policy; this pipeline is fr3 pick_place"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite']},
      'policy': str(REPO / 'models/policy/fr3_pick_place.pt')},
     "field 'datasets' train a policy, and the file gives a trained one to gate"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite']}, 'train': {'rounds': 3}},
     "field 'train' asks simops-train for what it refuses: --rounds counts DAgger's rounds"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite']},
      'train': {'ppo_iterations': 2}, 'feedback': {'change': ['reward']}},
     "field 'train' asks simops-train for what it refuses: --ppo-iterations fine-tunes"),
    ({'task': 'pick_place', 'datasets': {'paths': ['bags/excite']},
      'feedback': {'change': ['randomization', 'scenarios']}},
     "field 'feedback.change' lists scenarios, and simops-train refuses the improve stage's "
     'training with it: --scenarios plays events'),
])
def test_each_malformed_pipeline_file_gets_one_line(tmp_path: Path, changes: dict,
                                                    message: str) -> None:
    (tmp_path / 'bags/excite').mkdir(parents=True)
    (tmp_path / 'bags/excite/cardless.pt').write_bytes(b'')
    path = pipeline_file(tmp_path, **changes)
    with pytest.raises(PipelineError, match=message):
        load_pipeline(path, robot_names())
    result = pipeline('status', path, '--dir', tmp_path / 'run')
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and message.split("'")[1] in (
        result.stderr), result.stderr


def test_the_shipped_pipeline_files_are_valid() -> None:
    for path in sorted((REPO / 'pipelines').glob('*.yaml')):
        loaded = load_pipeline(path, robot_names())
        assert path.stem == f'{loaded.robot}_{loaded.task}'


def test_a_learned_sensor_model_is_fitted_with_the_calibration_and_named_by_the_gate(
        tmp_path: Path) -> None:
    """calibration.actuator_model: the calibrate stage also runs fit's torque mode; the gate's
    validation sim reports efforts through its model (its files are the gate's inputs)."""
    (tmp_path / 'bags/excite').mkdir(parents=True)
    loaded = load_pipeline(pipeline_file(tmp_path, calibration={
        'bags': ['bags/excite'], 'actuator_model': 'mlp'}), robot_names())
    dvc = stages(loaded)['stages']
    first, second = dvc['calibrate']['cmd']
    assert '--out calibration.yaml' in first and '--actuator-model' not in first
    assert '--mode torque --actuator-model mlp --out sensor.yaml' in second
    assert {'sensor.yaml', 'sensor.actuator.pt', 'sensor.actuator.yaml'} <= set(
        dvc['calibrate']['outs'])
    assert '--sensor-model sensor.yaml' in dvc['gate']['cmd']
    assert 'sensor.actuator.pt' in dvc['gate']['deps']
    assert '--sensor-model' not in stages(load_pipeline(pipeline_file(tmp_path),
                                                        robot_names()))['stages']['gate']['cmd']


def test_gate_scenarios_become_cells_of_every_gate_and_its_inputs(tmp_path: Path) -> None:
    """gate.scenarios: the gate (and the improve stage's gates: one command line) plays them;
    the scenarios file is the gate's input, so an edited scenario gates again."""
    loaded = load_pipeline(pipeline_file(tmp_path, calibration={}, gate={
        'grid': {'delay': [0, 1]}, 'scenarios': ['push_arm', 'estop']},
        feedback={'max_rounds': 1}), robot_names())
    dvc = stages(loaded)['stages']
    for stage in ('gate', 'improve'):
        assert str(REPO / 'config/scenarios.yaml') in dvc[stage]['deps'], dvc[stage]
    assert '--scenarios push_arm estop' in dvc['gate']['cmd']
    assert '--scenarios' not in stages(load_pipeline(pipeline_file(tmp_path, calibration={}),
                                                     robot_names()))['stages']['gate']['cmd']


def test_sims_sensors_makes_every_gate_read_through_the_profiles_sensors(
        tmp_path: Path) -> None:
    """The gate and the improve stage's gates run one command line (pipeline_commands)."""
    sensed = load_pipeline(pipeline_file(tmp_path, calibration={}, sims={'sensors': True},
                                         feedback={'max_rounds': 2}), robot_names())
    assert ' --sensors' in stages(sensed)['stages']['gate']['cmd']
    assert gate_command(sensed, 'p.pt', 'g') == stages(sensed)['stages']['gate']['cmd'].replace(
        'policy/fr3_reach.pt', 'p.pt').replace('--out gate ', '--out g ')
    plain = load_pipeline(pipeline_file(tmp_path, calibration={}), robot_names())
    assert '--sensors' not in stages(plain)['stages']['gate']['cmd']


def test_a_rerun_does_nothing_and_a_new_bag_reruns_fit_and_everything_after(
        tmp_path: Path) -> None:
    write_bag(tmp_path / 'bags/excite', simulate(8.0, seed=1))
    path, run = pipeline_file(tmp_path), tmp_path / 'run'

    first = pipeline('run', path, '--dir', run)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert all(f"Running stage '{stage}'" in first.stdout for stage in STAGES), first.stdout
    policy = run / 'policy/fr3_reach.pt'
    record = check_deployable(policy, policy.with_suffix('.yaml'), run / 'calibration.yaml')
    assert record.sha('pipeline') is not None

    again = pipeline('run', path, '--dir', run)
    assert again.returncode == 0, again.stderr
    assert 'Running stage' not in again.stdout, again.stdout
    status = pipeline('status', path, '--dir', run)
    assert status.returncode == 0 and 'up to date' in status.stdout, status.stdout

    shutil.rmtree(tmp_path / 'bags/excite')
    write_bag(tmp_path / 'bags/excite', simulate(8.0, seed=2))   # a new recording
    stale = pipeline('status', path, '--dir', run)
    assert stale.returncode == 1 and 'calibrate' in stale.stdout, stale.stdout
    third = pipeline('run', path, '--dir', run)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert all(f"Running stage '{stage}'" in third.stdout for stage in STAGES), third.stdout
    check_deployable(policy, policy.with_suffix('.yaml'), run / 'calibration.yaml')


def test_datasets_feed_every_training_of_the_loop_as_its_inputs(tmp_path: Path) -> None:
    """datasets: the train stage and the improve stage's retraining (one command line) clone
    them next to the expert rounds, sharing ``share`` of the batches; they are both stages'
    inputs, so a changed dataset trains again."""
    for name in ('a', 'b'):
        (tmp_path / 'demos' / name).mkdir(parents=True)
    shipped = REPO / 'models/policy/fr3_pick_place.pt'
    loaded = load_pipeline(pipeline_file(tmp_path, task='pick_place', calibration={},
                                         datasets={'paths': ['demos/a', 'demos/b'],
                                                   'share': 0.2, 'init_policy': str(shipped)},
                                         feedback={'max_rounds': 1}), robot_names())
    demos = [str(tmp_path / 'demos' / name) for name in ('a', 'b')]
    dvc = stages(loaded)['stages']
    options = (f'--dataset {demos[0]} --dataset {demos[1]} --weight 0.1 --weight 0.1 '
               '--expert-rounds 3 --expert-weight 0.8 --twist-at-cap exact')
    assert f'--init-policy {shipped} {options}' in dvc['train']['cmd'], dvc['train']['cmd']
    assert {*demos, str(shipped), str(shipped.with_suffix('.yaml'))} <= set(
        dvc['train']['deps'])
    assert set(demos) <= set(dvc['improve']['deps'])
    assert all('datasets' in stage['params'][0]['pipeline.yaml']
               for stage in (dvc['train'], dvc['improve']))
    retrain = train_command(loaded, 'improve/round1/policy', 'ranges.yaml', 'last.pt')
    assert f'--init-policy last.pt {options}' in retrain, retrain
    alone = load_pipeline(pipeline_file(tmp_path, task='pick_place', calibration={},
                                        datasets={'paths': ['demos/a'], 'expert_rounds': 0,
                                                  'twist_at_cap': 'at-least'}), robot_names())
    cloned = train_command(alone, 'p')   # the datasets alone: equal shares, no expert
    assert f' --dataset {demos[0]} --twist-at-cap at-least ' in cloned, cloned
    assert '--weight' not in cloned and '--expert' not in cloned and '--init' not in cloned
    plain = load_pipeline(pipeline_file(tmp_path, calibration={}), robot_names())
    assert '--dataset' not in stages(plain)['stages']['train']['cmd']


def test_train_in_flight_trains_an_in_flight_policy_that_the_improve_stage_fine_tunes(
        tmp_path: Path) -> None:
    """train.in_flight: the train stage asks simops-train for --in-flight; the improve
    stage's retraining fine-tunes the last policy, which keeps its kind (no flag)."""
    loaded = load_pipeline(pipeline_file(tmp_path, task='pick_place', calibration={},
                                         train={'rounds': 2, 'in_flight': True},
                                         feedback={'max_rounds': 1}), robot_names())
    assert loaded.in_flight and loaded.train == {'rounds': 2}
    assert stages(loaded)['stages']['train']['cmd'].endswith('--rounds 2 --in-flight')
    retrain = train_command(loaded, 'improve/round1/policy', 'ranges.yaml', 'last.pt')
    assert '--init-policy last.pt' in retrain and '--in-flight' not in retrain, retrain


def test_recorded_episodes_are_exported_and_a_new_one_retrains_and_gates_again(
        tmp_path: Path) -> None:
    """Real data fed back: a folder of recorded episodes (rosbag2) is exported to a LeRobot
    dataset in the policy card's schema and co-trained on; a rerun runs nothing; a new
    recording in the folder re-runs the export, training and everything after it."""
    def record(name: str, teleop: bool) -> None:
        write_episode(tmp_path / 'demos' / name, teleop=teleop)

    record('episode_1', teleop=True)
    path = pipeline_file(tmp_path, task='pick_place', calibration={},
                         train={'seed': 0, 'episodes': 1, 'updates': 20, 'eval_episodes': 1,
                                'workers': 1},
                         datasets={'bags': ['demos'], 'expert_rounds': 1, 'share': 0.25})
    run = tmp_path / 'run'
    first = pipeline('run', path, '--dir', run)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    stages_run = ('export', *STAGES[1:])
    assert all(f"Running stage '{stage}'" in first.stdout for stage in stages_run)
    card = yaml.safe_load((run / 'policy/fr3_pick_place.yaml').read_text())['training']
    (dataset,) = card['datasets']
    assert dataset['path'] == 'episodes' and dataset['episodes'] == 1
    assert card['expert_rounds']['rounds'] == 1
    assert 'Running stage' not in pipeline('run', path, '--dir', run).stdout

    record('episode_2', teleop=False)   # a policy run on the arm, recorded since
    stale = pipeline('status', path, '--dir', run)
    assert stale.returncode == 1 and 'export' in stale.stdout, stale.stdout
    again = pipeline('run', path, '--dir', run)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert all(f"Running stage '{stage}'" in again.stdout for stage in stages_run)
    card = yaml.safe_load((run / 'policy/fr3_pick_place.yaml').read_text())['training']
    assert card['datasets'][0]['episodes'] == 2
    policy = run / 'policy/fr3_pick_place.pt'
    check_deployable(policy, policy.with_suffix('.yaml'), None)


def test_a_given_policy_is_gated_against_the_fit_and_promoted_as_a_copy(
        tmp_path: Path) -> None:
    """``policy:``: the train stage takes a copy of a trained policy (the shipped one stays
    as it is), which the gate and the promotion bind to the calibration."""
    write_bag(tmp_path / 'bags/excite', simulate(8.0, seed=1))
    shipped = REPO / 'models/policy/fr3_reach.pt'
    records = shipped.with_suffix('.promotion.jsonl').read_bytes()
    path, run = pipeline_file(tmp_path, policy=str(shipped)), tmp_path / 'run'
    first = pipeline('run', path, '--dir', run)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert all(f"Running stage '{stage}'" in first.stdout for stage in STAGES), first.stdout
    policy = run / 'policy/fr3_reach.pt'
    assert policy.read_bytes() == shipped.read_bytes()
    check_deployable(policy, policy.with_suffix('.yaml'), run / 'calibration.yaml')
    assert shipped.with_suffix('.promotion.jsonl').read_bytes() == records
    again = pipeline('run', path, '--dir', run)
    assert again.returncode == 0 and 'Running stage' not in again.stdout, again.stdout


@pytest.mark.ros_free
def test_ctrl_c_stops_the_running_stage_in_one_line(tmp_path: Path) -> None:
    """SIGINT to the terminal's process group while training: every process ends, exit 130,
    no traceback from the stage's tool or its workers."""
    path = pipeline_file(tmp_path, calibration={}, train={'goals': 400, 'updates': 100,
                                                           'eval_episodes': 1, 'workers': 2})
    log = tmp_path / 'run.log'
    with log.open('w') as out:
        proc = subprocess.Popen([str(installed_executable('simops_bringup', 'simops-pipeline')),
                                 'run', str(path), '--dir', str(tmp_path / 'run')], stdout=out,
                                stderr=subprocess.STDOUT, cwd=REPO, process_group=0)
    try:
        assert wait_until(lambda: "Running stage 'train'" in log.read_text(), 60), (
            log.read_text())
        time.sleep(3.0)   # its workers are starting or labelling
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert 'Traceback' not in text, text
    assert text.rstrip().endswith('simops-pipeline: interrupted; the running stage was stopped')


def test_the_improve_stage_widens_the_ranges_to_the_failing_cells_and_stops_when_they_cover_them(
        tmp_path: Path) -> None:
    """A reach policy trained without action delay fails a gate no policy this small passes;
    round 1 retrains with the delay widened to the failing cells' (the gate's suggestion)
    and gates again; round 2 stops, as the ranges then cover every failing cell. Every
    round's analysis, ranges, policy and report are kept; nothing is promoted."""
    path = pipeline_file(tmp_path, calibration={}, randomization={'delay': 0},
                         gate={'grid': {'delay': [0, 2]}, 'episodes': 4, 'workers': 2,
                               'thresholds': {'pass_mean': 1.0, 'pass_min': 1.0,
                                              'marginal_mean': 1.0}},
                         feedback={'max_rounds': 3})
    run = tmp_path / 'run'
    result = pipeline('run', path, '--dir', run)
    assert result.returncode == 4, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Running stage 'improve'" in result.stdout
    assert 'round 1 of 3: 2 failing cells; training ranges delay 0 -> 2' in result.stdout
    round_1 = run / 'improve/round_1'
    assert yaml.safe_load((round_1 / 'randomization.yaml').read_text())[
        'randomization']['delay'] == 2
    assert '| delay=2 |' in (round_1 / 'analysis.md').read_text()
    card = yaml.safe_load((round_1 / 'policy/fr3_reach.yaml').read_text())
    assert card['training']['randomization']['delay'] == 2
    summary = yaml.safe_load((run / 'improve/summary.json').read_text())
    assert [r['round'] for r in summary['rounds']] == [1]
    assert summary['stopped'].startswith('round 2: the training ranges already cover')
    assert ((run / 'release/validation.json').read_text()
            == (round_1 / 'gate/validation.json').read_text())
    assert (run / 'release/fr3_reach.pt').read_bytes() == (
        round_1 / 'policy/fr3_reach.pt').read_bytes()
    assert not (run / 'release/fr3_reach.promotion.jsonl').exists()


@pytest.mark.slow
@pytest.mark.ros_free
@pytest.mark.timeout(2400)   # a fine-tune at the task's budget: 8 min alone on 2 cores
def test_a_pick_policy_trained_without_delay_fails_the_delay_cells_and_the_loop_passes_it(
        tmp_path: Path) -> None:
    """The feedback test. A pipeline seeded with randomisation that leaves out the action
    delay (``delay: 0``), from a pick policy trained that way (``fixtures/pick_without_delay``,
    in flight), gated at 0 and 6 control periods with the shipped pick pipeline's
    thresholds: the gate FAILs the delay-6 cell; the improve stage widens the delay to 6,
    fine-tunes at the task's budget and gates again; it PASSes within 3 rounds and is
    promoted, with no person in between (about 8 minutes on 2 cores)."""
    path = pipeline_file(
        tmp_path, task='pick_place', calibration={},
        policy=str(FIXTURES / 'pick_without_delay/fr3_pick_place.pt'),
        train={'seed': 0, 'rounds': 10, 'episodes': 80, 'updates': 5000, 'eval_episodes': 20,
               'workers': 2},
        randomization={'delay': 0},
        gate={'grid': {'delay': [0, 6]}, 'episodes': 20, 'seed': 0, 'workers': 2,
              'thresholds': load_pipeline(REPO / 'pipelines/fr3_pick_place.yaml',
                                          robot_names()).thresholds},
        feedback={'max_rounds': 3})
    run = tmp_path / 'run'
    result = pipeline('run', path, '--dir', run, timeout=2100)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    first = json.loads((run / 'gate/validation.json').read_text())
    assert first['verdict'] == 'fail', first
    assert {c['delay'] for c in failing_cells(first)} == {6}, failing_cells(first)
    summary = json.loads((run / 'improve/summary.json').read_text())
    assert summary['verdict'] == 'pass' and 1 <= len(summary['rounds']) <= 3, summary
    assert summary['rounds'][0]['changed'] == {'delay': [0, 6]}, summary
    last = summary['rounds'][-1]['round']
    assert ((run / 'release/validation.json').read_text()
            == (run / f'improve/round_{last}/gate/validation.json').read_text())
    policy = run / 'release/fr3_pick_place.pt'
    check_deployable(policy, policy.with_suffix('.yaml'), None)


def test_failing_scenarios_become_training_scenarios_when_the_loop_may_change_them(
        tmp_path: Path) -> None:
    """feedback.change ``scenarios`` (pick and place): a round trains through the gate's
    failing scenarios, each once, with the ones of earlier rounds; without it, never."""
    found = {'cells': [{'scenario': 'object_pose_dropout', 'success': 0.5, 'failures': {}},
                       {'delay': 2, 'success': 0.4, 'failures': {}},
                       {'scenario': 'push_cube', 'success': 0.8, 'failures': {}}]}
    assert next_scenarios(found, [], ('randomization',)) == []
    both = ('randomization', 'scenarios')
    assert next_scenarios(found, [], both) == ['object_pose_dropout', 'push_cube']
    assert next_scenarios(found, ['push_cube'], both) == ['object_pose_dropout']
    pick = load_pipeline(pipeline_file(
        tmp_path, task='pick_place', calibration={},
        train={'seed': 0, 'rounds': 1, 'episodes': 2, 'eval_episodes': 1, 'workers': 1},
        feedback={'max_rounds': 2, 'change': list(both)}), robot_names())
    assert pick.change == both
    line = train_command(pick, 'round_1/policy/p', 'round_1/randomization.yaml', 'last.pt',
                         ('object_pose_dropout',))
    assert '--init-policy last.pt --scenarios object_pose_dropout' in line
    assert '--scenarios' not in train_command(pick, 'p')
    reach = load_pipeline(pipeline_file(tmp_path, calibration={}), robot_names())
    assert reach.change == ('randomization',)


def test_failure_modes_become_reward_terms_when_the_loop_may_change_the_reward(
        tmp_path: Path) -> None:
    """feedback.change ``reward`` (pick and place with PPO): each mode the gate's episodes
    failed by becomes a penalty of PPO's reward at a success's weight, kept in later rounds
    (a fault, a bug, never); without it, none."""
    found = {'cells': [], 'failures': {'protective_stop': 3, 'dropped': 2, 'timeout': 0,
                                       'fault': 1}}
    assert next_reward_terms(found, {}, ('randomization',)) == {}
    both = ('randomization', 'reward')
    assert next_reward_terms(found, {}, both) == {'protective_stop': 10.0, 'dropped': 10.0}
    assert next_reward_terms(found, {'timeout': 4.0, 'dropped': 2.0}, both) == {
        'timeout': 4.0, 'dropped': 2.0, 'protective_stop': 10.0}
    pick = load_pipeline(pipeline_file(
        tmp_path, task='pick_place', calibration={},
        train={'seed': 0, 'rounds': 1, 'episodes': 2, 'eval_episodes': 1, 'workers': 1,
               'ppo_iterations': 2},
        feedback={'max_rounds': 2, 'change': list(both)}), robot_names())
    assert pick.change == both
    line = train_command(pick, 'round_1/policy/p', 'round_1/randomization.yaml', 'last.pt',
                         (), {'dropped': 10.0, 'protective_stop': 2.5})
    assert ' --reward-terms protective_stop=2.5 dropped=10 ' in f'{line} ', line
    assert '--reward-terms' not in train_command(pick, 'p')
