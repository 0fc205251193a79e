"""The SimOps node graph: which nodes a profile starts, and how each one is configured.

One description serves ``sim.launch.py`` and ``real_robot.launch.py`` (which translate it
into ``launch_ros.actions.Node``) and the ``simops-launch`` runner (which executes it). Pure
Python: no rclpy, no launch. Executables, node names and parameters follow
docs/interfaces.md; topic names come from config/topics.yaml and, for the real arm, from
config/real_robot.yaml.

Profiles:

- ``sim``: the simulator (rendering the scene and wrist cameras unless ``cameras:=false``),
  the policy and, with ``record:=true``, the recorder. The simulator
  publishes /clock exactly when ``use_sim_time`` is true, and then every other node follows
  it; the simulator itself always runs on wall time. ``layout:=fr3_duo``: one simulator of
  two arms, and a policy (and a recorder) per arm in the arm's namespace (``left``,
  ``right``, under ``namespace``).
- ``real_robot``: ``arm_setup`` (once: the spec's collision behaviour, and with ``payload``
  a fitted payload, to the arm), the policy (DISABLED until ``~/enable``), the recorder and,
  with ``excite:=true``, excite, all remapped onto franka_ros2's topics. The arm's driver runs
  beside it (franka_bringup). ``standin:=true`` adds a simulated stand-in for the arm.

In either profile ``teleop:=spacemouse|gamepad|keyboard`` starts the teleop node, set up for
the device (:data:`~simops_bringup.arguments.TELEOP_DEVICES`), in place of the policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from simops_bringup.arguments import (
    BOOL,
    DEFAULT_MODEL,
    LAYOUTS,
    PROFILES,
    ROBOT_FIELD,
    TELEOP_DEVICES,
    Argument,
    GraphError,
    check_profile,
    declare_arguments,
    resolve_arguments,
)
from simops_bringup.arm_interfaces import ArmInterfaces, load_arm_interfaces
from simops_bringup.joint_map import joint_map
from simops_core.paths import resolve_resource
from simops_core.robot_spec import SpecError
from simops_core.topics import TopicConfigError, TopicSpec, load_topics

__all__ = ['PROFILES', 'Argument', 'GraphError', 'NodeSpec', 'ParamValue', 'build_graph',
           'launch_arguments']

ParamValue = bool | int | float | str | tuple[str, ...]
STANDIN_PARAMS = 'config/standin_robot.yaml'
# The stand-in arm's hidden physics per robot: the FR3's, or a robot's own file.
STANDIN_TRUTH = {'fr3': 'config/sim_params/standin_hidden.yaml'}
STANDIN_TRUTH_FILE = 'config/sim_params/standin_hidden_{}.yaml'
# The cameras sim.launch.py renders (cameras:=true), of config/cameras.yaml.
SIM_CAMERAS = ('scene', 'wrist')
# Topics every namespace shares: one clock, one diagnostics aggregator.
GLOBAL_TOPICS = ('clock', 'diagnostics')


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: what ``launch_ros.actions.Node`` takes, plus whether it is required.

    ``param_files`` are absolute paths, applied in order; ``parameters`` override them.
    A required node's exit ends the whole launch.
    """

    package: str
    executable: str
    name: str
    namespace: str
    param_files: tuple[str, ...]
    parameters: tuple[tuple[str, ParamValue], ...]
    remappings: tuple[tuple[str, str], ...]
    required: bool

    def parameter_dict(self) -> dict[str, bool | int | float | str | list[str]]:
        """The parameter overrides as a dict, lists for arrays (launch_ros's form)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.parameters}


def launch_arguments(profile: str) -> tuple[Argument, ...]:
    """The launch arguments of ``profile``, as the launch files declare them."""
    check_profile(profile)
    arm = load_arm_interfaces(_topics()) if profile == 'real_robot' else None
    return declare_arguments(profile, arm.command_interface if arm else '')


def build_graph(profile: str, values: Mapping[str, str] | None = None) -> tuple[NodeSpec, ...]:
    """The nodes ``profile`` starts for the launch argument ``values`` (strings, as given).

    Raises :class:`GraphError` with one line for an unknown profile or argument, a bad
    value, an inconsistent combination or an unreadable configuration file.
    """
    check_profile(profile)
    topics = _topics()
    arm = load_arm_interfaces(topics) if profile == 'real_robot' else None
    declared = declare_arguments(profile, arm.command_interface if arm else '')
    args = resolve_arguments(declared, profile, values or {})
    flags = {a.name: args[a.name] == 'true' for a in declared if a.choices == BOOL}
    namespace = '/' + args['namespace'].strip('/') if args['namespace'] else ''
    targets = {**arm.remap, 'object_pose': args['object_pose_topic']} if arm else {}
    nodes = _Nodes(namespace, topic_remappings(topics, targets, namespace))
    try:
        if arm is None:
            arms = [_Nodes(f'{namespace}/{name}',
                           topic_remappings(topics, {}, f'{namespace}/{name}'))
                    for name in LAYOUTS[args['layout']]]
            return _sim_graph(nodes, arms, args, flags)
        return _real_robot_graph(nodes, args, flags, arm)
    except SpecError as exc:
        raise GraphError(str(exc)) from None


def _topics() -> dict[str, TopicSpec]:
    try:
        return load_topics()
    except TopicConfigError as exc:
        raise GraphError(str(exc)) from None


@dataclass(frozen=True)
class _Nodes:
    """Builds the NodeSpecs of one graph: same namespace and remappings for every node."""

    namespace: str
    remappings: tuple[tuple[str, str], ...]

    def __call__(self, package: str, executable: str, name: str,
                 params: dict[str, ParamValue], files: Sequence[str] = (),
                 required: bool = True) -> NodeSpec:
        return NodeSpec(package, executable, name, self.namespace, tuple(files),
                        tuple(params.items()), self.remappings, required)

    def policy(self, args: dict[str, str], flags: dict[str, bool]) -> NodeSpec:
        return self('simops_policy', 'policy', 'policy', {
            'model_path': args['policy'], 'robot': _spec(args), 'gripper': flags['gripper'],
            'franka_ros2': args['franka_ros2'],
            'command_interface': args['command_interface'],
            'start_enabled': flags['start_enabled'], 'use_sim_time': flags['use_sim_time'],
            **({'require_promotion': True, 'calibration': args['calibration'],
                'allow_unvalidated': flags['allow_unvalidated']} if 'calibration' in args
               else {})})

    def driver(self, args: dict[str, str], flags: dict[str, bool]) -> NodeSpec:
        """What commands the arm: the policy, or with ``teleop:=<device>`` the teleop node."""
        device = TELEOP_DEVICES.get(args['teleop'])
        if device is None:
            return self.policy(args, flags)
        node = self('simops_teleop', 'teleop', 'teleop', {
            'robot': _spec(args), 'model': robot_model(args['robot']),
            'command_interface': args['command_interface'],
            'joy_layout': device['joy_layout'], 'deadman_button': device['deadman_button'],
            'gripper_button': device['gripper_button'], 'gripper': flags['gripper'],
            **({'record_buttons': device['record_buttons']} if device['record_buttons']
               else {}),
            'franka_ros2': args['franka_ros2'],
            'start_enabled': flags['start_enabled'], 'use_sim_time': flags['use_sim_time']})
        if device['joy'] == '/joy':
            return node
        return replace(node, remappings=(*node.remappings, ('/joy', str(device['joy']))))

    def recorder(self, args: dict[str, str], flags: dict[str, bool], mode: str) -> NodeSpec:
        sim_params = args.get('sim_params', '')
        return self('simops_recorder', 'record', 'recorder', {
            'root': args['record_dir'], 'robot': args['robot'], 'robot_mode': mode,
            **({'success_criterion': args['task']} if mode == 'sim' else {}),
            **({'sim_params_file': sim_params} if sim_params else {}),
            **({'allow_unvalidated': True} if flags.get('allow_unvalidated') else {}),
            **({'source': 'teleop', 'task': args['task']} if args['teleop'] != 'none'
               else {}),
            'use_sim_time': flags['use_sim_time']})


def _sim_graph(nodes: _Nodes, arms: Sequence[_Nodes], args: dict[str, str],
               flags: dict[str, bool]) -> tuple[NodeSpec, ...]:
    """One simulator; a policy (and a recorder) for each of ``arms``, or in ``nodes``."""
    sim_time = flags['use_sim_time']
    if args['sync_mode'] == 'lockstep' and not sim_time:
        raise GraphError('sync_mode:=lockstep needs use_sim_time:=true: in lockstep, time '
                         'advances only with the simulation')
    sim = nodes('simops_sim', 'sim', 'sim', {
        'model': args['model'], 'robot': _spec(args),
        **({} if arms else _joint_map(args['robot'], args['model'])),
        **({'sim_params_file': args['sim_params']} if args['sim_params'] else {}),
        'sync_mode': args['sync_mode'], 'viewer': flags['viewer'], 'gripper': flags['gripper'],
        'franka_ros2': args['franka_ros2'],
        **({'arms': LAYOUTS[args['layout']]} if arms else {}),
        **({'cameras': SIM_CAMERAS} if flags['cameras'] and not arms else {}),
        'publish_clock': sim_time, 'use_sim_time': False})
    graph = [sim]
    # Each arm records into a directory of its own: record_dir/left, record_dir/right.
    records = [str(Path(args['record_dir'], name)) for name in LAYOUTS[args['layout']]]
    for arm, record_dir in zip(arms or [nodes], records or [args['record_dir']], strict=True):
        graph.append(arm.driver(args, flags))
        if flags['record']:
            graph.append(arm.recorder({**args, 'record_dir': record_dir}, flags, 'sim'))
    return tuple(graph)


def _real_robot_graph(nodes: _Nodes, args: dict[str, str], flags: dict[str, bool],
                      arm: ArmInterfaces) -> tuple[NodeSpec, ...]:
    if flags['start_enabled'] and not flags['standin']:
        raise GraphError('start_enabled:=true is refused on a real arm; start disabled and '
                         'call ~/enable once the arm is ready')
    if flags['excite'] and flags['start_enabled']:
        raise GraphError('excite:=true with start_enabled:=true would command the arm from two '
                         'nodes; keep the policy disabled while exciting')
    graph = []
    if flags['standin']:
        graph.append(nodes('simops_sim', 'sim', 'standin', {
            'robot': _spec(args), 'model': (model := robot_model(args['robot'])),
            **_joint_map(args['robot'], model),
            'sim_params_file': standin_truth(args['robot']), 'gripper': flags['gripper'],
            'franka_ros2': args['franka_ros2'],
            'joint_state_rate': arm.joint_state_rate,
            'publish_clock': flags['use_sim_time'], 'use_sim_time': False},
            files=[_resource(STANDIN_PARAMS)]))
    # Once at bringup: the spec's collision behaviour (and a fitted payload) to the arm.
    graph.append(nodes('simops_ros', 'arm_setup', 'arm_setup', {
        'robot': _spec(args), **({'payload_file': args['payload']} if args['payload'] else {}),
        'use_sim_time': flags['use_sim_time']}, required=False))
    graph.append(nodes.driver(args, flags))
    if flags['record']:
        graph.append(nodes.recorder(args, flags, 'real'))
    if flags['excite']:
        graph.append(nodes('simops_sysid', 'excite', 'excite', {
            'robot': _spec(args), 'command_interface': arm.command_interface,
            'use_sim_time': flags['use_sim_time']}, required=False))
    return tuple(graph)


def topic_remappings(topics: Mapping[str, TopicSpec], targets: Mapping[str, str],
                     namespace: str) -> tuple[tuple[str, str], ...]:
    """Remapping rules from each topic's default name to its name in this deployment.

    ``targets`` renames topics by key (the real arm's names). In a namespace, every target
    but the :data:`GLOBAL_TOPICS` is made relative, so it resolves inside the namespace.
    """
    rules = []
    for key, topic in topics.items():
        target = targets.get(key, topic.name)
        if namespace and key not in GLOBAL_TOPICS:
            target = target.lstrip('/')
        if target != topic.name:
            rules.append((topic.name, target))
    return tuple(rules)


def _joint_map(robot: str, model: str) -> dict[str, ParamValue]:
    pairs = joint_map(robot, model)
    return {'joint_map': pairs} if pairs else {}


def standin_truth(robot: str) -> str:
    """The SimParams file of the stand-in ``robot``'s hidden physics (keyed by its names)."""
    return STANDIN_TRUTH.get(robot, STANDIN_TRUTH_FILE.format(robot))


def robot_model(robot: str) -> str:
    """The scene shipped for ``robot`` (the stand-in runs it)."""
    return DEFAULT_MODEL.replace(ROBOT_FIELD, robot)


def _spec(args: dict[str, str]) -> str:
    return f'config/robot/{args["robot"]}.yaml'


def _resource(path: str) -> str:
    try:
        return str(resolve_resource(path))
    except FileNotFoundError as exc:
        raise GraphError(str(exc)) from None
