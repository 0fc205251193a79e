"""`fit` on bad input: each problem exits with its documented code and one line naming it.

The bags are written by tests/sysid_helpers.py from the simulator's physics wrapper; the
tool runs as the installed console script, like ``ros2 run simops_sysid fit``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO, installed_executable
from rosbags.rosbag2 import StoragePlugin, Writer
from sysid_helpers import SPEC, STORE, StandinData, simulate, write_bag

from simops_sysid.fit_cli import EXIT_CONFIG, EXIT_DATA, EXIT_USAGE


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
    for code in ('0', '2', '3', '4', '5'):
        assert f'\n  {code}  ' in result.stdout


def test_empty_bag(tmp_path: Path) -> None:
    bag = tmp_path / 'empty'
    with Writer(bag, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        writer.add_connection('/franka/joint_states', 'sensor_msgs/msg/JointState',
                              typestore=STORE)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA, 'empty')


def test_missing_command_topic(tmp_path: Path, data: StandinData) -> None:
    bag = write_bag(tmp_path / 'states_only', data, commands=False)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'no command topic', '/franka/joint_states')


def test_joint_names_that_do_not_match(tmp_path: Path, data: StandinData) -> None:
    names = [n.replace('fr3_', 'panda_') for n in SPEC.joint_names]
    bag = write_bag(tmp_path / 'panda', data, names=names)
    one_line_error(run_fit('--bag', bag, '--out', tmp_path / 'p.yaml'), EXIT_DATA,
                   'joint names do not match', 'panda_joint1')


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
