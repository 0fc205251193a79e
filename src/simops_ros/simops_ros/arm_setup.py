"""``ros2 run simops_ros arm_setup``: the arm's collision behaviour and load, set at bringup.

franka_hardware sets no collision behaviour when it starts, so a real arm keeps whatever it
was last given (franka_ros2's example controllers send their own). ``real_robot.launch.py``
runs this node once: it gives the arm the robot spec's ``collision_behavior`` through
``service_server/set_full_collision_behavior`` (the thresholds the simulator's collision
reflex uses, so the two stop alike) and, with ``payload_file``, the payload a fit found
(``fit --params payload``) through ``service_server/set_load``, so the firmware
compensates what the fit found. Then it exits. Parameters: config/parameters/arm_setup.yaml.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import rclpy
from franka_msgs.srv import SetFullCollisionBehavior, SetLoad
from rclpy.node import Node

from simops_core.command_line import EXIT_OK, ConfigError
from simops_core.franka_ros2 import SERVICE_SERVER
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import SimParamsError, load_sim_params
from simops_ros.declarations import declare_schema
from simops_ros.gripper_goals import ANSWER_TIMEOUT
from simops_ros.scaffold import run_node

NODE_NAME = 'arm_setup'
EXIT_REFUSED, EXIT_NO_ANSWER = 3, 4
CODES = {EXIT_OK: 'the collision behaviour (and the load) set',
         EXIT_REFUSED: 'the arm refused a setting (the log says why)',
         EXIT_NO_ANSWER: 'no franka_hardware service_server answered within timeout'}


class ArmSetup(Node):
    """Sends the collision behaviour and the load once; :attr:`code` is the exit code."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        s = self.settings = declare_schema(self, NODE_NAME)
        try:
            self.spec = load_robot_spec(s.robot)
            payload = load_sim_params(s.payload_file).payload if s.payload_file else None
        except SimParamsError as exc:
            raise ConfigError(f'{s.payload_file}: {exc}; fix the payload_file') from None
        if s.payload_file and not (payload and payload.mass):
            raise ConfigError(f'{s.payload_file} has no payload mass; fit one with '
                              '`fit --params payload`, or leave payload_file empty')
        self.payload = payload
        self.code = 0

    def run(self) -> None:
        """Call the services in turn; the first failure sets :attr:`code` and ends the run."""
        collision = SetFullCollisionBehavior.Request(**{
            key: value.tolist() for key, value in self.spec.collision_behavior.items()})
        calls: list[tuple[type, str, Any]] = [
            (SetFullCollisionBehavior, 'set_full_collision_behavior', collision)]
        if self.payload is not None:
            load = self.payload
            com = [load.com_x or 0.0, load.com_y or 0.0, load.com_z or 0.0]
            calls.append((SetLoad, 'set_load', SetLoad.Request(   # a point mass: no inertia
                mass=float(load.mass), center_of_mass=com, load_inertia=[0.0] * 9)))
        for kind, name, request in calls:
            self.code = self._call(kind, f'{SERVICE_SERVER}/{name}', request)
            if self.code:
                return

    def _call(self, kind: type, name: str, request: Any) -> int:
        client = self.create_client(kind, name)
        timeout = self.settings.timeout
        if not client.wait_for_service(timeout_sec=timeout):
            self.get_logger().error(f'no service {self.resolve_service_name(name)} within '
                                    f'{timeout:g} s; is franka_bringup running?')
            return EXIT_NO_ANSWER
        # A response can be lost right after discovery (rmw_fastrtps drops it while the
        # client's reader is unmatched: ros2/rmw_fastrtps#390, #467); both services only set
        # values, so the request goes again after ANSWER_TIMEOUT, as GripperGoals does.
        deadline = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            left = deadline - time.monotonic()
            rclpy.spin_until_future_complete(self, future, timeout_sec=min(ANSWER_TIMEOUT, left))
            if future.done() or left <= ANSWER_TIMEOUT:
                break
        if not future.done():
            self.get_logger().error(f'{name}: no answer within {timeout:g} s')
            return EXIT_NO_ANSWER
        if not future.result().success:
            self.get_logger().error(f'{name} refused: {future.result().error}')
            return EXIT_REFUSED
        self.get_logger().info(f'{self.resolve_service_name(name)}: set')
        return 0


def main(args: list[str] | None = None) -> int:
    """Run once; 0 when every setting was taken, 2 bad parameter, 3 refused, 4 no answer."""
    return run_node(NODE_NAME, 'Give the arm its collision behaviour and load, then exit.',
                    ArmSetup, args, CODES, spin=lambda node: node.run(),
                    exit_code=lambda node: node.code)


if __name__ == '__main__':
    sys.exit(main())
