"""The arm's newest measured position, polled from ``joint_states`` at a node's tick.

For nodes that command the arm through the safety pipeline from where it is (``excite``,
``teleop``): the 1 kHz joint states are not handled per message; each tick takes the newest
one, matches the spec's arm joints by name, and says None when there is none, it is too old
or it lacks a joint. The hand's opening comes with it when the message has the finger joints
(franka_ros2's launch merges franka_gripper's states into ``joint_states``; the sim's has them).
"""

from __future__ import annotations

import time

import numpy as np
from rclpy.node import Node
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState

from simops_core.robot_spec import RobotSpec, gripper_width
from simops_core.topics import TopicSpec
from simops_ros.polled import Polled, PolledGroup, never_called
from simops_ros.qos import subscription_qos


class ArmPositions:
    """``node``'s polled subscription to ``topic`` (joint states); call it for the newest.

    ``stale`` s: an older message (by wall-clock receipt) counts as none.
    """

    def __init__(self, node: Node, topic: TopicSpec, spec: RobotSpec, stale: float) -> None:
        self._node, self._spec, self._stale_ns = node, spec, stale * 1e9
        self.polled = Polled(node.create_subscription(
            JointState, topic.name, never_called, subscription_qos(topic), raw=True,
            callback_group=PolledGroup()))
        self._columns: np.ndarray | None = None
        self._fingers: np.ndarray | None = None   # columns of the finger joints, if any
        self.opening: float | None = None   # m, the hand's opening in the newest message

    @property
    def topic(self) -> str:
        """The subscription's topic name, resolved."""
        return self.polled.subscription.topic_name

    def __call__(self) -> np.ndarray | None:
        """The newest arm position (7,) rad in the spec's order, or None (see the class)."""
        polled = self.polled
        polled.take_newest()
        if polled.raw is None or time.time_ns() - polled.received_ns > self._stale_ns:
            return None
        msg = deserialize_message(polled.raw, JointState)
        if self._columns is None:
            names = list(msg.name)
            missing = [j for j in self._spec.arm_joints if j not in names]
            if missing:
                self._node.get_logger().warning(f'joint_states lacks {missing[0]}; holding',
                                                throttle_duration_sec=1.0)
                return None
            self._columns = np.array([names.index(j) for j in self._spec.arm_joints])
            fingers = self._spec.gripper.joints
            if fingers and all(j in names for j in fingers):
                self._fingers = np.array([names.index(j) for j in fingers])
        position = np.asarray(msg.position, dtype=float)
        if position.size <= self._columns.max():
            return None
        if self._fingers is not None and position.size > self._fingers.max():
            self.opening = float(gripper_width(position[self._fingers]))
        return position[self._columns]
