"""Whether the arm has stopped itself, read from franka_robot_state_broadcaster's robot state.

A Franka arm in reflex mode (a protective stop) ignores commands until error recovery, and so
does one whose user stop was pressed (robot mode USER_STOPPED, then IDLE once released,
until the recovery lets it move), so a node that kept commanding it would resume, after the
recovery, far from where the arm stopped. :class:`ArmStop` polls the newest
``franka_msgs/FrankaRobotState`` once per control tick (no per-message callback at the
broadcaster's 1 kHz) and, while the arm is stopped
(:class:`~simops_core.franka_ros2.ArmModeWatch`, the rule), latches the node's FAULT, so it holds
until ``~/enable`` after the recovery (an enable while the arm is still stopped faults again
at the next tick). Without the topic (no franka_ros2 broadcaster) nothing is ever reported.
Only the robot mode and the current errors are read from the message's bytes
(:class:`~simops_ros.cdr_fields.FieldReader`, about 30 us, where rclpy's whole message
takes about 1 ms of the tick); bytes in another encoding than plain CDR are decoded whole.
"""

from __future__ import annotations

from franka_msgs.msg import Errors, FrankaRobotState
from rclpy.node import Node
from rclpy.serialization import deserialize_message

from simops_core.franka_ros2 import ArmModeWatch
from simops_core.motion_supervisor import MotionSupervisor
from simops_core.topics import TopicSpec
from simops_ros.cdr_fields import CdrError, FieldReader
from simops_ros.polled import Polled, PolledGroup, never_called
from simops_ros.qos import subscription_qos

ERROR_FLAGS = tuple(Errors.get_fields_and_field_types())
READ_STATE = FieldReader(FrankaRobotState, ('robot_mode', 'current_errors'))


def read_robot_mode(raw: bytes) -> tuple[int, list[str]] | None:
    """The robot mode and the current errors set of the serialised FrankaRobotState ``raw``.

    Both from the bytes when they are plain CDR, else from rclpy's whole message; None if
    neither can decode them.
    """
    try:
        state = READ_STATE(raw)
        mode, flags = state['robot_mode'], state['current_errors']
    except CdrError:
        try:
            full = deserialize_message(raw, FrankaRobotState)
        except Exception:  # bytes rclpy cannot decode either
            return None
        mode = full.robot_mode
        flags = {name: getattr(full.current_errors, name) for name in ERROR_FLAGS}
    return mode, [name for name in ERROR_FLAGS if flags.get(name)]


class ArmStop:
    """Polls ``topic`` (FrankaRobotState) on ``node`` for ``supervisor``; see the module."""

    def __init__(self, node: Node, topic: TopicSpec, supervisor: MotionSupervisor) -> None:
        self._polled = Polled(node.create_subscription(
            FrankaRobotState, topic.name, never_called, subscription_qos(topic), raw=True,
            callback_group=PolledGroup()))
        self._supervisor = supervisor
        self._watch = ArmModeWatch()
        self.reason = ''

    def check(self) -> str:
        """Take the newest state; while the arm is stopped, latch the supervisor's FAULT.

        Call it under the supervisor's lock, once per tick. Returns why the arm is stopped
        ('' when it is not); an undecodable message leaves the last answer standing.
        """
        if self._polled.take_newest():
            state = read_robot_mode(self._polled.raw)
            if state is not None:   # else undecodable: the last answer stands
                self.reason = self._watch.read(*state)
        if self.reason:
            self._supervisor.fault(self.reason)
        return self.reason
