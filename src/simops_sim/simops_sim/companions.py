"""The nodes beside the simulator node in its process, as franka_ros2 runs them beside the arm.

- ``action_server`` (:mod:`simops_sim.recovery_action`): ``~/error_recovery``;
- ``controller_manager`` (:mod:`simops_sim.controller_manager`): the controllers and the
  hardware component, as the chosen franka_ros2 release runs them;
- ``service_server`` (:mod:`simops_sim.service_server`): ``~/set_full_collision_behavior``
  and ``~/set_load``;
- franka_gripper (:mod:`simops_sim.gripper_action`) under the release's node name
  (``franka_gripper``, or ``<robot>_gripper`` before v2), only when the arm carries its hand
  (``end_effector: franka_hand``).

All of them serve one arm's :class:`~simops_sim.arm_lane.ArmLane` and spin in the simulator's
executor (:func:`simops_ros.spinning.spin_until_signal`).
"""

from __future__ import annotations

from rclpy.node import Node

from simops_core.franka_ros2 import FrankaRelease
from simops_core.robot_spec import RobotSpec
from simops_sim.arm_lane import ArmLane
from simops_sim.controller_manager import ControllerManagerNode
from simops_sim.controller_states import ControllerStates, franka_controllers
from simops_sim.gripper_action import GripperNode
from simops_sim.recovery_action import RecoveryNode
from simops_sim.service_server import ServiceServerNode


def companion_nodes(arm: ArmLane, spec: RobotSpec, namespace: str,
                    release: FrankaRelease) -> list[Node]:
    """The companions of a simulator that serve ``arm`` (the arm ``spec``) as ``release`` does.

    They live in the simulator node's ``namespace``, as franka_ros2's do in the arm's. The
    arm's commands then pass through the controller manager's states.
    """
    arm.control = ControllerStates(release, franka_controllers(spec.arm_joints))
    nodes: list[Node] = [RecoveryNode(arm, namespace), ControllerManagerNode(arm, namespace),
                         ServiceServerNode(arm, namespace)]
    if arm.physics.params.end_effector != 'none':
        nodes.append(GripperNode(arm, spec, namespace, release))
    return nodes

