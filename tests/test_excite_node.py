"""`excite` configuration errors: exit 2 with one line naming the problem (docs/interfaces.md)."""

from __future__ import annotations

import subprocess

import pytest
from ros_helpers import REPO, installed_executable


@pytest.mark.parametrize(('params', 'words'), [
    (['command_interface:=position'], ('command_interface', 'position')),
    (['robot:=config/robot/nope.yaml'], ('nope.yaml',)),
    (['duration:=4.0'], ('duration',)),
    (['amplitude_fraction:=2.0'], ('amplitude_fraction',)),
])
def test_bad_configuration_exits_2_with_one_line(params: list[str], words: tuple[str, ...],
                                                 ros_env: dict[str, str]) -> None:
    args = [arg for p in params for arg in ('-p', p)]
    result = subprocess.run([str(installed_executable('simops_sysid', 'excite')),
                             '--ros-args', *args], capture_output=True, text=True, timeout=60,
                            cwd=REPO, env=ros_env)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('excite: error: '), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
