"""`fit` on bad input: each problem exits with its documented code and one line naming it.

The bags are written by tests/sysid_helpers.py from the simulator's physics wrapper; the
tool runs as the installed console script, like ``ros2 run simops_sysid fit``.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO, installed_executable
from rosbags.rosbag2 import StoragePlugin, Writer
from sysid_helpers import SPEC, STORE, StandinData, simulate, write_bag

from simops_core.command_line import EXIT_CONFIG, EXIT_DATA, EXIT_USAGE
from simops_sysid.fit_cli import EXIT_CHECK, EXIT_SAVED_ELSEWHERE


@pytest.fixture(scope='module')
def data() -> StandinData:
    return simulate(8.0)


def run_fit(*args: str | Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    command = [str(installed_executable('simops_sysid', 'fit')), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def one_line_error(result: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert result.returncode == code, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith('fit: error: '), lines[0]
    for word in words:
        assert word in lines[0], lines[0]


def test_help_documents_the_exit_codes() -> None:
    result = run_fit('--help')
    assert result.returncode == 0
    for code in ('0', '2', '3', '5', '6', '7'):
        assert f'\n  {code}  ' in result.stdout


def test_empty_bag(tmp_path: Path) -> None:
    bag = tmp_path / 'empty'
    with Writer(bag, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        writer.add_connection('/franka/joint_states', 'sensor_msgs/msg/JointState',
                              typestore=STORE)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA, 'empty')


def test_missing_command_topic(tmp_path: Path, data: StandinData) -> None:
    """Trajectory mode needs commands (auto mode would fit the efforts instead)."""
    bag = write_bag(tmp_path / 'states_only', data, commands=False)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml', '--mode', 'trajectory'),
                   EXIT_DATA, 'no command topic', '/franka/joint_states', '--mode torque')


def test_joint_names_that_do_not_match(tmp_path: Path, data: StandinData) -> None:
    names = [n.replace('fr3_', 'panda_') for n in SPEC.joint_names]
    bag = write_bag(tmp_path / 'panda', data, names=names)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml', '--robot', 'fr3'),
                   EXIT_DATA, 'joint names do not match', 'panda_joint1')
    names = [n.replace('fr3_', 'ur_') for n in SPEC.joint_names]
    bag = write_bag(tmp_path / 'other', data, names=names)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'the arm joints of no robot spec', 'ur_joint1', '--robot')


def test_non_monotonic_stamps(tmp_path: Path, data: StandinData) -> None:
    stamps = data.t.copy()
    stamps[1000], stamps[1001] = stamps[1001], stamps[1000]
    bag = write_bag(tmp_path / 'shuffled', data, stamps=stamps)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'not strictly increasing')


def test_too_little_data(tmp_path: Path, data: StandinData) -> None:
    keep = data.t < 1.5
    short = StandinData(data.t[keep], data.q[keep], data.qd[keep], data.effort[keep],
                        data.arrival[:10], data.commands[:10], data.period,
                        data.stamps[:10])
    bag = write_bag(tmp_path / 'short', short)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'too little data')


def test_bad_parameter_kind_and_joint(tmp_path: Path, data: StandinData) -> None:
    bag = write_bag(tmp_path / 'ok', data)
    one_line_error(run_fit('--bag', bag, '--params', 'damping,stiffness'), EXIT_USAGE,
                   'stiffness')
    one_line_error(run_fit('--bag', bag, '--joints', 'fr3_joint9'), EXIT_USAGE, 'fr3_joint9')
    assert not np.any([p.name == 'p.yaml' for p in tmp_path.iterdir()])


def test_missing_and_corrupt_model(tmp_path: Path, data: StandinData) -> None:
    bag = write_bag(tmp_path / 'ok', data)
    one_line_error(run_fit('--bag', bag, '--model', tmp_path / 'nowhere.xml'), EXIT_CONFIG,
                   'nowhere.xml')
    corrupt = tmp_path / 'corrupt.xml'
    corrupt.write_text('<mujoco><worldbody><body name="fr3_link0"></worldbody>')
    one_line_error(run_fit('--bag', bag, '--model', corrupt), EXIT_CONFIG)


def replaced(data: StandinData, **arrays: np.ndarray) -> StandinData:
    return StandinData(**{**vars(data), **arrays})


def unchanged(bag: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bag.iterdir())}


@pytest.mark.parametrize(('field', 'rows', 'value'), [
    ('qd', slice(None), np.nan),       # NaN velocity in every message
    ('qd', slice(500, 510), np.nan),   # in 10 messages: refused up front, not after a fit
    ('effort', slice(700, 705), np.inf),
    ('q', slice(900, 901), 1e308),     # finite, absurd
])
def test_non_finite_or_absurd_states_are_data_errors(tmp_path: Path, data: StandinData,
                                                     field: str, rows: slice,
                                                     value: float) -> None:
    array = getattr(data, field).copy()
    array[rows, 1] = value
    bag = write_bag(tmp_path / 'bad', replaced(data, **{field: array}))
    before = unchanged(bag)
    result = run_fit('--bag', bag, '--out', tmp_path / 'p.yaml')
    one_line_error(result, EXIT_DATA, 'fr3_joint2' if field == 'q' else '/franka/joint_states')
    assert 'iteration' not in result.stdout            # refused before any fitting
    assert unchanged(bag) == before and not (tmp_path / 'p.yaml').exists()


@pytest.mark.parametrize('target', [1e308, -1e308, 100.0, 2.0 + 0.2])
def test_commands_outside_the_joint_limits_are_data_errors(tmp_path: Path, data: StandinData,
                                                           target: float) -> None:
    commands = data.commands.copy()
    commands[40:, 3] = target if target != 2.2 else SPEC.position_upper[3] + 0.2
    bag = write_bag(tmp_path / 'garbage', replaced(data, commands=commands))
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'command', 'fr3_joint4', 'outside its limits')


@pytest.mark.parametrize('count', ["'abc'", '[1, 2]', '1e400', '-3', '{a: 1}', 'true'])
def test_malformed_message_count_is_a_data_error(tmp_path: Path, data: StandinData,
                                                 count: str) -> None:
    bag = write_bag(tmp_path / 'meta', data)
    meta = bag / 'metadata.yaml'
    text = meta.read_text()
    first = text.index('message_count:', text.index('topics_with_message_count:') + 30)
    end = text.index('\n', first)
    meta.write_text(text[:first] + f'message_count: {count}' + text[end:])
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'message_count')


@pytest.mark.parametrize('entries', ['5', "['x']", '[{topic_metadata: 3}]'])
def test_malformed_topic_list_is_a_data_error(tmp_path: Path, data: StandinData,
                                              entries: str) -> None:
    bag = write_bag(tmp_path / 'meta', data)
    meta = bag / 'metadata.yaml'
    lines = meta.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if 'topics_with_message_count:' in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines))
               if len(lines[i]) - len(lines[i].lstrip()) <= indent and lines[i].strip()
               and not lines[i].lstrip().startswith('-'))
    lines[start:end] = [' ' * indent + f'topics_with_message_count: {entries}']
    meta.write_text('\n'.join(lines) + '\n')
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'topics_with_message_count')


@pytest.mark.parametrize('option', [['--threads', '0'], ['--threads', '-2'],
                                    ['--mod', 'torque'], ['--thread', '2']])
def test_bad_and_abbreviated_options_are_usage_errors(tmp_path: Path, data: StandinData,
                                                      option: list[str]) -> None:
    bag = write_bag(tmp_path / 'ok', data)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml', *option), EXIT_USAGE,
                   option[0])


def test_unwritable_outputs_are_refused_before_reading(tmp_path: Path) -> None:
    """Checked before the bag is even opened: the bag path here does not exist."""
    a_file = tmp_path / 'file'
    a_file.write_text('x')
    read_only = tmp_path / 'read_only'
    read_only.mkdir()
    read_only.chmod(0o500)
    nowhere = tmp_path / 'no_bag'
    cases = [(['--out', tmp_path], 'is a directory'),
             (['--out', a_file / 'p.yaml'], 'is a file'),
             (['--report', a_file], 'not a directory'),
             (['--report', a_file / 'r'], 'is a file')]
    if not _root():   # root writes anywhere; the permission case needs a user
        cases.append((['--out', read_only / 'p.yaml'], 'permission denied'))
    for args, words in cases:
        one_line_error(run_fit('--bag', nowhere, *args), EXIT_USAGE, words)


def _root() -> bool:
    import os

    return os.geteuid() == 0


@pytest.mark.ros_free
def test_a_write_that_fails_at_the_end_keeps_the_result(tmp_path: Path,
                                                        data: StandinData) -> None:
    """The report folder vanishes into a file mid-fit: the fitted parameters are kept."""
    bag = write_bag(tmp_path / 'ok', data)
    out, report = tmp_path / 'p.yaml', tmp_path / 'report'
    command = [str(installed_executable('simops_sysid', 'fit')), '--bag', str(bag), '--out',
               str(out), '--report', str(report), '--params', 'kp', '--joints', 'fr3_joint1',
               '--grouped-iters', '0', '--full-iters', '1']
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)
    for line in proc.stdout:   # the fit has started: make the report path unusable
        if line.startswith('fitting'):
            report.write_text('in the way')
            break
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == EXIT_SAVED_ELSEWHERE, stdout + stderr
    assert out.is_file()
    assert stderr.strip().splitlines()[-1].startswith('fit: error: ')
    assert str(out) in stderr


def test_effort_that_does_not_follow_the_targets_still_fits(tmp_path: Path,
                                                            data: StandinData) -> None:
    """An effort that the commands do not explain (every cross-correlation score was negative
    on a real Panda recording): the delay starts from nominal instead of crashing
    (IndexError, exit 1, before)."""
    bag = write_bag(tmp_path / 'anti', replaced(data, effort=-100.0 * data.q))
    result = run_fit('--bag', bag, '--out', tmp_path / 'p.yaml', '--params', 'kp,delay',
                     '--joints', 'fr3_joint1', '--grouped-iters', '0', '--full-iters', '1',
                     timeout=300)
    assert result.returncode in (0, 5), result.stdout + result.stderr
    assert 'Traceback' not in result.stderr
    assert 'the efforts carry no trace of the commands' in result.stdout


def test_arm_only_joint_states_as_franka_ros2_publishes_them(tmp_path: Path,
                                                             data: StandinData) -> None:
    """/franka/joint_states carries the 7 arm joints only (the gripper publishes its own):
    the fit holds the fingers still instead of replaying NaN widths (found by the fuzz)."""
    arm_only = replaced(data, q=data.q[:, :7], qd=data.qd[:, :7], effort=data.effort[:, :7])
    bag = write_bag(tmp_path / 'franka', arm_only, names=list(SPEC.arm_joints))
    result = run_fit('--bag', bag, '--out', tmp_path / 'p.yaml', '--params', 'kp',
                     '--joints', 'fr3_joint2', '--grouped-iters', '0', '--full-iters', '1',
                     timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / 'p.yaml').is_file()


def test_a_joint_that_never_moved_fails_the_check_before_the_fit(tmp_path: Path,
                                                                  data: StandinData) -> None:
    """Isaac Sim's sysid blocks a run until its check passes; so does fit (exit 7, one line),
    unless --skip-check. --check-only stops after the check."""
    still = data.q.copy()
    still[:, 2] = still[0, 2]   # joint 3's encoder reads a constant
    bag = write_bag(tmp_path / 'still', replaced(data, q=still))
    args = ('--bag', bag, '--out', tmp_path / 'p.yaml', '--params', 'kp',
            '--grouped-iters', '0', '--full-iters', '1')
    result = run_fit(*args, timeout=300)
    one_line_error(result, EXIT_CHECK, 'fr3_joint3 barely moved', '--skip-check')
    assert 'check: fail' in result.stdout and 'fr3_joint3: range 0.000 rad' in result.stdout
    assert not (tmp_path / 'p.yaml').exists()
    moving = run_fit(*args[:4], '--joints', 'fr3_joint1,fr3_joint2', '--check-only',
                     timeout=300)
    assert moving.returncode == 0, moving.stdout + moving.stderr
    assert 'check: ' in moving.stdout and 'fr3_joint3' not in moving.stdout
    assert not (tmp_path / 'p.yaml').exists()
    forced = run_fit(*args, '--joints', 'fr3_joint3', '--skip-check', timeout=300)
    assert forced.returncode in (0, 5), forced.stdout + forced.stderr
    assert 'check: fail' in forced.stdout and 'Traceback' not in forced.stderr


def test_identifiability_flags_dead_parameters_and_correlated_pairs() -> None:
    from mujoco import sysid

    from simops_sysid.precheck import identifiability

    params = sysid.ParameterDict()
    for name in ('a', 'dead', 'twin', 'alone'):
        params.add(sysid.Parameter(name, 1.0, 0.0, 2.0))
    rng = np.random.default_rng(0)
    a, alone = rng.normal(size=500), rng.normal(size=500)
    jac = np.stack([a, np.zeros(500), a + 0.01 * rng.normal(size=500), alone], axis=1) * 100
    dead, undetermined, correlated = identifiability(jac, params)
    assert dead == ('dead',)
    assert [(x, y) for x, y, _ in correlated] == [('a', 'twin')]
    assert 'alone' not in [n for n, _ in undetermined]


def test_payload_is_a_fit_kind_that_starts_from_a_small_load() -> None:
    from simops_core.sim_params import PayloadParams, SimParams
    from simops_sysid import fit_parameters

    bare = SimParams()
    params = fit_parameters.build_parameters(bare, ('payload',), [], [])
    assert [n for n, _ in params.items()] == ['payload.mass', 'payload.com_x', 'payload.com_y',
                                              'payload.com_z']
    assert fit_parameters.to_sim_params(params, bare).payload == PayloadParams(
        *fit_parameters.PAYLOAD_START)
    carried = SimParams(payload=PayloadParams(mass=1.0, com_x=0.0, com_y=0.01, com_z=0.1))
    params = fit_parameters.build_parameters(carried, ('payload',), [], [])
    assert fit_parameters.to_sim_params(params, bare).payload == carried.payload


def test_a_bag_streamed_through_a_position_interface_selects_the_impedance_loop(
        tmp_path: Path) -> None:
    """Positions streamed at 1 kHz on a forward command controller's ``~/commands`` (the
    position interface) are tracked by the arm's own impedance loop: fit replays that, with
    one gain scale; the same stream on SimOps' /joint_commands is the effort JTC's."""
    data = simulate(12.0, rate=1000.0)
    forward = write_bag(tmp_path / 'forward', data, stream='/joint_position_controller/commands')
    result = run_fit('--bag', forward, '--out', tmp_path / 'a.yaml', '--check-only')
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith('controller '))
    assert line.startswith('controller joint_impedance: /joint_position_controller/commands '
                           'streams positions at 10'), line
    assert line.endswith('Hz to a position interface: the arm\'s impedance loop'), line
    ours = write_bag(tmp_path / 'ours', data, stream='/joint_commands')
    result = run_fit('--bag', ours, '--out', tmp_path / 'b.yaml', '--check-only')
    assert result.returncode == 0, result.stderr
    assert 'controller joint_trajectory: /joint_commands streams positions' in result.stdout
    assert '--controller joint_impedance' in result.stdout   # the rate check's suggestion


def test_velocities_on_a_forward_controller_topic_are_refused(tmp_path: Path) -> None:
    data = simulate(6.0, rate=1000.0)
    velocities = np.gradient(data.commands, data.period, axis=0)
    bag = write_bag(tmp_path / 'bag', replace(data, commands=velocities),
                    stream='/joint_velocity_controller/commands')
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'a.yaml', '--check-only'),
                   EXIT_DATA, 'does not hold positions')


def test_the_measured_state_is_np_interp_of_each_joint_bit_for_bit(tmp_path: Path,
                                                                    data: StandinData) -> None:
    """Recording.measured_at (where a replayed trajectory starts, once per command) gives
    what ``np.interp`` gives per joint, at samples, between them and beyond either end."""
    from simops_core.topics import load_topics
    from simops_sysid.recording import load_recording

    recording = load_recording(write_bag(tmp_path / 'bag', data), SPEC, load_topics())
    t = recording.t
    times = np.concatenate([np.random.default_rng(0).uniform(t[0] - 1.0, t[-1] + 1.0, 500),
                            t[::101], t[-1:], (t[:-1:53] + t[1::53]) / 2])
    for when in times:
        q, qd = recording.measured_at(float(when))
        assert np.array_equal(q, [np.interp(when, t, recording.q[:, j]) for j in range(7)])
        assert np.array_equal(qd, [np.interp(when, t, recording.qd[:, j]) for j in range(7)])
