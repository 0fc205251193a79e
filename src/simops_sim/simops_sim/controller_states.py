"""The arm's controller manager as franka_ros2 runs it, for one simulated arm (no rclpy).

On a real arm ros2_control's ``controller_manager`` holds the hardware component
(``FrankaHardwareInterface``) and the controllers; whether the arm takes commands depends on
both. :class:`ControllerStates` keeps that state for the chosen franka_ros2 release
(:class:`~simops_core.franka_ros2.FrankaRelease`) and answers what the services would:

- the hardware component is ``active`` at start. When the arm stops itself (a reflex), a
  release with in-place recovery (v2.4+ / v3.3+) leaves it ``unconfigured``
  (franka_hardware/doc/index.rst, "Behavior on Error"); Jazzy's controller manager also
  deactivates the controllers that claim it, Humble's does not (ros2_control#2318);
- ``set_hardware`` to ``active`` needs the robot error cleared first (error recovery) and,
  where the controllers stay active on an error (Humble), the arm's controller deactivated:
  the order of the recovery steps;
- ``switch``: activating a controller needs an active hardware component; STRICT fails the
  whole switch on an unknown name or a refused transition, BEST_EFFORT skips those and
  fails only when nothing could be done (controller_manager_msgs/srv/SwitchController.srv);
- the arm takes commands only while the hardware component and the controller they are
  for are both active;
- the arm runs the command mode of the interfaces its active controllers claim, as
  franka_hardware picks it (franka_hardware_interface.cpp:420-426, v3.4.0): the effort
  interface (``fr3_arm_controller``, the effort JTC) whenever a controller claims it, else
  the position interface (``joint_position_controller``, a ros2_controllers
  ForwardCommandController, loaded inactive), which the arm tracks with its own
  joint-impedance loop (:func:`controller_law`). A position controller activated beside
  the effort one takes no command: the arm stays in effort mode.

The broadcasters (``joint_state_broadcaster``, ``franka_robot_state_broadcaster``) are
listed and can be switched, but states keep coming in the simulator whatever their state.
"""

from __future__ import annotations

from dataclasses import dataclass

from simops_core.franka_ros2 import ARM_CONTROLLER, POSITION_CONTROLLER, FrankaRelease

ACTIVE, INACTIVE, UNCONFIGURED = 'active', 'inactive', 'unconfigured'
# lifecycle_msgs/msg/State ids of the states a component can be in.
LIFECYCLE_IDS = {UNCONFIGURED: 1, INACTIVE: 2, ACTIVE: 3}
BEST_EFFORT, STRICT = 1, 2   # SwitchController strictness (AUTO and FORCE_AUTO act as STRICT)


@dataclass(frozen=True)
class ControllerInfo:
    """A controller as ``list_controllers`` shows it: name, class, claimed interfaces."""

    name: str
    type: str
    command_interfaces: tuple[str, ...]
    state_interfaces: tuple[str, ...]


def franka_controllers(arm_joints: tuple[str, ...]) -> tuple[ControllerInfo, ...]:
    """The controllers franka_ros2's MoveIt bringup loads for an arm of ``arm_joints``.

    franka_fr3_moveit_config/config/fr3_ros_controllers.yaml (v2.5.0, v3.4.0): the arm's
    JointTrajectoryController on the effort interface, plus the state broadcasters of
    franka_bringup/config/controllers.yaml; and SimOps' :data:`POSITION_CONTROLLER` on the
    position interfaces (its ``~/commands``: forward_controllers_base.cpp:74, ros2_controllers
    4.9.0), which :meth:`ControllerStates.restart` leaves inactive.
    """
    states = tuple(f'{j}/{kind}' for j in arm_joints for kind in ('position', 'velocity'))
    return (
        ControllerInfo(ARM_CONTROLLER, 'joint_trajectory_controller/JointTrajectoryController',
                       tuple(f'{j}/effort' for j in arm_joints), states),
        ControllerInfo(POSITION_CONTROLLER, 'forward_command_controller/ForwardCommandController',
                       tuple(f'{j}/position' for j in arm_joints), states),
        ControllerInfo('joint_state_broadcaster',
                       'joint_state_broadcaster/JointStateBroadcaster', (), states),
        ControllerInfo('franka_robot_state_broadcaster',
                       'franka_robot_state_broadcaster/FrankaRobotStateBroadcaster', (), ()))


class ControllerStates:
    """The hardware component's and the controllers' states; see the module docstring."""

    def __init__(self, release: FrankaRelease, controllers: tuple[ControllerInfo, ...]) -> None:
        self.release = release
        self.controllers = {c.name: c for c in controllers}
        self.restart()

    def restart(self) -> None:
        """As after bringup (and the simulator's ``~/reset``): all active but the position one."""
        self.states = {name: INACTIVE if name == POSITION_CONTROLLER else ACTIVE
                       for name in self.controllers}
        self.hardware = ACTIVE

    def _claiming(self, kind: str) -> list[str]:
        """The active controllers that claim ``kind`` (``effort``, ``position``) interfaces."""
        return [name for name, info in self.controllers.items() if self.states[name] == ACTIVE
                and any(i.endswith(f'/{kind}') for i in info.command_interfaces)]

    def controller_law(self) -> str | None:
        """The arm's controller law now (``SimParams.controller``'s names); None: no command mode.

        ``joint_trajectory`` while a controller claims the effort interface, else
        ``joint_impedance`` while one claims the position interface.
        """
        if self._claiming('effort'):
            return 'joint_trajectory'
        return 'joint_impedance' if self._claiming('position') else None

    def refusal(self, controller: str = ARM_CONTROLLER) -> str:
        """Why the arm takes no command for ``controller`` now ('' when it takes them)."""
        if self.hardware != ACTIVE:
            steps = ', then '.join(self.release.recovery)
            return (f'the hardware component is {self.hardware} after an error; recover '
                    f'({steps}; franka_ros2 {self.release.name})')
        if self.states.get(controller) != ACTIVE:
            return f'{controller} is {self.states.get(controller)}; activate it'
        effort = self._claiming('effort')
        if controller not in effort and effort:
            return (f'{", ".join(effort)} claims the effort interface, which the arm runs in '
                    f'preference (franka_hardware); deactivate it to command {controller}')
        return ''

    def on_error(self) -> None:
        """The arm stopped itself: the hardware component (and perhaps controllers) stop."""
        if not self.release.hardware_lifecycle:
            return
        self.hardware = UNCONFIGURED
        if self.release.error_deactivates_controllers:
            for name, info in self.controllers.items():
                if self.states[name] == ACTIVE and info.command_interfaces:
                    self.states[name] = INACTIVE

    def set_hardware(self, target: str, error_cleared: bool) -> str:
        """Move the hardware component to ``target``; '' when done, else why not.

        ``error_cleared``: whether the robot has no error in force (error recovery ran).
        """
        if target not in LIFECYCLE_IDS:
            return f'unknown target state {target!r}; use one of {", ".join(LIFECYCLE_IDS)}'
        if target == self.hardware:
            return ''
        if target == ACTIVE:
            if not error_cleared:
                return 'the robot is still in its error; call the error recovery first'
            claimed = [n for n, info in self.controllers.items()
                       if info.command_interfaces and self.states[n] == ACTIVE]
            if claimed and self.hardware == UNCONFIGURED:
                return (f'{", ".join(claimed)} still active on a component in error; '
                        'deactivate the controllers first (Humble: ros2_control#2318)')
        else:
            for name, info in self.controllers.items():
                if info.command_interfaces and self.states[name] == ACTIVE:
                    self.states[name] = INACTIVE
        self.hardware = target
        return ''

    def switch(self, activate: list[str], deactivate: list[str], strictness: int
               ) -> tuple[bool, str]:
        """``switch_controller``: (ok, message), as the strictness judges it."""
        problems, done = [], 0
        moves = [(name, INACTIVE) for name in deactivate] + [(name, ACTIVE) for name in activate]
        for name, target in moves:
            if name not in self.controllers:
                problems.append(f'controller {name!r} is not loaded')
            elif target == ACTIVE and self.states[name] != ACTIVE and self.hardware != ACTIVE:
                problems.append(f'cannot activate {name}: the hardware component is '
                                f'{self.hardware}')
        if problems and strictness != BEST_EFFORT:
            return False, '; '.join(problems)
        for name, target in moves:
            if name in self.controllers and (target == INACTIVE or self.hardware == ACTIVE):
                done += self.states[name] != target
                self.states[name] = target
        if problems and not done:
            return False, '; '.join(problems)
        return True, '; '.join(problems) or 'switched'
