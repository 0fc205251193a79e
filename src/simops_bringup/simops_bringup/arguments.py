"""Launch arguments of the bringup profiles: names, defaults, descriptions and allowed values.

Values are strings, as ``ros2 launch`` passes them; :func:`resolve_arguments` checks them and
fills in defaults. Pure Python: no rclpy, no launch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from simops_core.franka_ros2 import FrankaReleaseError, release_names
from simops_core.paths import ROBOT_SCENE, resolve_resource
from simops_core.tasks import DEFAULT_TASK, TASK_NAMES
from simops_core.tasks import POLICY_PATH as DEFAULT_POLICY

PROFILES = ('sim', 'real_robot')
BOOL = ('true', 'false')
ROBOT_FIELD = '{robot}'   # in a path argument: replaced by the robot argument
TASK_FIELD = '{task}'     # in the policy argument: replaced by the task argument
DEFAULT_MODEL = ROBOT_SCENE
COMMAND_INTERFACES = ('float64_array', 'joint_trajectory')
# teleop:=<device>: the teleop node in place of the policy, set up for the device. Joy
# layouts and dead-man buttons: spacenav_node's spacenav/joy (the left button) and an
# Xbox-style pad as joy_linux reads it (LB, button 4); the hand toggles on the SpaceMouse's
# right button and the pad's A; the keyboard front end (simops-teleop-keyboard, run in a
# terminal) sends twists, which need no dead-man, and its own hand and recording keys. The
# pad drives the recorder too (Start records, Back keeps, B discards, Y and X label a
# success and a failure); the SpaceMouse's two buttons are taken.
TELEOP_DEVICES: dict[str, dict[str, str | int | list[str]]] = {
    'spacemouse': {'joy_layout': 'spacenav', 'deadman_button': 0, 'gripper_button': 1,
                   'joy': '/spacenav/joy', 'record_buttons': []},
    'gamepad': {'joy_layout': 'gamepad', 'deadman_button': 4, 'gripper_button': 0,
                'joy': '/joy',
                'record_buttons': ['record=7', 'keep=6', 'discard=1', 'success=3',
                                   'failure=2']},
    'keyboard': {'joy_layout': 'spacenav', 'deadman_button': -1, 'gripper_button': -1,
                 'joy': '/joy', 'record_buttons': []},
}
# Layouts of the sim profile: one arm, or franka_ros2's fr3_duo (its arms by namespace).
LAYOUTS = {'single': (), 'fr3_duo': ('left', 'right')}
DUO_MODEL = 'models/fr3_duo/scene.xml'
_NAMESPACE = re.compile(r'/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*')


class GraphError(ValueError):
    """The launch arguments or the configuration files do not describe a valid node graph."""


@dataclass(frozen=True)
class Argument:
    """A launch argument: ``DeclareLaunchArgument`` in the launch files, ``name:=value`` in both."""

    name: str
    default: str
    description: str
    choices: tuple[str, ...] = ()


def franka_releases() -> tuple[str, ...]:
    """The franka_ros2 releases of config/franka_ros2.yaml, the newest first."""
    try:
        return release_names()
    except FrankaReleaseError as exc:
        raise GraphError(f'{exc}; restore config/franka_ros2.yaml') from None


def robot_names() -> tuple[str, ...]:
    """Robots with a spec in ``config/robot``: the allowed values of ``robot``."""
    return tuple(sorted(p.stem for p in resolve_resource('config/robot').glob('*.yaml')))


def declare_arguments(profile: str, command_interface: str) -> tuple[Argument, ...]:
    """The arguments ``profile`` declares, in declaration order.

    ``command_interface`` is the real arm's (config/real_robot.yaml); ``real_robot`` allows
    only that one.
    """
    check_profile(profile)
    real = profile == 'real_robot'
    args = [Argument('robot', 'fr3', "robot spec, config/robot/<robot>.yaml (franka_ros2's "
                     'arm_id)', robot_names()),
            Argument('gripper', 'true', 'the arm carries its Franka Hand: franka_gripper runs '
                     'and the policy commands it (franka_bringup\'s load_gripper)', BOOL),
            Argument('franka_ros2', (releases := franka_releases())[0], 'the franka_ros2 '
                     'release of the arm (config/franka_ros2.yaml): v3 (Jazzy), v2 (Humble), '
                     'v1 (before v2.0); its gripper node name, controller manager and error '
                     'recovery' + (' for the nodes that drive the arm' if real else
                                   ' the simulator serves'), releases)]
    if not real:
        args += [
            Argument('layout', 'single', 'single: one arm; fr3_duo: two FR3s in one world '
                     '(franka_ros2\'s fr3_duo), each arm and its own policy (and recorder) in '
                     'the namespace left or right, one physics and one /clock',
                     tuple(LAYOUTS)),
            Argument('model', DEFAULT_MODEL, 'MJCF scene the simulator loads ({robot} is '
                     f'replaced by the robot argument; layout:=fr3_duo: {DUO_MODEL})'),
        ]
    args += [
        Argument('task', DEFAULT_TASK, 'what the policy does: reach (the flange to /goal_pose) or '
                 'pick_place (the cube to /goal_pose); it names the default policy and, in '
                 'simulation, how the recorder labels episodes (the env\'s success criterion)',
                 TASK_NAMES),
        Argument('policy', DEFAULT_POLICY, 'TorchScript (.pt) or torch.export (.pt2) policy the '
                 'policy node runs ({robot} and {task} are replaced by those arguments)')]
    if not real:
        args += [
            Argument('sim_params', '', "SimParams YAML with fitted physics; empty = the "
                     "model's nominal physics"),
        ]
    args.append(Argument(
        'use_sim_time', 'false' if real else 'true',
        'policy, recorder and excite follow /clock, which the simulator (or the stand-in) '
        'publishes exactly when this is true', BOOL))
    if not real:
        args.append(Argument('sync_mode', 'realtime', 'realtime: wall-clock paced; lockstep: '
                             'the simulator advances once per command (needs use_sim_time)',
                             ('realtime', 'lockstep')))
    args.append(Argument(
        'teleop', 'none', 'drive the arm by hand instead of the policy: the teleop node for a '
        'SpaceMouse (spacenav_node\'s spacenav/joy), a gamepad (joy_node\'s /joy, LB held) or '
        'the keyboard (simops-teleop-keyboard in a terminal); none runs the policy',
        (*TELEOP_DEVICES, 'none')))
    args += [
        Argument('record', 'true' if real else 'false', 'start the rosbag2 recorder', BOOL),
        Argument('record_dir', 'episodes', 'directory that receives one bag per episode'),
    ]
    if not real:
        args.append(Argument('viewer', 'false', 'open the MuJoCo viewer when a display exists',
                             BOOL))
        args.append(Argument('cameras', 'true', 'render the scene and wrist cameras (RGB-D on '
                             'realsense2_camera\'s topics, config/cameras.yaml); layout '
                             'single only', BOOL))
    args += [
        Argument('namespace', '', 'ROS namespace for every node and topic (/clock and '
                 '/diagnostics stay global)'),
        Argument('start_enabled', 'false' if real else 'true',
                 'true: the policy runs at once; false: DISABLED until ~/enable'
                 + (' (true only with standin:=true)' if real else ''), BOOL),
        Argument('command_interface', command_interface if real else 'float64_array',
                 'command message: float64_array (joint_commands) or joint_trajectory',
                 (command_interface,) if real else COMMAND_INTERFACES),
    ]
    if real:
        args += [
            Argument('excite', 'false', 'also start excite, the system-identification '
                     'excitation (keep the policy disabled meanwhile)', BOOL),
            Argument('standin', 'false', 'also start a simulated stand-in for the arm with '
                     'hidden physics (config/standin_robot.yaml)', BOOL),
            Argument('calibration', '', 'SimParams YAML the arm is calibrated with: the '
                     'policy runs only with a PASS promotion record gated against it '
                     '(simops-validate --promote); empty = the nominal model'),
            Argument('allow_unvalidated', 'false', 'run a policy without a matching PASS '
                     'record anyway: /diagnostics warns and recorded bags say so', BOOL),
            Argument('payload', '', 'SimParams YAML whose payload (fit --params payload) '
                     'the arm\'s firmware is told to compensate at bringup (franka\'s '
                     'set_load); empty = none'),
            Argument('object_pose_topic', '/object_pose', 'where the object\'s pose '
                     '(geometry_msgs/PoseStamped, robot base frame) comes from on the real arm: '
                     'a perception or motion-capture topic; the stand-in publishes its cube '
                     'there'),
        ]
    return tuple(args)


def check_profile(profile: str) -> None:
    """Raise :class:`GraphError` unless ``profile`` is one of :data:`PROFILES`."""
    if profile not in PROFILES:
        raise GraphError(f'unknown profile {profile!r}; choose one of {", ".join(PROFILES)}')


def resolve_arguments(declared: tuple[Argument, ...], profile: str,
                      values: Mapping[str, str]) -> dict[str, str]:
    """Return every declared argument's value, checked, with defaults for those not given."""
    known = {arg.name: arg for arg in declared}
    for name in values:
        if name not in known:
            raise GraphError(f'unknown launch argument {name!r} for {profile}; known: '
                             f'{", ".join(known)}')
    resolved = {}
    for arg in declared:
        value = values.get(arg.name, arg.default)
        if not isinstance(value, str):
            raise GraphError(f'launch argument {arg.name} must be a string, got {value!r}')
        if arg.choices and value not in arg.choices:
            raise GraphError(f'bad value {value!r} for {arg.name}; choose one of '
                             f'{", ".join(arg.choices)}')
        resolved[arg.name] = value
    for name in ('policy', 'record_dir', 'model', 'object_pose_topic'):
        if name in resolved and not resolved[name]:
            raise GraphError(f'launch argument {name} must not be empty')
    if resolved.get('layout', 'single') != 'single':
        if resolved['robot'] != 'fr3':
            raise GraphError(f'layout:={resolved["layout"]} is two FR3s; use robot:=fr3')
        if resolved['model'] == DEFAULT_MODEL:   # not chosen (launch passes the default)
            resolved['model'] = DUO_MODEL
    for name in ('policy', 'model'):
        if name in resolved:
            resolved[name] = resolved[name].replace(ROBOT_FIELD, resolved['robot']).replace(
                TASK_FIELD, resolved['task'])
    if resolved['namespace'] and not _NAMESPACE.fullmatch(resolved['namespace']):
        raise GraphError(f'bad value {resolved["namespace"]!r} for namespace; use names of '
                         'letters, digits and _ separated by /, e.g. robot1 or /lab/robot1')
    return resolved
