"""Every executable parses its own command line before it touches ROS, a bag or a file.

``--help`` prints usage with the exit codes and exits 0 (``excite --help`` used to start the
node and move the arm); an unknown or abbreviated option exits 2 with one line.
"""

from __future__ import annotations

import subprocess

import pytest
from ros_helpers import REPO, installed_executable

EXECUTABLES = [('simops_sim', 'sim', 'sim'), ('simops_policy', 'policy', 'policy'),
               ('simops_recorder', 'record', 'record'), ('simops_recorder', 'repair', 'repair'),
               ('simops_sysid', 'excite', 'excite'), ('simops_sysid', 'fit', 'fit'),
               ('simops_teleop', 'teleop', 'teleop'),
               ('simops_teleop', 'simops-teleop-keyboard', 'simops-teleop-keyboard'),
               ('simops_bringup', 'simops-launch', 'simops-launch'),
               ('simops_bringup', 'simops-demo', 'simops-demo'),
               ('simops_bringup', 'simops-pipeline', 'simops-pipeline'),
               ('simops_learning', 'simops-train', 'simops-train'),
               ('simops_learning', 'simops-validate', 'simops-validate'),
               ('simops_learning', 'simops-promote', 'simops-promote')]


def run(package: str, executable: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed_executable(package, executable)), *args],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.mark.parametrize(('package', 'executable', 'prog'), EXECUTABLES,
                         ids=[e[1] for e in EXECUTABLES])
def test_help_prints_usage_and_exit_codes(package: str, executable: str, prog: str) -> None:
    result = run(package, executable, '--help')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f'usage: {prog}'), result.stdout
    assert 'exit codes:' in result.stdout and '\n  0  ' in result.stdout
    assert result.stderr == '' and 'Traceback' not in result.stdout


@pytest.mark.parametrize(('package', 'executable', 'prog'), EXECUTABLES,
                         ids=[e[1] for e in EXECUTABLES])
def test_unknown_and_abbreviated_options_exit_2_with_one_line(package: str, executable: str,
                                                              prog: str) -> None:
    for args in (['--no-such-option'], ['--he']):
        result = run(package, executable, *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f'{prog}: error: '), result.stderr
