"""The ``ros_free`` marker: its tests run off the ROS legs, so their commands must not touch ROS.

A command started by a test marked ``ros_free`` cannot import rclpy or a message package
(tests/rclpy_guard/sitecustomize.py, put first on PYTHONPATH by tests/conftest.py); the
commands those tests run import neither.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMAND_MODULES = ('simops_sysid.fit_cli', 'simops_sysid.fleet', 'simops_learning.train',
                   'simops_learning.validate', 'simops_learning.dataset_cli',
                   'simops_learning.rollout_cli', 'simops_recorder.repair')


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.ros_free
@pytest.mark.parametrize('module', ['rclpy', 'std_msgs.msg', 'rclpy.node'])
def test_a_ros_free_tests_command_cannot_import_ros(module: str) -> None:
    run = python(f'import {module}')
    assert run.returncode == 1
    assert 'marked ros_free' in run.stderr.strip().splitlines()[-1], run.stderr


@pytest.mark.ros_free
def test_the_commands_ros_free_tests_run_import_no_ros() -> None:
    run = python('; '.join(f'import {module}' for module in COMMAND_MODULES))
    assert run.returncode == 0, run.stderr

