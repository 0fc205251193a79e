"""Starting an executable: a Ctrl-C during its imports ends in one line and exit 130.

Every console script of every package runs through its package's ``run_*`` function
(:func:`simops_core.command_line.run_executable`), and importing a package pulls in none of
the libraries whose import takes seconds.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ros_helpers import REPO

from simops_core.command_line import EXIT_INTERRUPTED

PACKAGES = sorted(p.name for p in (REPO / 'src').iterdir() if (p / 'setup.py').is_file())
SLOW_IMPORTS = ('torch', 'mujoco', 'rclpy', 'scipy', 'rosbags', 'lerobot')


def console_scripts(package: str) -> dict[str, str]:
    """``setup.py``'s console scripts of ``package``: name -> ``module:function``."""
    tree = ast.parse((REPO / 'src' / package / 'setup.py').read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == 'console_scripts':
                    for item in value.elts:
                        name, _, target = item.value.partition('=')
                        found[name.strip()] = target.strip()
    return found


@pytest.mark.ros_free
def test_a_ctrl_c_while_an_executable_imports_its_module_ends_in_one_line(
        tmp_path: Path) -> None:
    (tmp_path / 'slow_start.py').write_text(
        'import time\nprint("importing", flush=True)\ntime.sleep(60)\n\n\n'
        'def main() -> int:\n    return 0\n')
    script = ('import sys; from simops_core.command_line import run_executable; '
              'sys.argv[0] = "/opt/bin/slow-tool"; sys.exit(run_executable("slow_start:main"))')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get('PYTHONPATH')])])}
    proc = subprocess.Popen([sys.executable, '-c', script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == 'importing\n'
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (
        EXIT_INTERRUPTED, 'slow-tool: interrupted (Ctrl-C) while starting\n')


@pytest.mark.parametrize('package', PACKAGES)
def test_every_console_script_starts_through_its_package(package: str) -> None:
    scripts = console_scripts(package)
    init = ast.parse((REPO / 'src' / package / package / '__init__.py').read_text())
    runs = {node.name: node for node in init.body if isinstance(node, ast.FunctionDef)}
    for name, target in scripts.items():
        owner, _, function = target.partition(':')
        assert owner == package and function in runs, f'{name} = {target}'
        call = runs[function].body[-1].value
        assert isinstance(call, ast.Call) and call.func.id == 'run_executable', name
        module, _, main = call.args[0].value.partition(':')
        source = REPO / 'src' / package / Path(*module.split('.')).with_suffix('.py')
        defined = {node.name for node in ast.parse(source.read_text()).body
                   if isinstance(node, ast.FunctionDef)}
        assert main in defined, f'{name}: {module} defines no {main}'


@pytest.mark.ros_free
def test_importing_the_packages_imports_nothing_slow() -> None:
    probe = (f'import sys; import {", ".join(PACKAGES)}; '
             f'print(sorted(set({SLOW_IMPORTS!r}) & set(sys.modules)))')
    out = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True,
                         check=True).stdout
    assert out == '[]\n'
