"""Open-loop replay reproduces the simulator: same command semantics, delay rule and physics.

Data come from :class:`simops_sim.physics.Physics` (the node's wrapper) through a bag; the
fit's replay with the true parameters must match it to solver precision, and with nominal
parameters must not.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO
from sysid_helpers import HIDDEN, REPLAY_KINDS, SPEC, replayable, simulate, write_bag

from simops_core.sim_params import load_sim_params
from simops_core.topics import load_topics
from simops_sim.delay import shift_commands
from simops_sysid import controller_models, evaluation, fit_parameters, residual, sysid_model
from simops_sysid.evaluation import delay_starts, refined_delays
from simops_sysid.lag import estimate_delay
from simops_sysid.recording import Recording, load_recording, split_sequences, start_position
from simops_sysid.replay import delayed


def test_whole_step_delays_are_the_nodes_rule_and_fractions_blend() -> None:
    targets = np.random.default_rng(0).normal(size=(50, 3))
    np.testing.assert_array_equal(delayed(targets, 10, 4.0),
                                  shift_commands(targets, 4, targets[0])[10:])
    half = delayed(targets, 10, 4.5)
    np.testing.assert_allclose(half, 0.5 * (delayed(targets, 10, 4.0) + delayed(targets, 10,
                                                                                 5.0)))
    with pytest.raises(ValueError, match='history'):
        delayed(targets, 3, 3.5)
    # An optimizer step onto the zero bound can land a rounding error below it.
    np.testing.assert_array_equal(delayed(targets, 10, -1e-15), targets[10:])


TRUTH = replayable(load_sim_params(HIDDEN))   # the stand-in's truth with dry friction


@pytest.fixture(scope='module', params=['stamped', 'unstamped'])
def problem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[residual.Problem, object]:
    """Commands stamped as excite stamps them (the default), or unstamped (start on arrival)."""
    data = simulate(8.0, noise=0.0, stamped=request.param == 'stamped', params=TRUTH)
    bag = write_bag(tmp_path_factory.mktemp('replay') / 'bag', data)
    recording = load_recording(bag, SPEC, load_topics())
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = replayable(sysid_model.nominal(fit_model))   # dry friction, like TRUTH
    joints = list(range(7))
    sequences = split_sequences(recording, 0.001, 5.0, 200.0, 60, joints).sequences
    params = fit_parameters.build_parameters(base, REPLAY_KINDS, SPEC.arm_joints, [])
    return residual.make_problem(fit_model, sequences, joints, base), params, recording


def test_replay_with_the_truth_matches_the_wrapper(problem: tuple) -> None:
    prob, params, _ = problem
    truth = evaluation.evaluate(prob, params, TRUTH)
    assert truth.rms_q.max() < 5e-5, truth.rms_q       # rad
    assert truth.rms_effort.max() < 0.05, truth.rms_effort   # N*m
    nominal = evaluation.evaluate(prob, params, sysid_model.nominal(prob.fit_model))
    assert nominal.rms_q.min() > 10 * 5e-5, nominal.rms_q   # the check above can fail


def test_delay_first_guess_finds_the_hidden_delay(problem: tuple) -> None:
    _, _, recording = problem
    assert estimate_delay(recording, 0.001, fit_parameters.MAX_DELAY, SPEC.gain_p,
                          SPEC.gain_d) == pytest.approx(
        load_sim_params(HIDDEN).command_delay)


def test_bag_hash_is_stable_and_follows_the_content(tmp_path: Path) -> None:
    from simops_core.bag_reader import bag_sha256

    a = write_bag(tmp_path / 'a', simulate(6.0))
    assert bag_sha256(a) == bag_sha256(a)
    c = write_bag(tmp_path / 'c', simulate(6.0, seed=5))
    assert bag_sha256(a) != bag_sha256(c)


def test_commands_the_recorder_missed_at_the_start_are_not_replayed(tmp_path: Path) -> None:
    """A recorder discovers a new command publisher after the arm does, so a bag can begin
    with the arm already moving; the replay must start where the recorded commands define
    every target, and then match the wrapper with the true fit_parameters."""
    data = simulate(8.0, noise=0.0, params=TRUTH)
    late = 100   # the first 2 s of commands never reached the bag
    data = replace(data, arrival=data.arrival[late:], commands=data.commands[late:],
                   stamps=data.stamps[late:])
    recording = load_recording(write_bag(tmp_path / 'late', data), SPEC, load_topics())
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = replayable(sysid_model.nominal(fit_model))   # dry friction, like TRUTH
    joints = list(range(7))
    sequences = split_sequences(recording, 0.001, 5.0, 200.0, 60, joints).sequences
    assert sequences[0].t0 > recording.commands.t[1] + 0.06
    params = fit_parameters.build_parameters(base, REPLAY_KINDS, SPEC.arm_joints, [])
    truth = evaluation.evaluate(residual.make_problem(fit_model, sequences, joints, base), params,
                             TRUTH)
    assert truth.rms_q.max() < 5e-5, truth.rms_q
    assert truth.rms_effort.max() < 0.05, truth.rms_effort


def test_what_follows_a_command_a_late_arm_took_is_not_compared(tmp_path: Path) -> None:
    """A stalled arm took one command 10 ms after the recorder saw it, and published the
    states of those 10 ms in a burst after: when it took it the bag cannot say, and the
    replay, which takes it at the estimate, starts that trajectory from another state. The
    measurements around it are left out of the comparison; replayed with the truth, the rest
    matches the wrapper."""
    data = simulate(8.0, noise=0.0, params=TRUTH, taken_late={200: 0.010})
    seen = data.arrival[200]
    received = data.t.copy()
    burst = (data.t > seen - 2e-3) & (data.t <= seen + 0.010)
    received[burst] = seen + 0.010 + 1e-5 * np.arange(burst.sum())
    recording = load_recording(write_bag(tmp_path / 'late', data, received=received), SPEC,
                               load_topics())
    assert recording.untimed.size == 1 and abs(recording.untimed[0] - seen) < 3e-3
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = replayable(sysid_model.nominal(fit_model))
    joints = list(range(7))
    params = fit_parameters.build_parameters(base, REPLAY_KINDS, SPEC.arm_joints, [])

    def replayed(rec: Recording) -> evaluation.Evaluation:
        split = split_sequences(rec, 0.001, 5.0, 200.0, 60, joints)
        return split, evaluation.evaluate(residual.make_problem(
            fit_model, split.sequences, joints, base), params, TRUTH)

    split, truth = replayed(recording)
    compared_at = np.concatenate([seq.t for seq in split.sequences])
    at = recording.untimed[0]
    assert not np.any((compared_at >= at - 0.05) & (compared_at <= at + 0.52))
    assert 0.5 < split.untimed <= 0.571, split.untimed   # 50 ms before, 520 ms after
    assert truth.rms_q.max() < 5e-5, truth.rms_q
    assert truth.rms_effort.max() < 0.05, truth.rms_effort
    _, compared = replayed(replace(recording, untimed=np.zeros(0)))
    assert compared.rms_q.max() > 4 * truth.rms_q.max(), (compared.rms_q, truth.rms_q)


def test_sequences_start_from_a_smoothed_position() -> None:
    """The start position averages the sample noise down (rad, 1 kHz samples of a motion)."""
    t = 0.001 * np.arange(4000)
    smooth = np.column_stack([0.3 * np.sin(2.0 * t + k) for k in range(9)])
    noisy = smooth + np.random.default_rng(1).normal(0.0, 1e-4, smooth.shape)
    rec = Recording(Path('synthetic'), '/joint_states', t, noisy, np.zeros_like(noisy),
                    np.zeros_like(noisy), (), None, np.zeros_like(t))
    errors = np.array([start_position(rec, i) - smooth[i] for i in range(100, 3900, 7)])
    assert np.sqrt(np.mean(errors ** 2)) < 3e-5
    assert np.sqrt(np.mean((noisy[100:3900:7] - smooth[100:3900:7]) ** 2)) > 8e-5


def test_the_delay_profile_finds_a_delay_the_efforts_do_not_show(tmp_path: Path) -> None:
    """A 16 ms delay (a real Panda's, on a recording whose efforts carry no trace of the
    commands) lies at the lowest point of the delay's profile, within its 5 ms grid, where
    the effort guess gives nothing."""
    hidden = replace(TRUTH, command_delay=0.016)
    data = simulate(8.0, noise=0.0, params=hidden)
    data = replace(data, effort=np.zeros_like(data.effort))
    recording = load_recording(write_bag(tmp_path / 'bag', data), SPEC, load_topics())
    assert estimate_delay(recording, 0.001, fit_parameters.MAX_DELAY, SPEC.gain_p,
                          SPEC.gain_d) is None
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = replayable(sysid_model.nominal(fit_model))
    sequences = split_sequences(recording, 0.001, 5.0, 200.0, 60, list(range(7))).sequences
    params = fit_parameters.build_parameters(base, REPLAY_KINDS, SPEC.arm_joints, [])
    problem = residual.make_problem(fit_model, sequences, list(range(7)), base)
    delays = np.arange(0.0, 0.0501, 0.005)
    profile = evaluation.delay_profile(problem, params, base, delays)
    assert abs(delays[int(np.argmin(profile))] - 0.016) <= 0.005, profile
    assert profile[0] > 1.3 * profile.min()   # a zero start lies well up the profile


def test_the_fit_starts_from_each_valley_of_the_delay_profile() -> None:
    delays = np.arange(0.0, 0.0501, 0.005)
    one = np.abs(delays - 0.015) + 1.0
    assert delay_starts(delays, one) == [pytest.approx(0.015)]
    two = np.minimum(np.abs(delays - 0.005) * 100 + 1.0, np.abs(delays - 0.03) * 100 + 0.9)
    assert delay_starts(delays, two) == [pytest.approx(0.03), pytest.approx(0.005)]
    far = np.minimum(np.abs(delays - 0.005) * 100 + 2.0, np.abs(delays - 0.03) * 100 + 0.9)
    assert delay_starts(delays, far) == [pytest.approx(0.03)]   # 2.0 > 1.5 x 0.9
    flat = np.ones_like(delays)
    assert len(delay_starts(delays, flat)) == 3


def test_one_late_commands_transient_does_not_set_the_weights() -> None:
    """The typical errors that set the weights are the RMS of normal errors, and a
    transient in 0.2 % of the samples (a command the arm took late: tens of mrad/s for a few
    tens of ms in 35 s) leaves them, while it moves the RMS by half."""
    rng = np.random.default_rng(0)
    sigma = np.array([1e-4, 1.6e-4, 5.4e-3])   # rad, rad/s, N*m: the stand-in's levels
    error = rng.standard_normal((35_000, 3, 7)) * sigma[None, :, None]
    np.testing.assert_allclose(evaluation.typical_errors(error), sigma, rtol=0.02)
    glitch = error.copy()
    glitch[20_000:20_070, 1:, :] *= 40.0
    rms = np.sqrt(np.mean(glitch ** 2, axis=(0, 2)))
    assert rms[1] > 1.5 * sigma[1] and rms[2] > 1.5 * sigma[2]
    np.testing.assert_allclose(evaluation.typical_errors(glitch), sigma, rtol=0.02)

    def scales(err: np.ndarray) -> residual.Scales:
        each = np.sqrt(np.mean(err ** 2, axis=0))
        fit = evaluation.Evaluation(each[0], each[1], each[2], 0.0, (),
                                    evaluation.typical_errors(err))
        return evaluation.recording_scales(fit, residual.Scales(effort=0.05))

    steady, late = scales(error), scales(glitch)
    assert steady.qd == late.qd == 0.01   # the floor: 0.16 mrad/s per 0.1 mrad is below it
    assert late.effort == pytest.approx(steady.effort, rel=0.02)
    assert steady.effort == pytest.approx(0.054, rel=0.03)   # 5.4e-3 N*m per 1e-4 rad
    # a real arm's velocities and efforts, far above their noise, set their own scales
    real = error * np.array([7.0, 1000.0, 100.0])[None, :, None]   # 0.7 mrad, 0.16 rad/s
    assert scales(real).qd == pytest.approx(0.16 / 7e-4 * 1e-3, rel=0.03)   # per 1 mrad


def test_the_profile_is_refined_every_step_around_its_valleys() -> None:
    """A valley narrower than the grid (a 1 kHz stream with jitter) is found between its
    points: every 1 ms step within one spacing of each coarse valley, none twice."""
    delays = np.arange(0.0, 0.0501, 0.005)
    two = np.minimum(np.abs(delays - 0.005) * 100 + 1.0, np.abs(delays - 0.05) * 100 + 0.9)
    fine = refined_delays(delays, two, 0.001, 0.05)
    expected = [0.001, 0.002, 0.003, 0.004, 0.006, 0.007, 0.008, 0.009,
                0.046, 0.047, 0.048, 0.049]   # none beyond the 50 ms bound
    np.testing.assert_allclose(fine, expected, atol=1e-12)


def test_the_first_move_is_the_first_command_that_leaves_the_held_target() -> None:
    """excite holds where the arm is until its controller has the commands, so the commands
    before its first move (streamed or trajectories) say nothing the replay can use."""
    from simops_sim.trajectory_plan import point_goal
    from simops_sysid.replay import CommandLog

    held, moved = np.zeros(7), np.full(7, 1e-3)
    rows = np.array([held, held, held, moved, held])
    rows[:, 6] = np.nan   # a joint the stream leaves alone
    times = np.arange(5) * 0.02
    assert CommandLog('/joint_commands', times, targets=rows).first_move() == 3
    goals = tuple(point_goal(row, 0.02) for row in (held, held, moved))
    assert CommandLog('/joint_trajectory', times[:3], goals=goals).first_move() == 2
    assert CommandLog('/joint_commands', times[:2], targets=rows[:2]).first_move() == 2


def test_lm_from_zero_stops_short_of_a_16_ms_delay_the_profile_start_reaches(
        tmp_path: Path) -> None:
    """The delay is not convex: on a recording whose efforts carry no trace of the commands,
    Levenberg-Marquardt from a zero delay stops in a valley the gains make, short of the
    hidden 16 ms (at 1.3 ms); started from the profile's lowest point (fit's global start) it
    reaches 16 ms within the 10 % the fit is held to for its delay."""
    from simops_sysid import optimize

    hidden = replace(TRUTH, command_delay=0.016)
    data = simulate(8.0, noise=0.0, params=hidden)
    data = replace(data, effort=np.zeros_like(data.effort))
    recording = load_recording(write_bag(tmp_path / 'bag', data), SPEC, load_topics())
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = replayable(sysid_model.nominal(fit_model))
    sequences = split_sequences(recording, 0.001, 5.0, 200.0, 60, list(range(7))).sequences
    problem = residual.make_problem(fit_model, sequences, list(range(7)), base,
                                    residual.Scales(effort=1e3))
    delays = np.arange(0.0, 0.0501, 0.005)
    params = fit_parameters.build_parameters(base, ('kp', 'kv', 'delay'), SPEC.arm_joints, [])
    start = delay_starts(delays, evaluation.delay_profile(problem, params, base, delays))[0]
    reached = {}
    for first in (0.0, start):
        trial = params.copy()
        trial[fit_parameters.DELAY].update_from_vector(np.array([first]))
        result = optimize.fit(problem, trial, base, (8, 1))
        reached[first] = result.values.command_delay
    assert abs(reached[start] - 0.016) <= 0.1 * 0.016, reached
    assert abs(reached[0.0] - 0.016) > 0.5 * 0.016, reached


def test_the_replay_runs_the_simulators_impedance_law(tmp_path: Path) -> None:
    """Positions streamed at 1 kHz to a forward controller's ~/commands, simulated on the
    arm's own loop (its gains at 0.8 of the spec's, a 16 ms delay): fit's replay with the
    truth (its feedforward from the same controller model and acceleration rule) matches
    the simulator to solver precision, and the nominal loop does not."""
    impedance = {name: replace(TRUTH.joints[name], kp=0.8 * p, kv=0.8 * d) for name, p, d in
                 zip(SPEC.arm_joints, SPEC.impedance_p, SPEC.impedance_d, strict=True)}
    truth = replace(TRUTH, joints={**TRUTH.joints, **impedance}, command_delay=0.016,
                    controller='joint_impedance')
    data = simulate(6.0, noise=0.0, params=truth, rate=1000.0, stream=True,
                    law='joint_impedance')
    bag = write_bag(tmp_path / 'bag', data, stream='/joint_position_controller/commands')
    recording = load_recording(bag, SPEC, load_topics())
    fit_model = sysid_model.load_fit_model(REPO / 'models/fr3/scene.xml', SPEC)
    base = controller_models.nominal_gains('joint_impedance',
                                           replayable(sysid_model.nominal(fit_model)), SPEC)
    joints = list(range(7))
    sequences = split_sequences(recording, 0.001, 5.0, 200.0, 60, joints).sequences
    prob = residual.make_problem(fit_model, sequences, joints, base, feedforward=True)
    params = fit_parameters.build_parameters(base, REPLAY_KINDS, SPEC.arm_joints, [])
    replayed = evaluation.evaluate(prob, params, truth)
    assert replayed.rms_q.max() < 5e-5, replayed.rms_q   # rad
    nominal = evaluation.evaluate(prob, params, base)
    assert nominal.rms_q.min() > 10 * 5e-5, nominal.rms_q
