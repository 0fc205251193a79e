"""`fit --mode torque --actuator-model linear`: what the torque sensors read beyond the
rigid body and friction, learned from bags and scored on held-out raw efforts.

The stand-in's torque sensor here reads through a first-order filter (a 10 ms time
constant, causal), which no SimParams field expresses: the parametric fit is left with a
clear residual that the learned model removes on held-out data. A second stand-in's joints
also receive the actuators' torque through a first-order lag (``Physics.set_torque_lag``),
so the torque the sensor reads leads what the motion's dynamics imply.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from ros_helpers import REPO, installed_executable
from scipy.signal import lfilter
from sysid_helpers import SPEC, StandinData, simulate, write_bag

from simops_core.sim_params import SimParamsError, load_sim_params
from simops_sysid.actuator_export import export_actuator_model
from simops_sysid.actuator_fit import (
    INPUTS,
    ActuatorFitError,
    ActuatorPart,
    beyond_range,
    check_held_out,
    choose_and_fit,
    input_history,
    input_range,
    total_rms,
)
from simops_sysid.actuator_mlp import fit_mlp

NOISE = 0.05          # N*m of torque-sensor noise, as config/standin_robot.yaml
SENSOR_LAG = 0.010    # s, the time constant of the hidden sensor filter
TORQUE_LAG = 0.010    # s, the second stand-in's hidden torque lag
SLOW_SENSOR = 0.020   # s, and its sensor filter
PERIOD = 0.001        # s, the synthetic parts' rate


def sensor(effort: np.ndarray, period: float, rng: np.random.Generator,
           lag: float = SENSOR_LAG) -> np.ndarray:
    """``effort`` (N, J) as a sensor with a first-order lag of ``lag`` s reads it, plus
    NOISE; causal, started at the first value."""
    alpha = period / lag
    lagged, _ = lfilter([alpha], [1.0, alpha - 1.0], effort, axis=0,
                        zi=(1.0 - alpha) * effort[:1])
    return lagged + rng.normal(0.0, NOISE, effort.shape)


def synthetic(seconds: float, seed: int) -> ActuatorPart:
    """Model torques (sums of sines, N*m) at PERIOD, and what the lagging sensor reads."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds / PERIOD))[:, None] * PERIOD
    f, a, phase = (rng.uniform(lo, hi, (4, 7)) for lo, hi in ((0.1, 1.5), (1.0, 5.0),
                                                               (0.0, 2 * np.pi)))
    torque = sum(a[k] * np.sin(2 * np.pi * f[k] * t + phase[k]) for k in range(4))
    velocity = np.gradient(torque, PERIOD, axis=0) / 10.0
    return ActuatorPart(torque, velocity, np.gradient(velocity, PERIOD, axis=0),
                        sensor(torque, PERIOD, rng))


def test_a_sensor_lag_is_learned_down_to_the_noise_on_held_out_data() -> None:
    train, held = synthetic(20.0, seed=1), synthetic(10.0, seed=2)
    model, scores = choose_and_fit([train], PERIOD)
    assert set(scores) == {0.01, 0.02, 0.03, 0.04}
    assert total_rms([held]) > 3 * NOISE               # what the parametric model leaves
    assert total_rms([held], model) < 1.1 * NOISE      # the learned one: the noise
    check_held_out([held], model)                      # not refused


def test_the_model_is_causal() -> None:
    """A prediction at t depends on nothing after t."""
    part = synthetic(4.0, seed=3)
    model, _ = choose_and_fit([part], PERIOD)
    changed = replace(part, model_torque=part.model_torque.copy())
    changed.model_torque[2000:] += 10.0
    np.testing.assert_array_equal(model.predict(part)[:2000], model.predict(changed)[:2000])
    assert not np.allclose(model.predict(part)[2000:], model.predict(changed)[2000:])


def test_a_model_worse_than_the_parametric_one_held_out_is_refused() -> None:
    """Trained where the sensor lags, held out where it does not: refused, in one line."""
    train = synthetic(10.0, seed=4)
    honest = synthetic(5.0, seed=5)
    held = replace(honest, measured=honest.model_torque)   # a sensor without the lag
    model, _ = choose_and_fit([train], PERIOD)
    with pytest.raises(ActuatorFitError, match='does worse on held-out data'):
        check_held_out([held], model)


def test_held_out_samples_beyond_the_training_range_are_counted_per_input() -> None:
    train = synthetic(4.0, seed=13)
    seen = input_range([train])
    held = replace(train, velocity=train.velocity.copy())
    held.velocity[:100, 3] = np.array(seen['velocity']['max'])[3] + 1.0   # 100 samples beyond
    assert beyond_range([train], seen) == {'model_torque': 0.0, 'velocity': 0.0,
                                           'acceleration': 0.0}
    shares = beyond_range([held], seen)
    assert shares['velocity'] == pytest.approx(100 / len(held.velocity))
    assert shares['model_torque'] == shares['acceleration'] == 0.0


def test_an_optional_input_is_learned_when_the_sensor_reads_it() -> None:
    """A sensor that also reads the position: the model over the position learns it, the
    shipped inputs cannot; a missing input is named, and only the shipped inputs export."""
    train, held = (synthetic(seconds, seed) for seconds, seed in ((12.0, 9), (4.0, 10)))
    def slow(part: ActuatorPart, phase: float) -> np.ndarray:   # rad, independent of torque
        t = np.arange(part.measured.shape[0])[:, None] * PERIOD
        return 0.5 * np.sin(2 * np.pi * 0.3 * t + phase + np.arange(7))

    train, held = (replace(part, position=slow(part, phase))
                   for part, phase in ((train, 0.0), (held, 1.0)))
    train, held = (replace(part, measured=part.measured + 2.0 * part.position)
                   for part in (train, held))
    shipped, _ = choose_and_fit([train], PERIOD)
    positioned, _ = choose_and_fit([train], PERIOD, (*INPUTS, 'position'))
    assert positioned.inputs == (*INPUTS, 'position')
    assert total_rms([held], positioned) < 1.1 * NOISE < total_rms([held], shipped)
    with pytest.raises(ActuatorFitError, match='input tracking error is not known'):
        choose_and_fit([train], PERIOD, (*INPUTS, 'tracking_error'))
    with pytest.raises(ActuatorFitError, match="no input 'measured'"):
        choose_and_fit([train], PERIOD, (*INPUTS, 'measured'))
    with pytest.raises(ValueError, match='cannot be exported'):
        export_actuator_model(positioned, Path('/nonexistent/model'), SPEC.arm_joints, {})


def test_too_little_data_is_refused() -> None:
    with pytest.raises(ActuatorFitError, match='too few samples'):
        choose_and_fit([synthetic(0.5, seed=6)], PERIOD)


@pytest.fixture(scope='module')
def lagging() -> StandinData:
    """40 s of the stand-in's excitation, its efforts read through the lagging sensor."""
    data = simulate(40.0, seed=7)
    period = float(np.median(np.diff(data.t)))
    return replace(data, effort=sensor(data.effort, period, np.random.default_rng(8)))


@pytest.fixture(scope='module')
def elastic() -> StandinData:
    """40 s of the stand-in whose joints receive the torque TORQUE_LAG late, its efforts
    read through a SLOW_SENSOR filter."""
    data = simulate(40.0, seed=7, torque_lag=TORQUE_LAG)
    period = float(np.median(np.diff(data.t)))
    return replace(data, effort=sensor(data.effort, period, np.random.default_rng(8),
                                       SLOW_SENSOR))


def run_fit(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed_executable('simops_sysid', 'fit')), *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)


def total(figures: dict[str, float]) -> float:
    """The per-joint RMS ``figures`` (N*m) over all arm joints together."""
    return float(np.sqrt(np.mean(np.square([figures[j] for j in SPEC.arm_joints]))))


def beyond_noise(figures: dict[str, float]) -> float:
    """N*m RMS of ``figures`` the sensor noise leaves out."""
    return float(np.sqrt(max(total(figures) ** 2 - NOISE ** 2, 0.0)))


def test_fit_learns_the_sensor_from_a_bag_and_scores_it_on_raw_efforts(
        tmp_path: Path, lagging: StandinData) -> None:
    bag = write_bag(tmp_path / 'lagging', lagging, commands=False)
    result = run_fit('--bag', bag, '--out', tmp_path / 'fit.yaml', '--mode', 'torque',
                     '--actuator-model', 'linear', '--report', tmp_path / 'report')
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'raw efforts' in result.stdout and 'learned actuator model' in result.stdout
    provenance = load_sim_params(tmp_path / 'fit.yaml').provenance
    held = provenance['torque_rms_nm']['holdout']
    # The parametric fit leaves the lag; the learned model takes most of it away (measured:
    # 0.114 -> 0.068 N*m held out, 0.103 -> 0.046 beyond the noise). What it leaves are the
    # controller's torque steps at each command, which the 50 ms filter of the motion that
    # the model torque is computed from smooths away.
    assert beyond_noise(held['fitted']) > NOISE, held
    assert beyond_noise(held['actuator_model']) < 0.5 * beyond_noise(held['fitted']), held
    assert set(provenance['torque_rms_nm']['training']) == {'rigid_body', 'nominal', 'fitted',
                                                             'actuator_model'}
    # the report: the provenance's figures per joint and in total, and the held-out plots
    report = (tmp_path / 'report' / 'torque.md').read_text()
    for part in ('holdout', 'training'):
        figures = provenance['torque_rms_nm'][part]
        for joint in SPEC.arm_joints:
            row = ' | '.join(f'{figures[key][joint]:.4f}' for key in (
                'rigid_body', 'nominal', 'fitted', 'actuator_model'))
            assert f'| {joint} | {row} |' in report, (joint, report)
        totals = ' | '.join(f'{total(figures[key]):.4f}' for key in (
            'rigid_body', 'nominal', 'fitted', 'actuator_model'))
        assert f'| all joints | {totals} |' in report
    for plot in ('torque_holdout.png', 'torque_residual.png'):
        assert (tmp_path / 'report' / plot).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert f"wrote {tmp_path / 'report' / 'torque.md'}" in result.stdout
    assert set(provenance['torque_rms_nm_filtered']['holdout']) == {'nominal', 'fitted'}
    learned = provenance['actuator_model']
    assert learned['kind'] == 'linear' and learned['window_s'] in (0.01, 0.02, 0.03, 0.04)
    # where the held-out data leaves the training range, the fit says so: printed, kept and
    # reported
    beyond = learned['holdout_beyond_training_range']
    assert set(beyond) == {'model_torque', 'velocity', 'acceleration'}
    assert all(0.0 <= share <= 1.0 for share in beyond.values())
    line = ', '.join(f'{name.replace("_", " ")} {100 * share:.1f} %'
                     for name, share in beyond.items())
    assert line in result.stdout and line in report
    # the model is an artifact beside the SimParams, named by path and sha256
    model = tmp_path / 'fit.actuator.pt'
    named = load_sim_params(tmp_path / 'fit.yaml').actuator_model
    assert named is not None and Path(named.path) == model.resolve()
    assert named.sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    card = yaml.safe_load((tmp_path / 'fit.actuator.yaml').read_text())
    assert card['sha256'] == named.sha256 and card['role'] == 'sensor'
    assert card['window_s'] == learned['window_s'] and card['joints'] == list(SPEC.arm_joints)
    assert card['bags'][0]['sha256'] == provenance['bags'][0]['sha256']
    assert card['torque_rms_nm']['holdout']['actuator_model'] == held['actuator_model']
    assert set(card['training_range']) == {'model_torque', 'velocity', 'acceleration'}
    # a changed model is refused wherever the SimParams is loaded, in one line
    model.write_bytes(model.read_bytes() + b'\0')
    with pytest.raises(SimParamsError) as refused:
        load_sim_params(tmp_path / 'fit.yaml')
    assert "'actuator_model.sha256'" in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
    model.unlink()
    with pytest.raises(SimParamsError, match=r"'actuator_model\.path'"):
        load_sim_params(tmp_path / 'fit.yaml')


def test_the_exported_model_computes_the_fitted_filter(tmp_path: Path) -> None:
    part = synthetic(20.0, seed=9)
    model, _ = choose_and_fit([part], PERIOD)
    ref = export_actuator_model(model, tmp_path / 'fit', SPEC.arm_joints, {'robot': 'fr3'})
    assert ref.path == 'fit.actuator.pt'
    script = torch.jit.load(str(tmp_path / ref.path))
    history = torch.as_tensor(input_history(part, model.window))   # (N, 3, W, 7)
    assert tuple(history.shape) == (part.measured.shape[0], 3, model.window, 7)
    with torch.inference_mode():
        out = script(history).numpy()   # one forward pass for every sample: a batch
    assert np.allclose(out, model.predict(part), rtol=0, atol=1e-9)
    card = yaml.safe_load((tmp_path / 'fit.actuator.yaml').read_text())
    assert card['sha256'] == ref.sha256 == hashlib.sha256(
        (tmp_path / ref.path).read_bytes()).hexdigest()
    assert card['window'] == model.window and card['period_s'] == pytest.approx(PERIOD)
    assert card['history_shape'] == ['batch', 3, model.window, 7]


def test_an_actuator_model_in_trajectory_mode_is_refused_in_one_line(
        tmp_path: Path, lagging: StandinData) -> None:
    bag = write_bag(tmp_path / 'commanded', lagging)
    result = run_fit('--bag', bag, '--out', tmp_path / 'fit.yaml', '--actuator-model',
                     'linear')
    assert result.returncode == 2, result.stdout + result.stderr
    assert 'Traceback' not in result.stderr
    assert result.stderr.strip().splitlines()[-1].endswith('add --mode torque'), result.stderr


def test_a_refused_learned_model_exits_5_and_writes_nothing(tmp_path: Path,
                                                            lagging: StandinData) -> None:
    """Too short a recording for the longest window: one line, exit 5 (the exit code of any
    refusal of the learned model, a worse one held out included), no file."""
    short = lagging.t < 2.5   # s: the friction fits, the learned model's check has too little
    data = replace(lagging, t=lagging.t[short], q=lagging.q[short], qd=lagging.qd[short],
                   effort=lagging.effort[short])
    result = run_fit('--bag', write_bag(tmp_path / 'short', data, commands=False),
                     '--out', tmp_path / 'fit.yaml', '--mode', 'torque',
                     '--actuator-model', 'linear')
    assert result.returncode == 5, result.stdout + result.stderr
    assert 'Traceback' not in result.stderr
    assert 'too few samples for a learned model' in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / 'fit.yaml').exists()


def stiction(seconds: float, seed: int) -> ActuatorPart:
    """Model torque and velocity as independent smooth random signals (low-passed noise),
    read by the lagging sensor plus a saturating function of velocity, 0.5 tanh(qd / 0.2)
    N*m (a stiction-like term no linear filter holds)."""
    rng = np.random.default_rng(seed)
    n = round(seconds / PERIOD)
    smooth = [1.0 - np.exp(-2 * np.pi * 2.0 * PERIOD)]   # a 2 Hz first-order low-pass

    def signal(scale: float) -> np.ndarray:
        raw = lfilter(smooth, [1.0, smooth[0] - 1.0], rng.normal(0.0, 1.0, (n, 7)), axis=0)
        return scale * raw / raw.std(axis=0)

    torque, velocity = signal(3.0), signal(0.5)
    measured = sensor(torque, PERIOD, rng) + 0.5 * np.tanh(velocity / 0.2)
    return ActuatorPart(torque, velocity, np.gradient(velocity, PERIOD, axis=0), measured)


def test_a_torque_lag_and_a_sensor_filter_are_learned_from_a_bag(
        tmp_path: Path, elastic: StandinData) -> None:
    """The hidden actuator lags the torque the joints receive, and the sensor filters what
    it reads: neither is a SimParams field, and the learned model takes most of both."""
    bag = write_bag(tmp_path / 'elastic', elastic, commands=False)
    result = run_fit('--bag', bag, '--out', tmp_path / 'fit.yaml', '--mode', 'torque',
                     '--actuator-model', 'linear')
    assert result.returncode == 0, result.stdout + result.stderr
    held = load_sim_params(tmp_path / 'fit.yaml').provenance['torque_rms_nm']['holdout']
    # measured: parametric 0.247 -> learned 0.065 N*m held out (0.242 -> 0.041 beyond the
    # noise); the same sensor without the torque lag: 0.135 -> 0.058
    assert beyond_noise(held['fitted']) > 3 * NOISE, held
    assert beyond_noise(held['actuator_model']) < 0.25 * beyond_noise(held['fitted']), held


def test_the_mlp_learns_what_the_linear_filter_cannot() -> None:
    """On held-out data the network takes most of what the filter leaves beyond the noise."""
    train, held = stiction(15.0, seed=11), stiction(5.0, seed=12)
    linear, _ = choose_and_fit([train], PERIOD)
    mlp = fit_mlp([train], linear)
    left_linear, left_mlp = total_rms([held], linear), total_rms([held], mlp)
    assert left_linear > 2 * NOISE, left_linear
    assert left_mlp - NOISE < 0.5 * (left_linear - NOISE), (left_linear, left_mlp)
    check_held_out([held], mlp)
    again = fit_mlp([train], linear)   # seeded: the same bags give the same model
    np.testing.assert_array_equal(again.predict(held), mlp.predict(held))
