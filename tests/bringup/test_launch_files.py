"""The launch files: thin launch_ros translations of the node graph, installed by colcon.

launch_ros cannot be installed on our machines, so the structural checks run here and the
comparison of the launch files' Nodes with the graph runs where launch_ros is importable. It
encodes what real launch_ros does (checked against ros2/launch and launch_ros, Jazzy and
rolling): an argument with choices gets ". Valid choices are: [...]" appended to its
description; a Node without a namespace keeps it unspecified
(``<node_namespace_unspecified>/name``, while the running node is ``/name``); a Node
without remappings has ``expanded_remapping_rules`` None.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from ros_helpers import REPO

from simops_bringup.arguments import Argument
from simops_bringup.graph import PROFILES, build_graph, launch_arguments

LAUNCH = REPO / 'launch'
FILES = {profile: LAUNCH / f'{profile}.launch.py' for profile in PROFILES}
ALLOWED_IMPORTS = {'launch', 'simops_bringup'}


def test_one_launch_file_per_profile() -> None:
    assert sorted(LAUNCH.glob('*.launch.py')) == sorted(FILES.values())


@pytest.mark.parametrize('profile', PROFILES)
def test_launch_file_is_a_thin_translation_of_the_graph(profile: str) -> None:
    tree = ast.parse(FILES[profile].read_text(), filename=str(FILES[profile]))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split('.')[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or '').split('.')[0])
    assert imported == ALLOWED_IMPORTS
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert functions == {'generate_launch_description'}
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value,
                                                                             ast.Constant)}
    assert constants == {'PROFILE': profile}
    called = [n.func.id for n in ast.walk(tree)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert called == ['profile_description']   # everything else comes from the graph


@pytest.mark.parametrize('profile', PROFILES)
def test_colcon_installs_the_launch_files_and_their_config(profile: str) -> None:
    """The colcon build of simops_bringup (make build) puts them into its share directory."""
    share = REPO / 'install/simops_bringup/share/simops_bringup'
    for rel in (f'launch/{profile}.launch.py', 'config/real_robot.yaml',
                'config/standin_robot.yaml'):
        assert (share / rel).is_file(), f'{rel} not installed; run `make build`'


def load_launch_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.name.replace('.', '_'), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(('profile', 'values'), [
    ('sim', {}),
    ('sim', {'robot': 'panda', 'record': 'true', 'namespace': 'lab', 'sim_params': 'f.yaml'}),
    ('sim', {'layout': 'fr3_duo', 'record': 'true', 'namespace': 'lab'}),
    ('real_robot', {}),
    ('real_robot', {'standin': 'true', 'excite': 'true', 'namespace': 'NS1'}),
])
def test_launch_file_starts_exactly_the_graphs_nodes(profile: str, values: dict[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip('launch_ros')
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.launch_context import LaunchContext
    from launch_ros.actions import Node

    module = load_launch_file(FILES[profile])
    recorded: list[dict[str, object]] = []

    class RecordingNode(Node):  # the real launch_ros Node, keeping its arguments
        def __init__(self, **kwargs: object) -> None:
            recorded.append(kwargs)
            super().__init__(**kwargs)

    from simops_bringup import ros2_launch

    monkeypatch.setattr(ros2_launch, 'Node', RecordingNode)
    description = module.generate_launch_description()
    declared = [e for e in description.entities if isinstance(e, DeclareLaunchArgument)]
    arguments = launch_arguments(profile)
    assert [d.name for d in declared] == [a.name for a in arguments]
    assert [d.description for d in declared] == [described(a) for a in arguments]

    context = LaunchContext()
    context.launch_configurations.update(values)
    for declaration in declared:
        declaration.execute(context)  # fills in defaults and checks choices
    assert {a.name: context.launch_configurations[a.name] for a in arguments} == {
        a.name: values.get(a.name, a.default) for a in arguments}
    (opaque,) = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    actions = opaque.execute(context)

    graph = build_graph(profile, values)
    assert len(actions) == len(recorded) == len(graph)
    for action, kwargs, node in zip(actions, recorded, graph, strict=True):
        assert kwargs['package'] == node.package
        assert kwargs['executable'] == node.executable
        assert kwargs['name'] == node.name
        assert kwargs['namespace'] == (node.namespace or None)
        assert kwargs['parameters'] == [*node.param_files, node.parameter_dict()]
        assert kwargs['remappings'] == list(node.remappings)
        assert (kwargs['on_exit'] is not None) == node.required
        action._perform_substitutions(context)  # launch_ros's own expansion of name and remaps
        namespace = node.namespace or '<node_namespace_unspecified>'
        assert action.node_name == f'{namespace}/{node.name}'
        rules = action.expanded_remapping_rules
        assert (list(rules) if rules is not None else []) == list(node.remappings)
        assert (rules is None) == (not node.remappings)


def described(argument: Argument) -> str:
    """The description real launch gives an argument (with its choices appended)."""
    if not argument.choices:
        return argument.description
    text = argument.description if argument.description.endswith('.') else (
        argument.description + '.')
    return f'{text} Valid choices are: {list(argument.choices)}'
