"""Whether the arm has stopped itself, read from franka_robot_state_broadcaster's robot state.

A Franka arm in reflex mode (a protective stop) ignores commands until error recovery, and so
does one whose user stop was pressed (robot mode USER_STOPPED, then IDLE once released,
until the recovery lets it move), so a node that kept commanding it would resume, after the
recovery, far from where the arm stopped. :class:`ArmStop` polls the newest
``franka_msgs/FrankaRobotState`` once per control tick (no per-message callback at the
broadcaster's 1 kHz) and, while the arm is stopped, latches the node's FAULT, so it holds
until ``~/enable`` after the recovery (an enable while the arm is still stopped faults again
at the next tick). Without the topic (no franka_ros2 broadcaster) nothing is ever reported.
Only the robot mode and the current errors are read from the message's bytes
(:class:`~simops_ros.cdr_fields.FieldReader`, about 30 us, where rclpy's whole message
takes about 1 ms of the tick); bytes in another encoding than plain CDR are decoded whole.
"""

from __future__ import annotations

from collections.abc import Mapping

from franka_msgs.msg import Errors, FrankaRobotState
from rclpy.node import Node
from rclpy.serialization import deserialize_message

from simops_core.franka_ros2 import arm_stopped_reason, user_stopped_reason
from simops_core.motion_supervisor import MotionSupervisor
from simops_core.topics import TopicSpec
from simops_ros.cdr_fields import CdrError, FieldReader
from simops_ros.polled import Polled, PolledGroup, never_called
from simops_ros.qos import subscription_qos

ERROR_FLAGS = tuple(Errors.get_fields_and_field_types())
READ_STATE = FieldReader(FrankaRobotState, ('robot_mode', 'current_errors'))


def stop_reason(robot_mode: int, current_errors: Mapping[str, bool],
                user_stopped: bool = False) -> str:
    """Why an arm in ``robot_mode`` is stopped; '' when it is not.

    Reflex mode (a protective stop) names the errors set; USER_STOPPED is the arm's user
    stop, pressed (libfranka sets no error for it). ``user_stopped``: the user stop was
    read pressed since the arm was last read moving; then any mode but MOVE (idle, once
    released) is still the user stop's, until error recovery lets the arm move again.
    """
    if robot_mode == FrankaRobotState.ROBOT_MODE_USER_STOPPED:
        return user_stopped_reason()
    if robot_mode == FrankaRobotState.ROBOT_MODE_REFLEX:
        return arm_stopped_reason([name for name in ERROR_FLAGS if current_errors.get(name)])
    if user_stopped and robot_mode != FrankaRobotState.ROBOT_MODE_MOVE:
        return user_stopped_reason(released=True)
    return ''


def read_robot_mode(raw: bytes) -> tuple[int, dict[str, bool]] | None:
    """The robot mode and current errors of the serialised FrankaRobotState ``raw``.

    Both from the bytes when they are plain CDR, else from rclpy's whole message; None if
    neither can decode them.
    """
    try:
        state = READ_STATE(raw)
        return state['robot_mode'], dict(state['current_errors'])
    except CdrError:
        pass
    try:
        full = deserialize_message(raw, FrankaRobotState)
    except Exception:  # bytes rclpy cannot decode either
        return None
    return full.robot_mode, {name: getattr(full.current_errors, name) for name in ERROR_FLAGS}


class ArmStop:
    """Polls ``topic`` (FrankaRobotState) on ``node`` for ``supervisor``; see the module."""

    def __init__(self, node: Node, topic: TopicSpec, supervisor: MotionSupervisor) -> None:
        self._polled = Polled(node.create_subscription(
            FrankaRobotState, topic.name, never_called, subscription_qos(topic), raw=True,
            callback_group=PolledGroup()))
        self._supervisor = supervisor
        self.reason = ''
        self._user_stopped = False   # read pressed since the arm was last read moving

    def check(self) -> str:
        """Take the newest state; while the arm is stopped, latch the supervisor's FAULT.

        Call it under the supervisor's lock, once per tick. Returns why the arm is stopped
        ('' when it is not); an undecodable message leaves the last answer standing.
        """
        if self._polled.take_newest():
            state = read_robot_mode(self._polled.raw)
            if state is not None:   # else undecodable: the last answer stands
                mode, errors = state
                self.reason = stop_reason(mode, errors, self._user_stopped)
                if mode == FrankaRobotState.ROBOT_MODE_USER_STOPPED:
                    self._user_stopped = True
                elif mode == FrankaRobotState.ROBOT_MODE_MOVE:
                    self._user_stopped = False
        if self.reason:
            self._supervisor.fault(self.reason)
        return self.reason
