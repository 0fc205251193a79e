"""The architecture holds: layers point down, no import cycle, thin nodes.

Layers, lowest first: simops_core (no rclpy), simops_ros, then simops_sim / simops_policy /
simops_recorder, then simops_sysid / simops_learning / simops_teleop, then simops_bringup. A
module may import its own package and the layers below it, never a package beside or above
it; no two modules import each other, directly or round a loop (``TYPE_CHECKING`` imports count: a
cycle for the type checker is a cycle of ideas). A node file (one that defines a class
deriving from rclpy's ``Node``) is at most :data:`MAX_NODE_LINES` lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from ros_helpers import REPO

LAYERS = {'simops_core': 0, 'simops_ros': 1, 'simops_sim': 2, 'simops_policy': 2,
          'simops_recorder': 2, 'simops_sysid': 3, 'simops_learning': 3, 'simops_teleop': 3,
          'simops_bringup': 4}
MAX_NODE_LINES = 250


def module_files() -> dict[str, Path]:
    """Every SimOps module by dotted name (a package by its own name)."""
    files = {}
    for package in LAYERS:
        root = REPO / 'src' / package
        for path in sorted((root / package).rglob('*.py')):
            parts = path.relative_to(root).with_suffix('').parts
            files['.'.join(parts[:-1] if parts[-1] == '__init__' else parts)] = path
    return files


def imports(path: Path, known: set[str]) -> set[str]:
    """The SimOps modules ``path`` imports (``from a.b import c`` counts a.b.c if a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f'{node.module}.{alias.name}' for alias in node.names)
    return found & known


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imports(path, known) - {name} for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer() -> None:
    assert sorted(LAYERS) == sorted(p.name for p in (REPO / 'src').iterdir()
                                    if (p / 'package.xml').is_file())


def test_imports_point_down_the_layers() -> None:
    upward = [f'{module} imports {target}'
              for module, targets in import_graph().items() for target in sorted(targets)
              if (a := module.split('.')[0]) != (b := target.split('.')[0])
              and LAYERS[b] >= LAYERS[a]]
    assert not upward, upward


def test_no_import_cycle() -> None:
    assert not cycles(import_graph())


def test_the_cycle_finder_finds_a_loop() -> None:
    assert cycles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]


def node_files() -> list[Path]:
    """The files that define a class deriving from ``Node``."""
    return [path for path in module_files().values()
            if any(isinstance(node, ast.ClassDef)
                   and any(getattr(base, 'id', getattr(base, 'attr', '')) == 'Node'
                           for base in node.bases)
                   for node in ast.walk(ast.parse(path.read_text())))]


def test_the_nodes_are_found() -> None:
    names = {path.stem for path in node_files()}
    assert {'sim_node', 'policy_node', 'record_node', 'excite_node'} <= names


@pytest.mark.parametrize('path', node_files(), ids=lambda path: path.stem)
def test_node_files_stay_thin(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_NODE_LINES, f'{path.relative_to(REPO)}: {lines} lines'


def test_tests_are_laid_out_by_package() -> None:
    """tests/<package>/test_<module>.py: each package's tests in its own directory (simops_
    dropped), workspace-wide ones in tests/workspace; helpers stay in tests/."""
    tests = Path(__file__).resolve().parents[1]
    packages = {name.removeprefix('simops_') for name in LAYERS} | {'workspace'}
    assert not sorted(tests.glob('test_*.py'))
    placed = {p.parent.name for p in tests.glob('*/test_*.py')}
    assert placed <= packages, placed - packages
