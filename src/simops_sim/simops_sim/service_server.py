"""franka_hardware's parameter services on the simulator (ROS wiring only): ``service_server``.

As franka_hardware's ``FrankaParamServiceServer`` names them
(franka_hardware/src/franka_param_service_server.cpp:35-90, v3.4.0), in the simulator's
namespace:

- ``~/set_full_collision_behavior`` (franka_msgs/SetFullCollisionBehavior): its
  ``upper_torque_thresholds_nominal`` becomes the collision reflex's threshold
  (:mod:`simops_sim.reflexes`); the other thresholds are checked and kept, as the simulator
  models only the joint reflex;
- ``~/set_load`` (franka_msgs/SetLoad): the load the firmware would compensate, checked and
  kept; the simulated arm carries the load its SimParams give it (``payload``).

Both refuse non-finite or negative values with ``success`` false and the reason, as libfranka
refuses them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from franka_msgs.srv import SetFullCollisionBehavior, SetLoad
from rclpy.node import Node

from simops_core.franka_ros2 import SERVICE_SERVER
from simops_core.robot_spec import COLLISION_FIELDS
from simops_sim.arm_lane import ArmLane


class ServiceServerNode(Node):
    """Serves ``~/set_full_collision_behavior`` and ``~/set_load`` for ``arm``."""

    def __init__(self, arm: ArmLane, namespace: str) -> None:
        super().__init__(SERVICE_SERVER, namespace=namespace, use_global_arguments=False)
        self._arm = arm
        self.collision_behavior: dict[str, np.ndarray] = dict(
            arm.physics.spec.collision_behavior)
        self.load: tuple[float, np.ndarray, np.ndarray] | None = None   # kg, m, kg*m^2
        self.create_service(SetFullCollisionBehavior, '~/set_full_collision_behavior',
                            self._on_collision_behavior)
        self.create_service(SetLoad, '~/set_load', self._on_load)

    def _on_collision_behavior(self, request: Any, response: Any) -> Any:
        values = {key: np.asarray(getattr(request, key), dtype=float)
                  for key in COLLISION_FIELDS}
        bad = [key for key, value in values.items()
               if not np.all(np.isfinite(value)) or np.any(value < 0)]
        if bad:
            response.success, response.error = False, f'{bad[0]} must be finite and >= 0'
        else:
            self.collision_behavior = values
            self._arm.set_collision_torque(values['upper_torque_thresholds_nominal'])
            response.success, response.error = True, ''
            self.get_logger().info('collision behaviour set: joint reflex at '
                                   f'{values["upper_torque_thresholds_nominal"].tolist()} N*m')
        return response

    def _on_load(self, request: Any, response: Any) -> Any:
        com = np.asarray(request.center_of_mass, dtype=float)
        inertia = np.asarray(request.load_inertia, dtype=float)
        if not (np.isfinite(request.mass) and request.mass >= 0 and np.all(np.isfinite(com))
                and np.all(np.isfinite(inertia))):
            response.success, response.error = False, 'mass must be >= 0 and every value finite'
            return response
        self.load = (float(request.mass), com, inertia)
        response.success, response.error = True, ''
        self.get_logger().info(f'load set: {request.mass:g} kg at {com.tolist()} m')
        return response
