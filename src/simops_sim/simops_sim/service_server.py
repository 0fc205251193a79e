"""franka_hardware's parameter services on the simulator (ROS wiring only): ``service_server``.

As franka_hardware's ``FrankaParamServiceServer`` names them
(franka_hardware/src/franka_param_service_server.cpp:35-90, v3.4.0), in the simulator's
namespace:

- ``~/set_full_collision_behavior`` (franka_msgs/SetFullCollisionBehavior) and
  ``~/set_force_torque_collision_behavior`` (one set of thresholds for every motion phase,
  libfranka's four-argument ``setCollisionBehavior``, franka_hardware/src/robot.cpp:407-425):
  ``upper_torque_thresholds_nominal`` becomes the collision reflex's threshold
  (:mod:`simops_sim.reflexes`); the other thresholds are checked and kept, as the simulator
  models only the joint reflex;
- ``~/set_load`` (franka_msgs/SetLoad): the load the firmware would compensate, checked and
  kept; the simulated arm carries the load its SimParams give it (``payload``);
- ``~/set_joint_stiffness``, ``~/set_cartesian_stiffness`` (the internal impedance
  controllers behind libfranka's position and velocity interfaces), ``~/set_tcp_frame`` and
  ``~/set_stiffness_frame`` (4x4 column-major transforms): checked and kept; the simulator
  runs fr3_arm_controller's effort law, which none of them changes.

Each refuses non-finite or negative values (a transform: not a rigid one) with ``success``
false and the reason, as libfranka refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from franka_msgs.srv import (
    SetCartesianStiffness,
    SetForceTorqueCollisionBehavior,
    SetFullCollisionBehavior,
    SetJointStiffness,
    SetLoad,
    SetStiffnessFrame,
    SetTCPFrame,
)
from rclpy.node import Node

from simops_core.franka_ros2 import SERVICE_SERVER
from simops_core.robot_spec import COLLISION_FIELDS
from simops_sim.arm_lane import ArmLane

NOMINAL_ONLY = ('lower_torque_thresholds', 'upper_torque_thresholds',
                'lower_force_thresholds', 'upper_force_thresholds')
RIGID_TOLERANCE = 1e-6   # of a transform's rotation from orthonormal, and its last row


def rigid(transform: np.ndarray) -> bool:
    """Whether ``transform`` (16,) column-major is a finite rigid 4x4 transform."""
    if not np.all(np.isfinite(transform)):
        return False
    matrix = transform.reshape(4, 4).T
    rotation = matrix[:3, :3]
    return bool(np.allclose(matrix[3], [0.0, 0.0, 0.0, 1.0], atol=RIGID_TOLERANCE)
                and np.allclose(rotation @ rotation.T, np.eye(3), atol=RIGID_TOLERANCE)
                and np.linalg.det(rotation) > 0)


class ServiceServerNode(Node):
    """Serves franka_hardware's seven parameter services for ``arm``; see the module."""

    def __init__(self, arm: ArmLane, namespace: str) -> None:
        super().__init__(SERVICE_SERVER, namespace=namespace, use_global_arguments=False)
        self._arm = arm
        self.collision_behavior: dict[str, np.ndarray] = dict(
            arm.physics.spec.collision_behavior)
        self.load: tuple[float, np.ndarray, np.ndarray] | None = None   # kg, m, kg*m^2
        self.kept: dict[str, np.ndarray] = {}   # stiffnesses and frames, by field
        self.create_service(SetFullCollisionBehavior, '~/set_full_collision_behavior',
                            self._on_collision_behavior)
        self.create_service(SetForceTorqueCollisionBehavior,
                            '~/set_force_torque_collision_behavior',
                            self._on_force_torque_collision_behavior)
        self.create_service(SetLoad, '~/set_load', self._on_load)
        for kind, name, field, check in (
                (SetJointStiffness, 'set_joint_stiffness', 'joint_stiffness', _non_negative),
                (SetCartesianStiffness, 'set_cartesian_stiffness', 'cartesian_stiffness',
                 _non_negative),
                (SetTCPFrame, 'set_tcp_frame', 'transformation', _rigid),
                (SetStiffnessFrame, 'set_stiffness_frame', 'transformation', _rigid)):
            self.create_service(kind, f'~/{name}', self._keeper(name, field, check))

    def _on_collision_behavior(self, request: Any, response: Any) -> Any:
        values = _thresholds(request, COLLISION_FIELDS, response)
        return response if values is None else self._set_collision_behavior(values, response)

    def _on_force_torque_collision_behavior(self, request: Any, response: Any) -> Any:
        given = _thresholds(request, [f'{stem}_nominal' for stem in NOMINAL_ONLY], response)
        if given is None:
            return response
        values = {}   # one set of thresholds for both motion phases
        for key in COLLISION_FIELDS:
            stem = next(s for s in NOMINAL_ONLY if key.startswith(s))
            values[key] = given[f'{stem}_nominal']
        return self._set_collision_behavior(values, response)

    def _set_collision_behavior(self, values: dict[str, np.ndarray], response: Any) -> Any:
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

    def _keeper(self, name: str, field: str,
                check: Callable[[np.ndarray], str]) -> Callable[[Any, Any], Any]:
        """A service callback that checks ``field`` and keeps it under ``name``."""
        def serve(request: Any, response: Any) -> Any:
            value = np.asarray(getattr(request, field), dtype=float)
            problem = check(value)
            if problem:
                response.success, response.error = False, f'{field} {problem}'
                return response
            self.kept[name] = value
            response.success, response.error = True, ''
            self.get_logger().info(f'{name.removeprefix("set_")} set (kept; the simulated '
                                   'arm runs fr3_arm_controller\'s effort law)')
            return response
        return serve


def _thresholds(request: Any, fields: Sequence[str], response: Any
                ) -> dict[str, np.ndarray] | None:
    """The request's ``fields`` as arrays; None, with the response refused, for a bad one."""
    values = {key: np.asarray(getattr(request, key), dtype=float) for key in fields}
    bad = [key for key, value in values.items() if _non_negative(value)]
    if bad:
        response.success, response.error = False, f'{bad[0]} must be finite and >= 0'
        return None
    return values


def _non_negative(value: np.ndarray) -> str:
    return '' if np.all(np.isfinite(value)) and np.all(value >= 0) else 'must be finite and >= 0'


def _rigid(value: np.ndarray) -> str:
    return '' if rigid(value) else ('must be a rigid 4x4 transform (column-major: rotation, '
                                    'then translation, last row 0 0 0 1)')
