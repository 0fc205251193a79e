"""The franka_ros2 releases SimOps can stand beside, from ``config/franka_ros2.yaml`` (no rclpy).

A real arm runs one franka_ros2 release; its names and its error recovery differ between
releases (the file cites each upstream source). :func:`franka_release` gives the one chosen
with ``franka_ros2:=v3|v2|v1`` (the newest by default): the simulator serves exactly it, and
the nodes that drive the arm use its names.

Recovery steps, run in the order a release lists them (franka_hardware/doc/index.rst):

- ``deactivate_controllers``: ``switch_controller`` deactivates the arm's controller;
- ``error_recovery``: ``/action_server/error_recovery`` clears the robot's error;
- ``activate_hardware``: ``set_hardware_component_state FrankaHardwareInterface active``;
- ``activate_controllers``: ``switch_controller`` activates the arm's controller again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simops_core.command_line import ConfigError
from simops_core.topics import TopicConfigError, load_qos
from simops_core.yaml_fields import read_yaml

RELEASES_FILE = 'config/franka_ros2.yaml'
RECOVERY_STEPS = ('deactivate_controllers', 'error_recovery', 'activate_hardware',
                  'activate_controllers')
DISTROS = ('humble', 'jazzy')
# franka_ros2's names on a single arm (no arm prefix).
HARDWARE_COMPONENT = 'FrankaHardwareInterface'   # franka_bringup's ros2_control tag
ARM_CONTROLLER = 'fr3_arm_controller'            # franka_fr3_moveit_config's JTC


# franka_msgs/msg/FrankaRobotState's robot modes (libfranka's RobotMode, in its order):
# the arm idle, moving, in reflex mode (a protective stop), user-stopped
ROBOT_MODE_IDLE, ROBOT_MODE_MOVE, ROBOT_MODE_REFLEX, ROBOT_MODE_USER_STOPPED = 1, 2, 4, 5
RECOVER_THEN_ENABLE = ('recover it (simops-recover: franka_hardware\'s recovery steps), then '
                      'call ~/enable')


def arm_stopped_reason(errors: Sequence[str]) -> str:
    """Why a node holds in FAULT while its arm is in reflex mode, naming the ``errors`` set.

    ``errors``: the franka_msgs ``Errors`` fields set (none: ``reflex``).
    """
    return (f'the arm stopped itself (protective stop: {", ".join(errors) or "reflex"}); '
            f'{RECOVER_THEN_ENABLE}')


def user_stopped_reason(released: bool = False) -> str:
    """Why a node holds in FAULT while its arm's user stop is pressed, or once ``released``.

    Pressed (robot mode USER_STOPPED), the arm aborts the motion and holds where it is
    (libfranka: "Move command aborted: User Stop pressed!"); released, it is idle until error
    recovery (franka_gazebo's model of the arm: franka_gazebo/include/franka_gazebo/
    statemachine.h:52-66, 73-78 at 09be037).
    """
    if released:
        return f"the arm's user stop was released and the arm is idle; {RECOVER_THEN_ENABLE}"
    return f"the arm's user stop is pressed; release it, {RECOVER_THEN_ENABLE}"


class ArmModeWatch:
    """Whether an arm is stopped, from the robot modes a node reads in turn (no ROS).

    The policy, teleop and excite nodes (:class:`~simops_ros.arm_stop.ArmStop`, from franka's
    robot state) and the envs' arm-stop scenarios (from the simulated arm's mode) ask it
    alike, and latch FAULT with its reason while it gives one.
    """

    def __init__(self) -> None:
        self._user_stopped = False   # read pressed since the arm was last read moving

    def read(self, robot_mode: int, errors: Sequence[str]) -> str:
        """Why the arm in ``robot_mode`` is stopped ('' when it is not).

        Reflex mode names the ``Errors`` fields set in ``errors``; USER_STOPPED is the user
        stop, pressed (libfranka sets no error for it); after it, any mode but MOVE (IDLE,
        once released) is still the user stop's, until error recovery lets the arm move.
        """
        if robot_mode == ROBOT_MODE_USER_STOPPED:
            self._user_stopped = True
            return user_stopped_reason()
        if robot_mode == ROBOT_MODE_MOVE:
            self._user_stopped = False
        if robot_mode == ROBOT_MODE_REFLEX:
            return arm_stopped_reason(errors)
        if self._user_stopped:
            return user_stopped_reason(released=True)
        return ''


# A ros2_controllers forward command controller on the arms' position interfaces (loaded by
# the user beside franka_bringup's; the simulator loads it inactive): positions streamed on
# its ~/commands are tracked by the arm's own joint-impedance loop.
POSITION_CONTROLLER = 'joint_position_controller'
CONTROLLER_MANAGER = 'controller_manager'
ACTION_SERVER = 'action_server'                  # franka_hardware's error recovery node
SERVICE_SERVER = 'service_server'                # franka_hardware's parameter services


class FrankaReleaseError(ConfigError):
    """The releases file is broken, or the chosen release is not in it."""


@dataclass(frozen=True)
class FrankaRelease:
    """One release's behaviour (fields as in ``config/franka_ros2.yaml``).

    ``gripper_node`` may hold ``{robot}`` (``fr3``, ``panda``); ``gripper_state_rate`` in Hz;
    ``recovery`` is a sequence of :data:`RECOVERY_STEPS`; ``convenience_qos`` the QoS (of
    ``config/topics.yaml``) of franka_robot_state_broadcaster's convenience topics.
    """

    name: str
    describes: str
    distro: str
    gripper_node: str
    gripper_state_rate: float
    error_deactivates_controllers: bool
    recovery: tuple[str, ...]
    convenience_qos: str

    def gripper_node_name(self, robot: str) -> str:
        """franka_gripper's node name for ``robot``: ``franka_gripper`` or ``fr3_gripper``."""
        return self.gripper_node.format(robot=robot)

    def gripper_action(self, robot: str) -> str:
        """franka_gripper's GripperCommand action, relative to the arm's namespace."""
        return f'{self.gripper_node_name(robot)}/gripper_action'

    @property
    def hardware_lifecycle(self) -> bool:
        """Whether an error leaves the hardware component unconfigured until re-activated."""
        return 'activate_hardware' in self.recovery


def load_franka_releases(path: str = RELEASES_FILE) -> tuple[str, dict[str, FrankaRelease]]:
    """The default release's name and every release of the file, by name."""
    file, raw = read_yaml(path, FrankaReleaseError, 'franka_ros2 releases file', version=1)
    releases = raw.get('releases')
    if not isinstance(releases, dict) or not releases:
        raise FrankaReleaseError(f'{file}: "releases" must be a non-empty mapping')
    parsed = {str(name): _release(file, str(name), value) for name, value in releases.items()}
    default = raw.get('default')
    if default not in parsed:
        raise FrankaReleaseError(f'{file}: "default" must name a release '
                                 f'({", ".join(parsed)}), got {default!r}')
    return default, parsed


def franka_release(name: str = '', path: str = RELEASES_FILE) -> FrankaRelease:
    """The release ``name`` (``v3``, ``v2``, ``v1``); '' = the file's default (the newest)."""
    default, releases = load_franka_releases(path)
    if not name:
        return releases[default]
    if name not in releases:
        raise FrankaReleaseError(f'unknown franka_ros2 release {name!r}; choose one of '
                                 f'{", ".join(releases)} ({RELEASES_FILE})')
    return releases[name]


def release_names(path: str = RELEASES_FILE) -> tuple[str, ...]:
    """The releases of the file, newest (the default) first."""
    default, releases = load_franka_releases(path)
    return (default, *(name for name in releases if name != default))


def _release(file: object, name: str, value: object) -> FrankaRelease:
    where = f'{file}: release {name}'
    if not isinstance(value, dict):
        raise FrankaReleaseError(f'{where} must be a mapping')
    fields = ('describes', 'distro', 'gripper_node', 'gripper_state_rate',
              'error_deactivates_controllers', 'recovery', 'convenience_qos')
    missing = [f for f in fields if f not in value]
    if missing:
        raise FrankaReleaseError(f'{where} needs {", ".join(missing)}')
    if value['distro'] not in DISTROS:
        raise FrankaReleaseError(f'{where}: distro must be one of {DISTROS}')
    rate = value['gripper_state_rate']
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise FrankaReleaseError(f'{where}: gripper_state_rate must be a positive number (Hz)')
    if not isinstance(value['error_deactivates_controllers'], bool):
        raise FrankaReleaseError(f'{where}: error_deactivates_controllers must be true or false')
    steps = value['recovery']
    if (not isinstance(steps, list) or not steps
            or any(step not in RECOVERY_STEPS for step in steps)):
        raise FrankaReleaseError(f'{where}: recovery must list steps of {RECOVERY_STEPS}')
    node = value['gripper_node']
    if not isinstance(node, str) or not node.format(robot='fr3').isidentifier():
        raise FrankaReleaseError(f'{where}: gripper_node must be a node name '
                                 '(may hold {robot})')
    try:
        load_qos(str(value['convenience_qos']))
    except TopicConfigError as exc:
        raise FrankaReleaseError(f'{where}: convenience_qos must name a QoS of the topics '
                                 f'file ({exc})') from None
    return FrankaRelease(name, str(value['describes']), value['distro'], node, float(rate),
                         value['error_deactivates_controllers'], tuple(steps),
                         str(value['convenience_qos']))
