"""Command lines for the node graph, as ``ros2 run`` and ``launch_ros`` would build them.

Executables are found like ``ros2 run``: ``<prefix>/lib/<package>/<executable>`` over
``AMENT_PREFIX_PATH``, then the colcon install space of the source checkout this module lives
in (isolated ``install/<package>`` and merged ``install`` layouts).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import yaml

from simops_bringup.graph import NodeSpec, ParamValue
from simops_core.paths import source_workspace

Resolver = Callable[[str, str], Path]


class ExecutableNotFoundError(FileNotFoundError):
    """No install prefix holds ``lib/<package>/<executable>``."""


def install_prefixes(package: str) -> list[Path]:
    """Prefixes searched for ``package``'s executables, in order."""
    prefixes = [Path(p) for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    workspace = source_workspace()
    if workspace is not None:
        prefixes += [workspace / 'install' / package, workspace / 'install']
    return prefixes


def find_executable(package: str, executable: str) -> Path:
    """The installed ``executable`` of ``package``, as ``ros2 run package executable`` runs it."""
    prefixes = install_prefixes(package)
    for prefix in prefixes:
        path = prefix / 'lib' / package / executable
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ExecutableNotFoundError(
        f'{package}/{executable} is not installed in any of '
        f'{", ".join(str(p) for p in prefixes) or "(no prefixes)"}; build the workspace '
        '(colcon build) or source its install/setup.bash')


def command_line(node: NodeSpec, resolve: Resolver = find_executable) -> list[str]:
    """The argv that starts ``node`` with the ROS arguments launch_ros would pass."""
    argv = [str(resolve(node.package, node.executable)), '--ros-args',
            '-r', f'__node:={node.name}']
    if node.namespace:
        argv += ['-r', f'__ns:={node.namespace}']
    for file in node.param_files:
        argv += ['--params-file', file]
    for name, value in node.parameters:
        argv += ['-p', f'{name}:={format_value(value)}']
    for source, target in node.remappings:
        argv += ['-r', f'{source}:={target}']
    return argv


def format_value(value: ParamValue) -> str:
    """A parameter value as rcl parses ``-p name:=value`` (YAML), keeping its type."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    return '[' + ', '.join(_string(item) for item in value) + ']'


def _string(text: str) -> str:
    """``text`` plain if YAML reads it back as the same string, else single-quoted."""
    try:
        plain = yaml.safe_load(text) == text and not any(c in text for c in ',[]{}#')
    except yaml.YAMLError:
        plain = False
    return text if plain else "'" + text.replace("'", "''") + "'"

