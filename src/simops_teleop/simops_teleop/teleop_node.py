"""``ros2 run simops_teleop teleop``: drive the arm from a twist, a SpaceMouse or a gamepad.

A thin node over :mod:`simops_teleop.servo_law` (moveit_servo's rules) and the policy's
safety pipeline (:mod:`simops_core.safety`). Inputs (docs/interfaces.md): ``~/delta_twist_cmds``
(TwistStamped, base or TCP frame), ``~/delta_joint_cmds`` (JointJog), ``/joy`` (scaled by
``joy_layout``; ``deadman_button``, ``gripper_button``, ``record_buttons``) and ``~/gripper``
(SetBool: close or open the hand through the safety pipeline).

Once a period (``teleop_rate`` Hz), and as soon as an input arrives
(:mod:`simops_teleop.tick_schedule`), it turns the newest input into joint velocities at the
current target, integrates them over the period the tick covers into the next target, runs
it through ``safety.step`` and publishes it on the policy's command topic. An input older than
``input_timeout``, a released dead-man or a halting status command zero velocity: the
pipeline brakes the arm. ``~/status`` carries moveit_servo's status code,
``/teleop/operator_twist`` the twist servoed each tick, for the recording. It starts
DISABLED (:class:`simops_core.motion_supervisor.MotionSupervisor`: ``~/enable``,
``/simops/estop``). Parameters: ``config/parameters/teleop.yaml``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from control_msgs.msg import JointJog
from geometry_msgs.msg import TwistStamped
from rclpy.node import Node
from sensor_msgs.msg import Joy
from std_msgs.msg import Int8
from std_srvs.srv import SetBool

from simops_core import safety
from simops_core.command_line import EXIT_OK, ConfigError
from simops_core.franka_ros2 import franka_release
from simops_core.motion_supervisor import MotionSupervisor, stand_still
from simops_core.policy_step import StepSettings
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics
from simops_ros.arm_positions import ArmPositions
from simops_ros.arming import ModeReport, attach_motion_controls, resume
from simops_ros.declarations import declare_schema
from simops_ros.point_commands import ArmCommandPublisher
from simops_ros.qos import qos_profile
from simops_ros.scaffold import run_node
from simops_ros.thread_failure import THREAD_EXIT_CODES, ThreadFailure
from simops_sim.model_index import load_model
from simops_teleop.joy_twist import joy_twist
from simops_teleop.record_buttons import parse_record_buttons
from simops_teleop.recorder_client import RecorderButtons
from simops_teleop.servo_law import (
    ServoSettings,
    ServoStatus,
    TcpKinematics,
    jog_command,
    jog_velocities,
    twist_velocities,
)
from simops_teleop.stamped_twist import TwistPublisher
from simops_teleop.tick_schedule import TickLoop, TickSchedule

NODE_NAME = 'teleop'
STALE_STATE = 0.1   # s; an older joint state means hold
RAMP = 0.5          # s blending in from the measured position once enabled


class TeleopNode(Node):
    """Publishes servoed targets through the safety pipeline, one per period."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        s = self.settings = declare_schema(self, NODE_NAME)
        self.period = 1.0 / s.teleop_rate
        if s.lower_singularity_threshold >= s.hard_stop_singularity_threshold:
            raise ConfigError(f'parameter lower_singularity_threshold '
                              f'({s.lower_singularity_threshold:g}) must be below '
                              f'hard_stop_singularity_threshold '
                              f'({s.hard_stop_singularity_threshold:g})')
        self.spec = load_robot_spec(s.robot)
        self.kinematics = TcpKinematics(load_model(s.model), self.spec)
        self.servo = ServoSettings.from_parameters(s)
        topics = load_topics()
        # the policy's defaults: a fraction of the velocity and acceleration limits, a margin
        self.limits = safety.SafetyLimits.from_spec(self.spec, self.period,
                                                    StepSettings.velocity_scale,
                                                    StepSettings.joint_limit_margin)
        self.mapping = safety.ActionMapping.target_steps(len(self.spec.arm_joints), s.gripper)
        hand = franka_release(s.franka_ros2).gripper_action(self.spec.name) if s.gripper else None
        self._publish = ArmCommandPublisher(self, topics, s.command_interface,
                                            self.spec.arm_joints, self.period, True, hand)
        self._width: float | None = None   # the operator's hand width (m), once commanded
        self._button = False               # gripper_button held at the last /joy
        self._measured = ArmPositions(self, topics['joint_states'], self.spec, STALE_STATE)
        self._lock = threading.Lock()   # inputs and the supervisor: callbacks vs. the ticks
        self._twist = np.zeros(6)       # newest input: a twist (m/s, rad/s) or a jog (rad/s)
        self._in_tcp = self._jog = False   # the newest input: in the TCP frame; a joint jog
        self._twist_time = -np.inf      # monotonic s it arrived; -inf: none yet
        self.create_subscription(TwistStamped, '~/delta_twist_cmds', self._on_twist, 10)
        self.create_subscription(JointJog, '~/delta_joint_cmds', self._on_jog, 10)
        self.create_subscription(Joy, '/joy', self._on_joy, 10)
        self._recording = RecorderButtons(self, s.recorder, parse_record_buttons(
            s.record_buttons, {'deadman_button': s.deadman_button,
                               'gripper_button': s.gripper_button}))
        self._status = self.create_publisher(Int8, '~/status', 10)
        operator = topics['operator_twist']   # what the node servoes, for the recorder
        self._report_twist = TwistPublisher(self, operator.name, qos_profile(operator),
                                            self.spec.base_frame)
        if s.gripper:
            self.create_service(SetBool, '~/gripper', self._on_gripper)
        self._safety: safety.SafetyState | None = None
        self.supervisor = MotionSupervisor(s.start_enabled, RAMP)
        self._report_mode = ModeReport(self, self.supervisor, '~/state',
                                       qos_profile(topics['policy_state']))
        self._arm_stop = attach_motion_controls(self, self.supervisor, self._lock, topics)
        self._frames = ('', self.spec.base_frame)
        self._tcp_frame = f'{self.spec.name}_hand_tcp'
        self.failed = ThreadFailure(self)   # a dead tick thread stops the node
        schedule = TickSchedule.for_commands(self.period, s.input_timeout,
                                             self._publish.trajectory)
        self._ticks = TickLoop(schedule, self._on_tick, lambda exc: self.failed(exc, 'tick'))
        self._ticks.start()
        self.get_logger().info(
            f'servoing at {s.teleop_rate:g} Hz on {self._publish.topic} from '
            f'{self.resolve_topic_name("~/delta_twist_cmds")}, '
            f'{self.resolve_topic_name("~/delta_joint_cmds")} and /joy ({s.joy_layout}); '
            f'{self.supervisor.reason}')

    def _on_twist(self, msg: TwistStamped) -> None:
        v, w, frame = msg.twist.linear, msg.twist.angular, msg.header.frame_id
        if frame not in self._frames and frame != self._tcp_frame:
            self.get_logger().warning(f'twist in frame {frame!r}; expected '
                                      f'{self.spec.base_frame} or {self._tcp_frame}; ignored',
                                      throttle_duration_sec=2.0)
            return
        self._take(np.array([v.x, v.y, v.z, w.x, w.y, w.z], dtype=float),
                   frame == self._tcp_frame)

    def _on_gripper(self, request: SetBool.Request, response: SetBool.Response) -> Any:
        grip = self.spec.gripper
        with self._lock:
            self._width = grip.width_min if request.data else grip.width_max
        response.success, response.message = True, f'hand to {self._width:g} m'
        return response

    def _on_joy(self, msg: Joy) -> None:
        s, button = self.settings, self.settings.gripper_button
        pressed = s.gripper and 0 <= button < len(msg.buttons) and bool(msg.buttons[button])
        if pressed and not self._button:   # a press toggles the hand
            grip = self.spec.gripper
            with self._lock:
                self._width = grip.width_max if self._width == grip.width_min else grip.width_min
        self._button = pressed
        self._recording.on_joy(msg.buttons)
        twist = joy_twist(list(msg.axes), list(msg.buttons), s.joy_layout, s.deadman_button,
                          self.servo)
        if twist is None:
            self.get_logger().warning(
                f'a /joy message with {len(msg.axes)} axes and {len(msg.buttons)} buttons does '
                f'not fit joy_layout {s.joy_layout} (or has a NaN); ignored',
                throttle_duration_sec=2.0)
            return
        self._take(twist, False)

    def _on_jog(self, msg: JointJog) -> None:
        velocity, note = jog_command(list(msg.joint_names), list(msg.velocities),
                                     list(msg.displacements), self.spec.arm_joints)
        if note:
            self.get_logger().warning(f'~/delta_joint_cmds: {note}' + (
                '; ignored' if velocity is None else ''), throttle_duration_sec=2.0)
        if velocity is not None:
            self._take(velocity, False, jog=True)

    def _take(self, command: np.ndarray, in_tcp_frame: bool, jog: bool = False) -> None:
        with self._lock:
            self._twist, self._in_tcp, self._jog = command, in_tcp_frame, jog
            self._twist_time = time.monotonic()
        self._ticks.input()

    def stop(self) -> None:
        """Stop the tick thread (before the node is destroyed)."""
        self._ticks.stop()

    def _on_tick(self, covered: float) -> None:
        measured = self._measured()
        with self._lock:
            self._arm_stop.check()   # a protective stop latches FAULT
            decision = self.supervisor.tick(
                time.monotonic(), measured is not None,
                f'no joint state newer than {STALE_STATE:g} s', self._safety is not None)
            fresh = time.monotonic() - self._twist_time <= self.settings.input_timeout
            twist = self._twist if fresh else np.zeros(6)
            in_tcp, jog = self._in_tcp, self._jog and fresh
        status = ServoStatus.NO_WARNING
        if decision.run and measured is not None:
            status = self._servo(measured, twist, in_tcp, jog, decision.restart, decision.blend,
                                 covered)
        else:
            held = stand_still(self.supervisor, decision, self._safety, self.limits, self._lock)
            if held is not None:
                self._publish(held.target, self._hand(held))
            self._safety = held if held is not None or decision.publish else None
        self._status.publish(Int8(data=int(status)))
        self._report_mode()

    def _servo(self, measured: np.ndarray, twist: np.ndarray, in_tcp: bool, jog: bool,
               restart: bool, blend: float, covered: float) -> ServoStatus:
        """Publish the next target through safety (``twist``: a jog's (7,) rad/s if ``jog``)."""
        if restart:
            self._safety = resume(self, self.supervisor, self._lock, measured, self._safety,
                                  self.limits, self._measured.opening)
        if self._safety is None:
            return ServoStatus.INVALID
        if in_tcp:   # to the base frame, at the current target
            rotation = self.kinematics.rotation(self._safety.target)
            twist = np.concatenate((rotation @ twist[:3], rotation @ twist[3:]))
        result = (jog_velocities(self._safety.target, twist, self.spec, self.servo) if jog
                  else twist_velocities(self.kinematics, self._safety.target, twist,
                                        self.period, self.servo))
        action = result.velocity * covered   # over the period this tick covers (s)
        if self.mapping.gripper_index is not None:
            width = self._safety.gripper if self._width is None else self._width
            action = np.append(action, safety.width_command(width, self.limits))
        out = safety.step(self._safety, action, measured, blend, self.limits, self.mapping)
        self._safety = out.state
        self._publish(out.state.target, self._hand(out.state))
        if not jog:   # after the command: the recording's copy waits, the arm does not
            self._report_twist(twist)
        return result.status

    def _hand(self, state: safety.SafetyState) -> float | None:
        """The hand's width to send (m): the pipeline's, once the operator has set one."""
        return None if self._width is None else state.gripper


def main(args: list[str] | None = None) -> int:
    """Run the node; 0 on SIGINT, 1 if the tick thread failed, 2 on a config error."""
    return run_node(NODE_NAME, 'Teleoperate the arm: twists from ~/delta_twist_cmds or /joy '
                    'to joint targets by moveit_servo\'s rules, through the safety pipeline. '
                    'Starts DISABLED; call ~/enable to start, publish true on /simops/estop '
                    'to stop.', TeleopNode, args,
                    {EXIT_OK: 'a clean shutdown', **THREAD_EXIT_CODES},
                    exit_code=lambda node: node.failed.exit_code)
