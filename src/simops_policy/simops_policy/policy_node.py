"""``ros2 run simops_policy policy``: a trained policy at a fixed rate behind the safety layer.

Thin node: observations (:mod:`simops_core.observation`), the safety pipeline
(:mod:`simops_core.safety`) and the modes (:mod:`simops_core.motion_supervisor`, shared
with ``excite``) are pure modules.
The executor thread only handles the rare inputs (goal, e-stop) and ``~/enable``. A
dedicated control thread (SCHED_FIFO where permitted) wakes on absolute deadlines, takes the
newest /joint_states and /object_pose straight from their subscriptions (no per-message
Python callback at 1 kHz), runs inference and the safety pipeline, publishes directly, and
publishes the 1 Hz diagnostics in its slack time. Parameters and topics follow docs/interfaces.md.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from simops_core import safety
from simops_core.motion_supervisor import Decision, Mode, MotionSupervisor, stand_still
from simops_core.observation import (
    JointIndex,
    MissingJointError,
)
from simops_core.paths import resolve_resource
from simops_core.policy_card import CardError, load_policy_card
from simops_core.policy_step import PolicyStep, StepSettings
from simops_core.robot_spec import SpecError, load_robot_spec
from simops_core.topics import TopicConfigError, load_topics
from simops_policy.stats import WindowStats
from simops_ros.arming import ModeReport, attach_motion_controls
from simops_ros.declarations import ParameterError, declare_parameters, describe
from simops_ros.point_commands import point_command
from simops_ros.polled import Polled, PolledGroup, never_called
from simops_ros.scaffold import ConfigError, run_node

if TYPE_CHECKING:
    from simops_policy.model import PolicyModel

NODE_NAME = 'policy'
COMMAND_INTERFACES = ('float64_array', 'joint_trajectory')
DIAGNOSTICS_PERIOD = 1.0    # s
STATS_WINDOW = 1200         # samples (60 s at 20 Hz) behind each diagnostics percentile
WARN_PERIOD = 1.0           # s between repeated warnings of one kind
CONTROL_FIFO_PRIORITY = 10  # SCHED_FIFO priority of the control thread, when permitted
CONTROL_NICE = -10          # else its nice value, when permitted
FINGER_SOURCES = frozenset({'gripper_width'})



@dataclass
class Counters:
    """Fault and event counters reported on /diagnostics."""

    ticks: int = 0
    commands: int = 0
    overruns: int = 0
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ('nonfinite_action', 'stale_state', 'bad_message', 'inference', 'out_of_domain',
         'outside_limits'), 0))


class PolicyNode(Node):
    """Runs a policy card's model on /joint_states and poses, publishes safe joint targets."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self._declare_parameters()
        self._configure()
        self._lock = threading.Lock()      # goal, supervisor, counters and statistics
        self._goal: np.ndarray | None = None   # base frame (3,) m, from the executor thread
        self._have_object = False
        self._counters = Counters()
        self._stats = {key: WindowStats(STATS_WINDOW)
                       for key in ('period', 'period_error', 'state_age', 'latency',
                                   'compute', 'inference')}
        self._last_warning: dict[str, float] = {}
        self._scheduling = 'default'
        self._last_command: float | None = None   # time.monotonic() of the last command
        self._create_interfaces()
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._control_loop, name='control', daemon=True)
        self._thread.start()
        card = self.card
        self.get_logger().info(
            f'{self.model.path.name} ({card.sha256[:12]}): {card.observation_size} observation '
            f'values ({card.history} x {card.frame_size}), {card.action.size} actions, '
            f'{self.rate:g} Hz on {self.command_topic}, {self.supervisor.mode.value}')

    # --- configuration -------------------------------------------------------------------

    def _declare_parameters(self) -> None:
        declarations = [
            ('model_path', 'models/policy/fr3_reach.pt',
             describe('TorchScript .pt or torch.export .pt2 policy (path or resource)')),
            ('card_path', '', describe('policy card YAML; empty = model path with .yaml')),
            ('robot', 'config/robot/fr3.yaml', describe('robot spec YAML or name')),
            ('control_rate', 20.0, describe('control rate (Hz); must equal the card\'s',
                                            1.0, 1000.0)),
            ('lpf_cutoff_hz', 5.0, describe('first-order low-pass cutoff on the target (Hz)',
                                            0.01, 1000.0)),
            ('velocity_scale', 0.5, describe('fraction of the spec velocity (and acceleration) '
                                             'limit allowed per step', 0.01, 1.0)),
            ('joint_limit_margin', 0.05, describe('kept clear of the position limits (rad)',
                                                  0.0, 0.5)),
            ('stale_state_timeout', 0.1, describe('older /joint_states means HOLD (s)',
                                                  0.001, 10.0)),
            ('command_interface', 'float64_array',
             describe('float64_array (/joint_commands) or joint_trajectory (one point, one '
                      'period ahead)')),
            ('start_enabled', False, describe('true only on a simulator: run without '
                                              '~/enable')),
            ('ramp_time', 2.0, describe('blend-in time from the measured position (s)',
                                        0.0, 60.0)),
        ]
        try:
            declare_parameters(self, declarations)
        except ParameterError as exc:
            raise ConfigError(str(exc)) from None

    def _configure(self) -> None:
        value = self.get_parameter
        self.rate = float(value('control_rate').value)
        self.period = 1.0 / self.rate
        self.stale_timeout = float(value('stale_state_timeout').value)
        self.interface = value('command_interface').value
        if self.interface not in COMMAND_INTERFACES:
            raise ConfigError(f'command_interface {self.interface!r} is unknown; use one of '
                              f'{", ".join(COMMAND_INTERFACES)}')
        try:
            self.spec = load_robot_spec(value('robot').value)
            self.topics = load_topics()
        except SpecError as exc:
            raise ConfigError(f'{exc}; fix the robot spec or the robot parameter') from None
        except TopicConfigError as exc:
            raise ConfigError(f'{exc}; fix config/topics.yaml') from None
        model_path = self._resolve('model_path', value('model_path').value)
        card_path = self._resolve('card_path', value('card_path').value
                                  or str(model_path.with_suffix('.yaml')))
        # torch takes seconds to import: here, inside main()'s handlers, Ctrl-C during start-up
        # ends the node cleanly instead of with a traceback.
        from simops_policy.model import ModelError, load_model

        try:
            self.card = load_policy_card(card_path, self.spec.joint_names, self.spec.arm_joints)
            self.model: PolicyModel = load_model(model_path, self.card)
        except CardError as exc:
            raise ConfigError(f'{exc}; fix the card or the card_path parameter') from None
        except ModelError as exc:
            raise ConfigError(f'{exc}; re-export the model or fix its card') from None
        if self.card.robot != self.spec.name:
            raise ConfigError(f'card {card_path.name} is for robot {self.card.robot!r}, the '
                              f'spec is {self.spec.name!r}; set the robot parameter')
        if abs(self.card.control_rate - self.rate) > 1e-9:
            raise ConfigError(f'control_rate {self.rate:g} Hz differs from the card\'s '
                              f'{self.card.control_rate:g} Hz; set control_rate:='
                              f'{self.card.control_rate:g}')
        settings = StepSettings(**{name: float(value(name).value) for name in (
            'lpf_cutoff_hz', 'velocity_scale', 'joint_limit_margin', 'ramp_time')})
        try:
            self.step = PolicyStep(self.card, self.spec, settings)
        except safety.SafetyConfigError as exc:
            raise ConfigError(f'{exc}; fix the parameter') from None
        self.limits = self.step.limits
        action = self.card.action
        self.supervisor = MotionSupervisor(bool(value('start_enabled').value),
                                           settings.ramp_time)
        self._arm_index = JointIndex(self.spec.arm_joints)
        self._finger_index = JointIndex(self.spec.gripper.joints)
        used_joints = {name for term in self.card.terms if term.source.startswith('joint_')
                       for name in term.fields}
        sources = self.step.builder.sources
        self._needs_fingers = bool(action.gripper or sources & FINGER_SOURCES
                                   or used_joints & set(self.spec.gripper.joints))
        self._needs_velocity = 'joint_velocity' in sources

    def _resolve(self, parameter: str, path: str) -> Path:
        try:
            return resolve_resource(path)
        except FileNotFoundError as exc:
            raise ConfigError(f'{parameter} {exc}; set {parameter} to an existing file') \
                from None

    def _create_interfaces(self) -> None:
        def qos(key: str) -> QoSProfile:
            return QoSProfile(**self.topics[key].qos.as_profile_kwargs())

        def name(key: str) -> str:
            return self.topics[key].name

        self.command_topic = name('joint_commands' if self.interface == 'float64_array'
                                  else 'joint_trajectory')
        message = Float64MultiArray if self.interface == 'float64_array' else JointTrajectory
        key = 'joint_commands' if self.interface == 'float64_array' else 'joint_trajectory'
        self._command_pub = self.create_publisher(message, self.command_topic, qos(key))
        self._action_pub = self.create_publisher(Float64MultiArray, name('policy_action'),
                                                 qos('policy_action'))
        self._report_mode = ModeReport(self, self.supervisor, name('policy_state'),
                                       qos('policy_state'))
        self._diag_pub = self.create_publisher(DiagnosticArray, name('diagnostics'),
                                               qos('diagnostics'))
        polled = PolledGroup()
        self._joint_states = Polled(self.create_subscription(
            JointState, name('joint_states'), never_called, qos('joint_states'), raw=True,
            callback_group=polled))
        self._object_pose = Polled(self.create_subscription(
            PoseStamped, name('object_pose'), never_called, qos('object_pose'), raw=True,
            callback_group=polled))
        self.create_subscription(PoseStamped, name('goal_pose'), self._on_goal_pose,
                                 qos('goal_pose'))
        attach_motion_controls(self, self.supervisor, self._lock, self.topics['estop'])
        if self.card.action.gripper and self.interface == 'joint_trajectory':
            self.get_logger().info('joint_trajectory carries the arm only; gripper commands '
                                   'are not sent')

    # --- inputs (goal, e-stop and ~/enable on the executor thread) -------------------------

    def _warn(self, key: str, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warning.get(key, -WARN_PERIOD) >= WARN_PERIOD:
            self._last_warning[key] = now
            self.get_logger().warning(text)

    def _count(self, fault: str) -> int:
        with self._lock:
            self._counters.faults[fault] += 1
            return self._counters.faults[fault]

    def _pose(self, msg: PoseStamped, topic: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Position (3,) m and quaternion (4,) xyzw of a base-frame pose, or None if bad."""
        p, o = msg.pose.position, msg.pose.orientation
        position = np.array([p.x, p.y, p.z])
        quaternion = np.array([o.x, o.y, o.z, o.w])
        frame = msg.header.frame_id
        problem = None
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quaternion))):
            problem = 'non-finite pose'
        elif frame and frame != self.spec.base_frame:
            problem = f'frame {frame!r} is not {self.spec.base_frame!r}'
        if problem is not None:
            count = self._count('bad_message')
            self._warn(topic, f'ignored {topic}: {problem} ({count} bad messages so far)')
            return None
        return position, quaternion

    def _on_goal_pose(self, msg: PoseStamped) -> None:
        pose = self._pose(msg, self.topics['goal_pose'].name)
        if pose is not None:
            with self._lock:
                self._goal = pose[0]

    # --- control thread ------------------------------------------------------------------

    def _control_loop(self) -> None:
        """Tick on absolute deadlines; publish diagnostics in the slack after a tick."""
        self._scheduling = _raise_thread_priority()
        period = self.period
        deadline = time.monotonic() + period
        next_diagnostics = deadline + DIAGNOSTICS_PERIOD
        while not _sleep_until(deadline, self._running):
            wake = time.monotonic()
            try:
                self._tick(wake)
            except Exception as exc:  # never die with the arm mid-motion
                with self._lock:
                    self.supervisor.fault(f'control tick failed: {exc}')
                self.get_logger().error(f'control tick failed: {exc!r}; FAULT, holding')
            if wake >= next_diagnostics:
                next_diagnostics += DIAGNOSTICS_PERIOD
                self._publish_diagnostics()
            deadline += period
            behind = time.monotonic() - deadline
            if behind > 0:  # missed whole periods: skip them, keep the phase
                missed = math.ceil(behind / period)
                deadline += missed * period
                with self._lock:
                    self._counters.overruns += missed

    def _tick(self, now: float) -> None:
        """One control period: poll inputs, let the supervisor decide, act, publish state."""
        self._joint_states.take_newest()
        if self._object_pose.take_newest():
            self._read_object_pose()
        with self._lock:
            self._counters.ticks += 1
            if self._goal is not None:
                self.step.raw.goal_position[:] = self._goal
            ready, not_ready = self._readiness()
            decision = self.supervisor.tick(now, ready, not_ready, self.step.state is not None)
        if decision.run:
            self._run_policy(decision)
        else:
            held = stand_still(self.supervisor, decision, self.step.state, self.limits,
                               self._lock)
            if held is not None:
                self._publish_command(held)
            elif not decision.publish:   # DISABLED: the next start anchors at the arm
                self._last_command = None
            self.step.state = held if held is not None or decision.publish else None
        self._report_mode()

    def _read_object_pose(self) -> None:
        topic = self.topics['object_pose'].name
        try:
            pose = self._pose(deserialize_message(self._object_pose.raw, PoseStamped), topic)
        except Exception as exc:  # bytes rclpy cannot decode
            self._warn(topic, f'ignored {topic}: undecodable message ({exc})')
            pose = None
        if pose is not None:
            self.step.raw.object_position[:], self.step.raw.object_quaternion[:] = pose
            self._have_object = True

    def _readiness(self) -> tuple[bool, str]:
        """Whether the inputs the card uses are present and the joint state is fresh."""
        topic = self.topics['joint_states'].name
        if self._joint_states.raw is None:
            return False, f'waiting for {topic}'
        age = 1e-9 * (time.time_ns() - self._joint_states.received_ns)
        if age > self.stale_timeout:
            if not self.supervisor.reason.startswith('stale'):
                self._counters.faults['stale_state'] += 1
            return False, f'stale {topic} ({age:.3f} s old)'
        sources = self.step.builder.sources
        if not self._have_object and sources & {'object_position', 'object_quaternion'}:
            return False, f'waiting for {self.topics["object_pose"].name}'
        if self._goal is None and 'goal_position' in sources:
            return False, f'waiting for {self.topics["goal_pose"].name}'
        return True, ''

    def _read_joint_state(self, msg: JointState) -> str | None:
        """Fill the observation's joint arrays from ``msg``; return a problem or None."""
        obs = self.step.raw
        arm = len(self.spec.arm_joints)
        try:
            self._arm_index.select(msg.name, msg.position, obs.joint_position[:arm])
            if self._needs_fingers:
                self._finger_index.select(msg.name, msg.position, obs.joint_position[arm:])
            if len(msg.velocity):
                self._arm_index.select(msg.name, msg.velocity, obs.joint_velocity[:arm])
                if self._needs_fingers:
                    self._finger_index.select(msg.name, msg.velocity, obs.joint_velocity[arm:])
            elif self._needs_velocity:
                return 'no velocities, and the card observes joint_velocity'
        except MissingJointError as exc:
            return f'no value for joint {exc.args[0]}'
        if not (np.all(np.isfinite(obs.joint_position))
                and np.all(np.isfinite(obs.joint_velocity))):
            return 'non-finite position or velocity'
        return None

    def _run_policy(self, decision: Decision) -> None:
        """Observation, inference, safety pipeline, publish; any bad input holds instead."""
        received_ns = self._joint_states.received_ns
        tick_ns = time.time_ns()
        with self._lock:
            self._stats['state_age'].add(1e-9 * (tick_ns - received_ns))
        try:
            problem = self._read_joint_state(deserialize_message(self._joint_states.raw,
                                                                 JointState))
        except Exception as exc:  # bytes rclpy cannot decode
            problem = f'undecodable message ({exc})'
        if problem is not None:
            count = self._count('bad_message')
            self._warn('joint_states', f'ignored {self.topics["joint_states"].name}: {problem} '
                       f'({count} bad messages so far); holding')
            self._hold(f'bad joint state: {problem}')
            return
        step = self.step
        problem = step.out_of_domain()
        if problem is not None:
            self._fault('out_of_domain', problem)
            return
        if decision.restart:
            arm = len(self.spec.arm_joints)
            width = (float(step.raw.joint_position[arm:].sum()) if self._needs_fingers
                     else self.spec.gripper.home_width)
            try:
                observation = step.restart(width)
            except safety.OutsideLimitsError as exc:
                self._fault('outside_limits', f'cannot start: {exc}; move the arm inside '
                            'its limits')
                return
        else:
            observation = step.observe()
        started = time.perf_counter()
        try:
            action = self.model.infer(observation)
        except Exception as exc:  # a model that throws must not stop the node
            self._fault('inference', f'inference failed: {exc}')
            return
        inference = time.perf_counter() - started
        out = step.command(action, decision.blend)
        self._publish_command(out.state)
        done_ns = time.time_ns()
        self._action_pub.publish(Float64MultiArray(data=action.tolist()))
        with self._lock:
            self._stats['latency'].add(1e-9 * (done_ns - received_ns))
            self._stats['compute'].add(1e-9 * (done_ns - tick_ns))
            self._stats['inference'].add(inference)
            if out.fault:
                self._counters.faults['nonfinite_action'] += 1
                self.supervisor.hold_once('non-finite policy output')
        if out.fault:
            self._warn('nonfinite', f'policy output {action.tolist()} is not finite; holding')

    def _hold(self, reason: str) -> None:
        """Hold for this tick: publish the last target again (if any)."""
        with self._lock:
            self.supervisor.hold_once(reason)
        if self.step.state is not None:
            self.step.state = safety.hold(self.step.state)
            self._publish_command(self.step.state)

    def _fault(self, counter: str, reason: str) -> None:
        with self._lock:
            self._counters.faults[counter] += 1
            self.supervisor.fault(reason)
        self.get_logger().error(f'FAULT: {reason}; holding until ~/enable')
        if self.step.state is not None:
            self.step.state = safety.hold(self.step.state)
            self._publish_command(self.step.state)

    def _publish_command(self, state: safety.SafetyState) -> None:
        """Publish ``state``'s target; the command period is measured here, at publication."""
        target = state.target.tolist()
        if self.interface == 'float64_array':
            data = target + ([state.gripper] if self.card.action.gripper else [])
            self._command_pub.publish(Float64MultiArray(data=data))
        else:
            self._command_pub.publish(point_command(
                self.spec.arm_joints, target, self.period, self.get_clock().now().to_msg()))
        now = time.monotonic()
        with self._lock:
            self._counters.commands += 1
            if self._last_command is not None:
                self._stats['period'].add(now - self._last_command)
                self._stats['period_error'].add(abs(now - self._last_command - self.period))
        self._last_command = now

    # --- diagnostics (control thread, after the tick's commands) ----------------------------

    def _publish_diagnostics(self) -> None:
        """Publish one DiagnosticStatus with the mode, the counters and timing figures.

        Timing: over the last STATS_WINDOW samples, p50/p99/max (ms) of the command period,
        its jitter |period - 1/rate|
        (``period_error``), joint-state age at the tick, observation-to-command latency,
        the tick's own compute time and inference time.
        """
        with self._lock:
            summaries = {key: stats.summary() for key, stats in self._stats.items()}
            counters = self._counters
            values: dict[str, object] = {
                'state': self.supervisor.mode.value, 'reason': self.supervisor.reason,
                'control_rate_hz': self.rate, 'control_thread_scheduling': self._scheduling,
                'ticks': counters.ticks, 'commands': counters.commands,
                'overruns': counters.overruns,
                **{f'faults_{key}': count for key, count in counters.faults.items()},
            }
            mode = self.supervisor.mode
        for key, summary in summaries.items():
            for stat in ('p50', 'p99', 'max'):
                values[f'{key}_{stat}_ms'] = 1e3 * getattr(summary, stat)
        level = (DiagnosticStatus.ERROR if mode in (Mode.ESTOP, Mode.FAULT)
                 else DiagnosticStatus.WARN if mode is Mode.HOLD else DiagnosticStatus.OK)
        status = DiagnosticStatus(
            level=level, name=f'{self.get_name()}: control loop', hardware_id=self.spec.name,
            message=f'{mode.value}: {values["reason"]}',
            values=[KeyValue(key=k, value=f'{v:.4g}' if isinstance(v, float) else str(v))
                    for k, v in values.items()])
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(msg)

    def stop(self) -> None:
        """Stop and join the control thread."""
        self._running.clear()
        self._thread.join(timeout=5.0)


def _sleep_until(deadline: float, running: threading.Event) -> bool:
    """Sleep to the absolute ``deadline`` (time.monotonic); True if told to stop meanwhile."""
    while running.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(remaining, 0.1))
    return True


def _raise_thread_priority() -> str:
    """Give the calling thread SCHED_FIFO, else a lower nice value, where permitted.

    Returns the scheduling the thread got: ``fifo``, ``nice`` or ``default``.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(CONTROL_FIFO_PRIORITY))
    except (AttributeError, PermissionError, OSError):
        pass
    else:
        return 'fifo'
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CONTROL_NICE)
    except (AttributeError, PermissionError, OSError):
        return 'default'
    return 'nice'


def main(args: list[str] | None = None) -> int:
    """Run the policy node; return 0 on a clean shutdown and 2 on a configuration error."""
    return run_node(NODE_NAME, 'Run a TorchScript or .pt2 policy behind the safety pipeline. '
                    'Starts DISABLED unless start_enabled (simulators only); call ~/enable to '
                    'start, publish true on /simops/estop to stop.', PolicyNode, args)


if __name__ == '__main__':
    sys.exit(main())
