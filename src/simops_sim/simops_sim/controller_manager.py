"""ros2_control's controller manager services on the simulator (ROS wiring only).

Node ``controller_manager`` beside the simulator, in its namespace, as franka_bringup runs
``ros2_control_node``: ``~/list_controllers``, ``~/switch_controller``,
``~/list_hardware_components`` and ``~/set_hardware_component_state``
(controller_manager_msgs), with the effects :mod:`simops_sim.controller_states` gives them on
the arm. So ``ros2 control switch_controllers --deactivate fr3_arm_controller`` stops the
arm taking commands, and franka_hardware's recovery procedure runs as on the real arm.
"""

from __future__ import annotations

from typing import Any

from controller_manager_msgs.msg import ControllerState, HardwareComponentState, HardwareInterface
from controller_manager_msgs.srv import (
    ListControllers,
    ListHardwareComponents,
    SetHardwareComponentState,
    SwitchController,
)
from lifecycle_msgs.msg import State
from rclpy.node import Node

from simops_core.franka_ros2 import CONTROLLER_MANAGER, HARDWARE_COMPONENT
from simops_sim.arm_lane import ArmLane
from simops_sim.controller_states import LIFECYCLE_IDS

UPDATE_RATE = 1000   # Hz, franka_bringup's controller_manager update_rate
_LABELS = {number: label for label, number in LIFECYCLE_IDS.items()}


class ControllerManagerNode(Node):
    """Serves the controller manager of ``arm`` (its :attr:`ArmLane.control` must be set)."""

    def __init__(self, arm: ArmLane, namespace: str) -> None:
        super().__init__(CONTROLLER_MANAGER, namespace=namespace, use_global_arguments=False)
        assert arm.control is not None
        self._arm, self._control = arm, arm.control
        self.create_service(ListControllers, '~/list_controllers', self._on_list)
        self.create_service(SwitchController, '~/switch_controller', self._on_switch)
        self.create_service(ListHardwareComponents, '~/list_hardware_components',
                            self._on_components)
        self.create_service(SetHardwareComponentState, '~/set_hardware_component_state',
                            self._on_set_state)

    def _on_list(self, request: Any, response: Any) -> Any:
        with self._arm.lock:
            states = dict(self._control.states)
        for name, info in self._control.controllers.items():
            active = states[name] == 'active'
            response.controller.append(ControllerState(
                name=name, state=states[name], type=info.type, update_rate=UPDATE_RATE,
                claimed_interfaces=list(info.command_interfaces) if active else [],
                required_command_interfaces=list(info.command_interfaces),
                required_state_interfaces=list(info.state_interfaces)))
        return response

    def _on_switch(self, request: Any, response: Any) -> Any:
        response.ok, response.message = self._arm.switch(
            list(request.activate_controllers), list(request.deactivate_controllers),
            request.strictness)
        log = self.get_logger().info if response.ok else self.get_logger().error
        log(f'switch_controller (activate {list(request.activate_controllers)}, deactivate '
            f'{list(request.deactivate_controllers)}): {response.message}')
        return response

    def _on_components(self, request: Any, response: Any) -> Any:
        with self._arm.lock:
            hardware = self._control.hardware
            claimed = {i for n, c in self._control.controllers.items()
                       if self._control.states[n] == 'active' for i in c.command_interfaces}
        arm = self._control.controllers
        commands = sorted({i for c in arm.values() for i in c.command_interfaces})
        states = sorted({i for c in arm.values() for i in c.state_interfaces})
        response.component.append(HardwareComponentState(
            name=HARDWARE_COMPONENT, type='system', rw_rate=UPDATE_RATE,
            plugin_name='franka_hardware/FrankaHardwareInterface', state=_state(hardware),
            command_interfaces=[HardwareInterface(name=i, data_type='double',
                                                  is_available=hardware == 'active',
                                                  is_claimed=i in claimed) for i in commands],
            state_interfaces=[HardwareInterface(name=i, data_type='double',
                                                is_available=True) for i in states]))
        return response

    def _on_set_state(self, request: Any, response: Any) -> Any:
        target = _LABELS.get(request.target_state.id, request.target_state.label)
        if request.name != HARDWARE_COMPONENT:
            problem, now = f'no hardware component {request.name!r}', self._control.hardware
        else:
            problem, now = self._arm.set_hardware(target)
        response.ok, response.state = not problem, _state(now)
        if problem:
            self.get_logger().error(f'set_hardware_component_state {request.name} {target}: '
                                    f'{problem}')
        else:
            self.get_logger().info(f'hardware component {request.name} is {now}')
        return response


def _state(label: str) -> State:
    return State(id=LIFECYCLE_IDS[label], label=label)
