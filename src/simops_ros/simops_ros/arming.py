"""The ROS side of :mod:`simops_core.motion_supervisor`: ``~/enable`` and the e-stop topic.

The policy node and ``excite`` attach the same two interfaces to their supervisor, so an
operator enables, disables and stops either of them the same way.
"""

from __future__ import annotations

import threading

from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Bool
from std_srvs.srv import SetBool

from simops_core.motion_supervisor import MotionSupervisor
from simops_core.topics import TopicSpec


def attach_motion_controls(node: Node, supervisor: MotionSupervisor, lock: threading.Lock,
                           estop: TopicSpec) -> None:
    """Serve ``~/enable`` (std_srvs/SetBool) and follow ``estop`` (std_msgs/Bool) on ``node``.

    Both change ``supervisor`` under ``lock`` and log what they did.
    """
    logger = node.get_logger()

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

    node.create_subscription(Bool, estop.name, on_estop,
                             QoSProfile(**estop.qos.as_profile_kwargs()))
    node.create_service(SetBool, '~/enable', on_enable)
