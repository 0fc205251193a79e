"""The ROS side of :mod:`simops_core.motion_supervisor`: enable, e-stops, mode report.

The policy node, ``excite`` and ``teleop`` attach the same interfaces to their supervisor, so an
operator enables, disables, stops and watches either of them the same way; the arm's own
stops reach the supervisor through :class:`~simops_ros.arm_stop.ArmStop`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Bool, String
from std_srvs.srv import SetBool

from simops_core import safety
from simops_core.motion_supervisor import Mode, MotionSupervisor
from simops_core.topics import TopicSpec
from simops_ros.arm_stop import ArmStop
from simops_ros.qos import subscription_qos


def attach_motion_controls(node: Node, supervisor: MotionSupervisor, lock: threading.Lock,
                           topics: Mapping[str, TopicSpec]) -> ArmStop:
    """Serve ``~/enable`` (std_srvs/SetBool) and follow ``estop`` (std_msgs/Bool) on ``node``.

    Both change ``supervisor`` under ``lock`` and log what they did. Returns the
    :class:`~simops_ros.arm_stop.ArmStop` on ``robot_state``, which the node checks once
    per tick under ``lock``.
    """
    logger = node.get_logger()
    estop = topics['estop']

    def on_estop(msg: Bool) -> None:
        with lock:
            supervisor.set_estop(bool(msg.data))
        if msg.data:
            logger.warning('e-stop: holding the last target')

    def on_enable(request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with lock:
            response.success, response.message = supervisor.enable(bool(request.data))
        logger.info(f'~/enable {request.data}: {response.message}')
        return response

    node.create_subscription(Bool, estop.name, on_estop, subscription_qos(estop))
    node.create_service(SetBool, '~/enable', on_enable)
    return ArmStop(node, topics['robot_state'], supervisor)


class ModeReport:
    """Publishes the supervisor's mode by name on ``topic`` (latched) and logs it, on change.

    A FAULT whose reason changes (an ``~/enable`` refused by a new cause) is logged again.
    """

    def __init__(self, node: Node, supervisor: MotionSupervisor, topic: str,
                 qos: QoSProfile) -> None:
        self._supervisor = supervisor
        self._logger = node.get_logger()
        self._publisher = node.create_publisher(String, topic, qos)
        self._published: Mode | None = None
        self._reason = ''

    def __call__(self) -> None:
        """Publish and log the mode if it changed since the last call."""
        mode, reason = self._supervisor.mode, self._supervisor.reason
        if mode is not self._published:
            self._published = mode
            self._publisher.publish(String(data=mode.value))
            self._logger.info(f'{mode.value}: {reason}')
        elif mode is Mode.FAULT and reason != self._reason:
            self._logger.info(f'{mode.value}: {reason}')
        self._reason = reason


def resume(node: Node, supervisor: MotionSupervisor, lock: threading.Lock,
           measured: np.ndarray, state: safety.SafetyState | None,
           limits: safety.SafetyLimits, opening: float | None = None
           ) -> safety.SafetyState | None:
    """The pipeline state a (re)started motion drives from, or None after latching FAULT.

    A first start begins at the ``measured`` arm position (7,) rad and hand ``opening`` (m;
    None, not measured: the hand's widest), a restart holds ``state``'s target; an arm
    outside its limits latches FAULT and logs how to recover.
    """
    width = limits.gripper_max if opening is None else opening
    try:
        return safety.start(measured, width, limits) if state is None else safety.hold(state)
    except (safety.OutsideLimitsError, ValueError) as exc:
        with lock:
            supervisor.fault(f'cannot start: {exc}')
        node.get_logger().error(f'cannot start: {exc}; move the arm inside its limits and '
                                'call ~/enable')
        return None
