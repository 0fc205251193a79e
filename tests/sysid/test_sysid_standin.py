"""Acceptance: `fit` recovers the stand-in arm's hidden physics from bags recorded over DDS.

Real processes, started with the command lines of the real_robot node graph
(``simops-launch real_robot standin:=true excite:=true record:=true``): the stand-in arm (a
sim node with config/sim_params/standin_hidden.yaml, 1e-4 rad joint-state noise and
0.05 N*m torque noise), the
recorder and excite. One module-scoped recording of 60 s of excitation (seed 0) plus a
held-out 20 s (seed 1), one fit, then the checks; the simulator node loaded with the fit
then runs the held-out excitation again and must move like the stand-in did.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pytest
from policy_helpers import call_enable
from recorder_helpers import episodes, trigger
from ros_helpers import REPO, NodeProcess, RosProbe, installed_executable, wait_until

from simops_bringup.command_lines import command_line
from simops_bringup.graph import NodeSpec, build_graph
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import load_sim_params
from simops_core.topics import load_topics
from simops_sim.model_params import sensor_bias
from simops_sim.physics import Physics
from simops_sysid.recording import load_recording, split_sequences

# 80 s of excitation recorded in real time, then fit (about 225 s): Kilted's leg only
pytestmark = pytest.mark.slow

SPEC = load_robot_spec('fr3')
HIDDEN = load_sim_params(REPO / 'config/sim_params/standin_hidden.yaml')
TRAIN_S, HELD_S = 60.0, 20.0
STARTUP = 30.0                 # s, two shared cores
FIXTURE_BUDGET = 570.0         # s, the recordings and the fit, within pyproject's 600 s


@dataclass(frozen=True)
class Fitted:
    """The recorded bags, the fit's output file, its report folder and its stdout."""

    train: Path
    held: Path
    params: Path
    report: Path
    output: str


def graph(record_dir: Path, sim_params: str = '') -> dict[str, NodeSpec]:
    """The real_robot graph's nodes by name, as simops-launch would start them."""
    values = {'standin': 'true', 'excite': 'true', 'record': 'true',
              'record_dir': str(record_dir)}
    return {node.name: node for node in build_graph('real_robot', values)}


def recorder(node: NodeSpec) -> list[str]:
    """The graph's recorder, limited to what sysid reads.

    The topics are named as they resolve on the real arm: with the default topic list the
    recorder looks for publishers of /joint_states by its unremapped name and records none
    of /franka/joint_states (reported to the recorder's owner).
    """
    return [*command_line(node), '-p',
            "topics:=['/franka/joint_states', '/fr3_arm_controller/joint_trajectory']"]


def excite(probe: RosProbe, node: NodeSpec, log: Path, duration: float, seed: int) -> None:
    """Run excite to completion: enable it, as an operator must (it exits 0 at the end)."""
    argv = [*command_line(node), '-p', f'duration:={duration}', '-p', f'seed:={seed}']
    with NodeProcess(argv, log) as proc:
        assert call_enable(probe, True, '/excite', timeout=STARTUP).success
        code = proc.wait(timeout=duration + 60.0)
        assert code == 0, proc.output
        assert 'excitation finished' in proc.output, proc.output


def record_episode(probe: RosProbe, node: NodeSpec, log: Path, duration: float,
                   seed: int) -> None:
    assert trigger(probe, '/recorder/start').success
    excite(probe, node, log, duration, seed)
    assert trigger(probe, '/recorder/stop').success


@pytest.fixture(scope='module')
def fitted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fitted]:
    began = time.monotonic()
    folder = tmp_path_factory.mktemp('sysid')
    nodes = graph(folder / 'episodes')
    probe = RosProbe('sysid_test')
    try:
        with NodeProcess(command_line(nodes['standin']), folder / 'standin.log') as standin, \
                NodeProcess(recorder(nodes['recorder']), folder / 'recorder.log') as rec:
            assert wait_until(lambda: 'recording' in rec.output, STARTUP), rec.output
            assert wait_until(lambda: 'joint_states at' in standin.output, STARTUP), \
                standin.output
            record_episode(probe, nodes['excite'], folder / 'excite_train.log', TRAIN_S, 0)
            record_episode(probe, nodes['excite'], folder / 'excite_held.log', HELD_S, 1)
    finally:
        probe.close()
    train, held = episodes(folder / 'episodes')
    out, report = folder / 'fitted.yaml', folder / 'report'
    # The fit ends within the first test's timeout (pyproject's 600 s covers this fixture),
    # so a slow fit fails this module with its progress instead of ending the session.
    budget = FIXTURE_BUDGET - (time.monotonic() - began)
    try:
        result = subprocess.run(
            [str(installed_executable('simops_sysid', 'fit')), '--bag', str(train),
             '--holdout', str(held), '--out', str(out), '--report', str(report)],
            capture_output=True, text=True, timeout=budget, cwd=REPO)
    except subprocess.TimeoutExpired as timeout:   # its output so far, as bytes
        printed = b''.join(part or b'' for part in (timeout.stdout, timeout.stderr))
        pytest.fail(f'fit ran past {budget:.0f} s, {time.monotonic() - began:.0f} s into the '
                    f'fixture:\n{printed.decode(errors="replace")}')
    assert result.returncode == 0, result.stdout + result.stderr
    yield Fitted(train, held, out, report, result.stdout)


def relative_errors(fitted: Fitted) -> dict[str, float]:
    """Relative error of the fitted controller gains and delay against the hidden truth."""
    values = load_sim_params(fitted.params)
    errors = {'command_delay': abs(values.command_delay - HIDDEN.command_delay)
              / HIDDEN.command_delay}
    for joint in SPEC.arm_joints:
        truth, got = HIDDEN.joints[joint], values.joints[joint]
        for kind in ('kp', 'kv'):
            errors[f'{joint}.{kind}'] = abs(getattr(got, kind) - getattr(truth, kind)) / abs(
                getattr(truth, kind))
    return errors


def test_recording_holds_the_excitation_on_the_real_arm_topics(fitted: Fitted) -> None:
    topics = load_topics()
    for bag, seconds in ((fitted.train, TRAIN_S), (fitted.held, HELD_S)):
        recording = load_recording(bag, SPEC, topics)
        assert recording.joint_states_topic == '/franka/joint_states'
        assert recording.commands.source == '/fr3_arm_controller/joint_trajectory'
        start, end = recording.command_span
        assert end - start > seconds - 2.5
        # The stand-in's 1e-4 rad noise is there: sample-to-sample jitter of the position
        # well above the smooth motion's second difference.
        jitter = np.std(np.diff(recording.q[:, 0], 2)) / np.sqrt(6)
        assert 5e-5 < jitter < 2e-4, jitter


# The fidelity issue's bar: 10 % for the gains and the delay, 0.1 mrad for the offsets. The
# stand-in's friction is smooth (tanh), which the fit's rollouts only approximate.
GAIN_ERROR, OFFSET_ERROR = 0.10, 1e-4


def test_gains_and_delay_within_10_percent_median_5(fitted: Fitted) -> None:
    """The controller gains p and d and the delay, despite noise, bias and delay."""
    errors = relative_errors(fitted)
    worst = max(errors, key=errors.get)
    assert errors[worst] <= GAIN_ERROR, (worst, errors[worst], fitted.output)
    assert np.median(list(errors.values())) <= 0.05, errors


def test_encoder_offsets_within_0_1_milliradian_median_0_05(fitted: Fitted) -> None:
    values = load_sim_params(fitted.params)
    errors = {joint: abs(values.joints[joint].encoder_offset - HIDDEN.joints[joint].encoder_offset)
              for joint in SPEC.arm_joints}
    assert max(errors.values()) <= OFFSET_ERROR, errors
    assert np.median(list(errors.values())) <= 5e-5, errors


def test_no_parameter_at_a_bound(fitted: Fitted) -> None:
    summary = (fitted.report / 'summary.md').read_text()
    section = summary.split('## Parameters at their bounds')[1].split('##')[0]
    assert section.split() == ['none'], section


def test_the_stand_in_nearly_keeps_the_fixed_weights(fitted: Fitted) -> None:
    """The model explains the stand-in to about its noise: the velocity and effort scales
    that its replay errors set stay within a quarter of the fixed ones (docs/sysid.md,
    Weights)."""
    import re

    assert 'controller joint_trajectory' in fitted.output
    for qd, effort in re.findall(r'weighs like ([0-9.e+-]+) mrad/s of velocity and '
                                 r'([0-9.e+-]+) N\*m of effort', fitted.output):
        assert float(qd) <= 1.25 * 10.0 and float(effort) <= 1.25 * 0.05, fitted.output


def test_held_out_replay_error_drops_10x_to_0_3_mrad_and_is_in_provenance(fitted: Fitted
                                                                          ) -> None:
    provenance = load_sim_params(fitted.params).provenance
    held = provenance['residual_holdout']['position_rms_mrad']
    assert held['nominal'] <= 5.0, held   # the nominal FR3 model, before any fit
    assert held['fitted'] * 10 <= held['nominal'] and held['fitted'] <= 0.3, held   # #14's bar
    assert provenance['bags'][0]['path'] == str(fitted.train)
    assert len(provenance['bags'][0]['sha256']) == 64
    assert provenance['holdout'][0]['path'] == str(fitted.held)


def test_report_has_plots_table_bounds_and_warnings(fitted: Fitted) -> None:
    summary = (fitted.report / 'summary.md').read_text()
    for heading in ('## Parameters (95 % confidence half-widths)', '## Parameters at their bounds',
                    '## Warnings', '## Replay error', '## Command delay profile'):
        assert heading in summary
    for joint in SPEC.arm_joints:
        assert (fitted.report / f'{joint}.png').stat().st_size > 10_000
        assert f'| {joint}.kp |' in summary
    assert 'iteration   1' in fitted.output


def test_the_nodes_physics_with_the_fit_reproduces_the_held_out_bag(fitted: Fitted) -> None:
    """The simulator node's wrapper (Physics) loaded with the output file, driven by the
    held-out bag's commands as the node applies them, moves like the stand-in did: to the
    error the fit reported, and 5x better than nominal physics.

    (Comparing a second real-time run instead is confounded by the shared machine: excite's
    timer stalls stretch the excitation differently in every run.)
    """
    recording = load_recording(fitted.held, SPEC, load_topics())
    physics = Physics(mujoco.MjModel.from_xml_path(str(REPO / 'models/fr3/scene.xml')), SPEC,
                      params=load_sim_params(fitted.params))
    dt = physics.timestep
    errors = []
    for seq in split_sequences(recording, dt, 5.0, 100.0, 60, list(range(7)))[0]:
        physics.reset_joints(seq.qpos0, seq.qvel0)
        for row in seq.targets[:seq.history]:  # fill the delay line with what was commanded
            physics.set_arm_target(row[:7], row[7:])
            physics.step()
        bias = sensor_bias(physics.params, SPEC.joint_names)[0]
        physics.data.qpos[physics.index.qpos_adr] = seq.qpos0 - bias  # then start from the
        physics.data.qvel[physics.index.dof_adr] = seq.qvel0   # measured state, as the fit does
        mujoco.mj_forward(physics.model, physics.data)
        joints = np.empty((3, 9))
        q = np.empty((seq.steps, 7))
        for k, row in enumerate(seq.targets[seq.history:]):
            physics.set_arm_target(row[:7], row[7:])
            physics.step()
            physics.read_joints(joints)
            q[k] = joints[0, :7]
        t = seq.t0 + dt * np.arange(1, seq.steps + 1)
        errors.append(np.array([np.interp(seq.t, t, q[:, j]) for j in range(7)]).T - seq.q)
    rms = float(np.sqrt(np.mean(np.concatenate(errors) ** 2))) * 1e3
    held = load_sim_params(fitted.params).provenance['residual_holdout']['position_rms_mrad']
    assert rms * 5 <= held['nominal'], (rms, held)
    assert abs(rms - held['fitted']) <= 0.5 * held['fitted'] + 0.05, (rms, held)
