"""``ros2 run simops_policy policy``: a trained policy at a fixed rate behind the safety layer.

Its control thread ticks the envs' PolicyStep on deadlines, of sim time under use_sim_time.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from simops_core import safety
from simops_core.motion_supervisor import Decision, Mode, MotionSupervisor, stand_still
from simops_policy.inputs import PolicyInputs
from simops_policy.loading import load_deployment
from simops_policy.loop_stats import LoopStats
from simops_policy.scene_feeds import SceneFeeds
from simops_ros.arming import ModeReport, attach_motion_controls
from simops_ros.control_thread import raise_thread_priority, run_periodic
from simops_ros.declarations import declare_schema
from simops_ros.diagnostics import diagnostic_array, status_name
from simops_ros.point_commands import ArmCommandPublisher
from simops_ros.polled import Polled, PolledGroup, never_called
from simops_ros.qos import qos_profile
from simops_ros.scaffold import run_node
from simops_ros.spinning import spin_threaded
from simops_ros.thread_failure import THREAD_EXIT_CODES, ThreadFailure
from simops_ros.throttled import KindWarnings

NODE_NAME = 'policy'
DIAGNOSTICS_PERIOD = 1.0    # s
LEVELS = {Mode.ESTOP: 'error', Mode.FAULT: 'error', Mode.HOLD: 'warn'}


class PolicyNode(Node):
    """A policy card's model on /joint_states and poses: a command per new state, else a hold."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self._warn = KindWarnings(self.get_logger())
        self.settings = declare_schema(self, NODE_NAME, apply=self._set_live)
        self.stale_timeout = self.settings.stale_state_timeout
        self._configure()
        self._lock = threading.Lock()      # goal, supervisor and statistics
        self._goal: np.ndarray | None = None   # base frame (3,) m, from the executor thread
        self._stats, self._scheduling = LoopStats(self.period), 'default'
        self._create_interfaces()
        self._running = threading.Event()
        self._running.set()
        self.failed = ThreadFailure(self, self._running)   # a dead control thread stops it
        self._thread = self.failed.start(self._control_loop, 'control')
        self.get_logger().info(f'{self.summary}, {self.rate:g} Hz on {self._command.topic}, '
                               f'{self.supervisor.mode.value}')

    def _configure(self) -> None:
        s = self.settings
        self.rate, self.period = s.control_rate, 1.0 / s.control_rate
        loaded = load_deployment(s)
        self.spec, self.topics, self.card = loaded.spec, loaded.topics, loaded.card
        self.hand = (loaded.release.gripper_action(self.spec.name) if self.card.action.gripper
                     and s.gripper else None)   # franka_gripper's action, when commanded
        self.model, self.step, self.summary = loaded.model, loaded.step, loaded.summary()
        self.level, self.note = loaded.diagnostic_default()   # unpromoted: a warning
        self.supervisor = MotionSupervisor(s.start_enabled, s.ramp_time)
        self.inputs = PolicyInputs(self.step)

    def _set_live(self, name: str, value: Any) -> None:
        self.stale_timeout = float(value)   # the one live parameter: stale_state_timeout
        self.get_logger().info(f'{name} set to {value}')

    def _create_interfaces(self) -> None:
        def qos(key: str) -> QoSProfile:
            return qos_profile(self.topics[key])
        self._command = ArmCommandPublisher(self, self.topics, self.settings.command_interface,
                                            self.spec.arm_joints, self.period, False, self.hand)
        self._action_pub = self.create_publisher(
            Float64MultiArray, self.topics['policy_action'].name, qos('policy_action'))
        self._report_mode = ModeReport(self, self.supervisor, self.topics['policy_state'].name,
                                       qos('policy_state'))
        self._diag_pub = self.create_publisher(DiagnosticArray, self.topics['diagnostics'].name,
                                               qos('diagnostics'))
        polled = PolledGroup()
        self._joint_states = Polled(self.create_subscription(
            JointState, self.topics['joint_states'].name, never_called, qos('joint_states'),
            raw=True, callback_group=polled))
        self._feeds = SceneFeeds(self, self.topics, self.card.images, self.inputs, polled)
        self.create_subscription(PoseStamped, self.topics['goal_pose'].name, self._on_goal_pose,
                                 qos('goal_pose'))
        self._arm_stop = attach_motion_controls(self, self.supervisor, self._lock, self.topics)

    def _bad_message(self, key: str, problem: str, then: str = '') -> None:
        """Count and report a bad message on topic ``key`` (of the topics file, or a name)."""
        topic = self.topics[key].name if key in self.topics else key
        with self._lock:
            count = self._stats.fault('bad_message')
        self._warn(topic, f'ignored {topic}: {problem} ({count} bad messages so far){then}')

    def _on_goal_pose(self, msg: PoseStamped) -> None:
        pose = self.inputs.pose(msg)
        if isinstance(pose, str):
            return self._bad_message('goal_pose', pose)
        with self._lock:
            self._goal = pose[0]

    def _control_loop(self) -> None:
        self._scheduling = raise_thread_priority()
        sim_now = self._joint_states.newest_stamp if self.get_parameter(
            'use_sim_time').value else None   # ticks on the states' sim time, or the wall's
        self._period_clock = self._joint_states.stamp if sim_now else time.monotonic   # periods too
        run_periodic(self.period, self._running, self._guarded_tick, self._publish_diagnostics,
                     DIAGNOSTICS_PERIOD, self._overran, sim_now)

    def _guarded_tick(self, now: float, paced: bool) -> None:
        try:
            self._tick(now, paced)
        except Exception as exc:  # never die with the arm mid-motion
            with self._lock:
                self.supervisor.fault(f'control tick failed: {exc}')
            self.get_logger().error(f'control tick failed: {exc!r}; FAULT, holding')
        self._report_mode()   # after every tick, one that failed too

    def _overran(self, periods: int) -> None:
        with self._lock:
            self._stats.overruns += periods

    def _tick(self, now: float, paced: bool) -> None:
        """One period: poll, decide, act, publish; unpaced (short of a sim period): inputs only."""
        looked_ns = time.time_ns()   # inputs' ages count to here, not to a later pause
        self._joint_states.take_newest()
        self._feeds.take(self._bad_message)
        with self._lock:
            self._stats.ticks += 1
            self._arm_stop.check()   # a protective stop latches FAULT
            if self._goal is not None:
                self.step.raw.goal_position[:] = self._goal
            ready, not_ready = self._readiness(looked_ns)
            if ready and not paced:
                return
            decision = self.supervisor.tick(now, ready, not_ready, self.step.state is not None)
        if decision.run:
            return self._run_policy(decision)
        held = stand_still(self.supervisor, decision, self.step.state, self.step.limits, self._lock)
        if held is not None:
            self._publish_command(held)
        elif not decision.publish:   # DISABLED (only this thread times commands)
            self._stats.restart_period()
        self.step.state = held if held is not None or decision.publish else None

    def _readiness(self, looked_ns: int) -> tuple[bool, str]:
        """Whether the card's inputs are present and fresh at ``looked_ns`` (before the take)."""
        topic = self.topics['joint_states'].name
        if self._joint_states.raw is None:
            return False, f'waiting for {topic}'
        age = 1e-9 * (looked_ns - self._joint_states.received_ns)
        if age > self.stale_timeout:
            if not self.supervisor.reason.startswith('stale'):
                self._stats.fault('stale_state')
            return False, f'stale {topic} ({age:.3f} s old)'
        missing = self.inputs.missing(self._feeds.have_object, self._goal is not None)
        reason, stale = ((f'waiting for {self.topics[missing].name}', False) if missing
                         else self._feeds.not_ready(looked_ns))
        if stale and not self.supervisor.reason.startswith('stale'):
            self._stats.fault('stale_image')
        return not reason, reason

    def _run_policy(self, decision: Decision) -> None:
        """Observation, inference, safety pipeline, publish; any bad input holds instead."""
        received_ns, tick_ns = self._joint_states.received_ns, time.time_ns()
        with self._lock:
            if not (self._joint_states.fresh or decision.restart):
                self._stats.repeated_states += 1   # one command per measured state
                return
            self._stats.timing['state_age'].add(1e-9 * (tick_ns - received_ns))
        problem = self._joint_states.read(self.inputs.joint_state)
        if problem is not None:
            self._bad_message('joint_states', problem, '; holding')
            return self._stop(f'bad joint state: {problem}')
        images = self.step.builder.images.inputs
        tick = self.step.run(lambda observation: self.model.infer(observation, images),
                             decision.restart, decision.blend, self.inputs.gripper_width())
        if tick.out is None or tick.action is None:
            return self._stop(tick.problem, tick.fault)
        self._publish_command(tick.out.state)
        done_ns = time.time_ns()
        self._action_pub.publish(Float64MultiArray(data=tick.action.tolist()))
        with self._lock:
            self._stats.tick_done(received_ns, tick_ns, done_ns, tick.inference)
        if tick.out.fault:
            with self._lock:
                self._stats.fault('nonfinite_action')
                self.supervisor.hold_once('non-finite policy output')
            self._warn('nonfinite', f'policy output {tick.action.tolist()} is not finite; holding')

    def _stop(self, reason: str, fault: str | None = None) -> None:
        """Hold this tick (``fault`` None) or FAULT until ``~/enable``; publish the held target."""
        with self._lock:
            if fault is None:
                self.supervisor.hold_once(reason)
            else:
                self._stats.fault(fault)
                self.supervisor.fault(reason)
                self.get_logger().error(f'FAULT: {reason}; holding until ~/enable')
        if self.step.state is not None:
            self.step.state = safety.hold(self.step.state)
            self._publish_command(self.step.state)

    def _publish_command(self, state: safety.SafetyState) -> None:
        """Publish ``state``'s target; measure the period here, on the loop's clock."""
        self._command(state.target, state.gripper if self.hand else None)
        with self._lock:
            self._stats.command_sent(self._period_clock())

    def _publish_diagnostics(self) -> None:
        """Mode, counters and timing percentiles (:class:`~simops_policy.loop_stats.LoopStats`)."""
        with self._lock:
            mode, reason = self.supervisor.mode, self.supervisor.reason
            values = {'state': mode.value, 'reason': reason, 'control_rate_hz': self.rate,
                      'control_thread_scheduling': self._scheduling, **self._stats.values()}
        self._diag_pub.publish(diagnostic_array(
            status_name(self, 'control loop'), self.spec.name, LEVELS.get(mode, self.level),
            f'{mode.value}: {reason}{self.note}', values, self.get_clock().now().nanoseconds,
            digits=4))

    def stop(self) -> None:
        """Stop and join the control thread."""
        self._running.clear()
        self._thread.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Run the policy node; 0 on a clean shutdown, 1 if its control thread died, 2 on bad config."""
    return run_node(NODE_NAME, 'Run a TorchScript or .pt2 policy behind the safety pipeline. '
                    'Starts DISABLED unless start_enabled (simulators only); call ~/enable to '
                    'start, publish true on /simops/estop to stop.', PolicyNode, args,
                    THREAD_EXIT_CODES, spin=spin_threaded, signals=SignalHandlerOptions.NO,
                    exit_code=lambda node: node.failed.exit_code)   # control thread first


if __name__ == '__main__':
    sys.exit(main())
