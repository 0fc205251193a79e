"""``ros2 run simops_sim sim``: the MuJoCo simulation behind the real arm's topics.

A thin node over :class:`simops_sim.physics.Physics`. A dedicated physics thread steps the
model and publishes directly; the executor only serves subscriptions, services and the 1 Hz
diagnostics. Parameters, topics and services follow docs/interfaces.md.

- ``realtime``: steps are paced against absolute wall-clock deadlines (``realtime_factor``
  sim seconds per wall second; 0 runs free). A hiccup shorter than 1 s is caught up, a
  longer stall re-anchors the schedule and counts an overrun.
- ``lockstep``: each command (``joint_commands`` or ``joint_trajectory``) advances exactly
  ``control_period`` of sim time; with none for ``lockstep_timeout`` wall seconds the sim
  advances one period holding its targets. Commands queue, one per period, so the same
  seed and command sequence give bit-identical states.
- Stamps are sim time (``/clock``) when ``publish_clock`` is true; ``~/reset`` restarts sim
  time at 0. Without ``/clock`` the node stands in for a real arm, whose driver stamps on the
  ROS system clock: stamps are sim time plus an offset chosen when the realtime schedule is
  (re)anchored (start, reset, un-pause, a stall over 1 s), so a step's stamp is the system time
  it was scheduled for. A ``JointTrajectory``'s ``header.stamp`` is read on the same clock.
- ``joint_states``: names, position, velocity, effort for the arm and fingers every
  1 / ``joint_state_rate`` s of sim time; effort is the actuator torque including the
  gravity-holding torque, like Franka's measured ``tau_J`` (see :mod:`simops_sim.physics`).
  ``joint_state_noise`` (rad std, seeded with ``seed``) adds measurement noise to the
  published positions only; the physics never sees it.
- ``ee_pose`` (flange) and ``object_pose`` at 100 Hz of sim time in ``spec.base_frame``.
- A streamed ``joint_commands`` target older than ``command_timeout`` s of sim time is
  replaced by a hold of the current position; a trajectory holds its last point.
- ``diagnostics`` (1 Hz): realtime_factor achieved over the last second, step time mean and
  max (us, stepping and publishing), lag_max_ms (worst lateness against the schedule),
  joint_state_rate_hz, dropped_commands (rejected bad commands, cumulative),
  command_timeouts, overruns, paused. Level WARN when slower than 95 % of the target factor.
- ``randomize``: physics is sampled around the (fitted) params at start and on every reset
  from one generator seeded with ``seed``: damping x0.7-1.3, armature x0.8-1.2, frictionloss
  x0.5-1.5, kp and kv x0.9-1.1, link masses x0.95-1.05, object mass x0.5-2, object friction
  x0.6-1.4, command delay 0-4 ms (:class:`simops_sim.randomization.Randomization`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from simops_core.robot_spec import SpecError, load_robot_spec
from simops_core.sim_params import SimParams, SimParamsError, load_sim_params
from simops_core.topics import TopicConfigError, load_topics
from simops_ros.declarations import ParameterError, declare_parameters, describe
from simops_ros.scaffold import ConfigError, run_node
from simops_sim.joint_commands import ArmCommand, CommandError, check_command, parse_joint_command
from simops_sim.physics import ModelError, Physics, load_model, parse_joint_map
from simops_sim.trajectory_plan import (
    TrajectoryError,
    TrajectoryGoal,
    TrajectoryPlan,
    check_goal,
    goal_from_message,
)
from simops_sim.wire import ClockEncoder, JointStateEncoder, PoseStampedEncoder

NODE_NAME = 'sim'
POSE_RATE = 100.0          # Hz, /ee_pose and /object_pose
VIEWER_RATE = 60.0         # Hz
MAX_LAG = 1.0              # s behind schedule before giving up catching up (re-anchor)
WARN_PERIOD = 1.0          # s between repeated warnings about bad commands
MAX_STAMP_OFFSET = 60.0  # s a trajectory may start ahead of, or end behind, sim time
NUMBER = re.compile(r'[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?|nan|inf')



@dataclass
class Counters:
    """Physics-thread statistics, read by the diagnostics timer."""

    steps: int = 0
    step_wall: float = 0.0           # s of wall time spent stepping and publishing
    step_wall_max: float = 0.0
    joint_states: int = 0
    dropped_commands: int = 0
    command_timeouts: int = 0
    overruns: int = 0
    divergences: int = 0             # unstable states caught and reset to the keyframe
    last_divergence: str = ''
    lag_max: float = 0.0             # s, worst lateness of a step against its wall deadline
    window_wall: float = field(default_factory=time.monotonic)
    window_sim: float = 0.0


class SimNode(Node):
    """Publishes the simulated arm like franka_ros2 and accepts the real stack's commands."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self._declare_parameters()
        self._configure()
        self._lock = threading.Lock()          # physics, plan, inbox and counters
        self._wakeup = threading.Condition(self._lock)   # a command, un-pause or stop
        self._inbox: deque[ArmCommand | TrajectoryGoal] = deque()
        self._running = threading.Event()
        self.failure: BaseException | None = None  # an unexpected error in the physics thread
        self._paused = False
        self._plan: TrajectoryPlan | None = None
        self._streaming = False                # a /joint_commands target is active
        self._last_command = 0.0               # sim time of the last accepted command
        self._plan_target = np.zeros(len(self.spec.arm_joints))   # scratch for plan samples
        self.counters = Counters()
        self._divergences_reported = 0
        self._last_warning: dict[str, float] = {}
        self._step_index = 0
        self._anchor: tuple[float, int] | None = None   # (wall time, step index) of pacing
        self._stamp_offset = 0                 # ns from sim time to stamps (module docstring)
        self._reset_physics(randomize=self.randomize)
        self._create_interfaces()
        self._thread = threading.Thread(target=self._run, name='physics', daemon=True)
        self._running.set()
        self._thread.start()
        mode = self.sync_mode if self.sync_mode == 'lockstep' else (
            f'realtime x{self.realtime_factor:g}' if self.realtime_factor else 'free-running')
        self.get_logger().info(
            f'{self.model_name}: {len(self.spec.joint_names)} joints, '
            f'{1 / self.physics.timestep:.0f} Hz physics, {mode}, joint_states at '
            f'{1 / (self._state_every * self.physics.timestep):.0f} Hz, command delay '
            f'{self.physics.delay_steps} steps')

    # --- configuration -------------------------------------------------------------------

    def _declare_parameters(self) -> None:
        declarations = [
            ('model', 'models/fr3/scene.xml', describe('MJCF scene (path or resource)')),
            ('robot', 'config/robot/fr3.yaml', describe('robot spec YAML or name')),
            ('joint_map', Parameter.Type.STRING_ARRAY,
             describe('spec_joint=model_joint pairs for models named differently')),
            ('sim_params_file', '', describe('SimParams YAML (fitted physics); empty = model '
                                             'nominal')),
            ('joint_state_rate', 1000.0, describe('joint_states rate in sim time (Hz)',
                                                  1.0, 10000.0)),
            ('realtime_factor', 1.0, describe('sim s per wall s; 0 = as fast as possible',
                                              0.0, 1000.0)),
            ('publish_clock', True, describe('publish sim time on /clock')),
            ('sync_mode', 'realtime', describe('realtime (wall-clock paced) or lockstep (one '
                                               'control period per command)')),
            ('control_period', 0.05, describe('sim time advanced per command in lockstep (s)',
                                              0.001, 10.0)),
            ('lockstep_timeout', 0.5, describe('wall time a lockstep period waits for a '
                                               'command (s)', 0.001, 3600.0)),
            ('randomize', False, describe('sample domain randomisation at start and on reset')),
            ('seed', 0, describe('randomisation seed', 0, 2**31 - 1, integer=True)),
            ('command_timeout', 0.5, describe('sim time without a command before the arm '
                                              'holds position (s)', 0.001, 3600.0)),
            ('viewer', False, describe('MuJoCo passive viewer when a display exists')),
            ('initial_keyframe', 'home', describe('keyframe at start and on reset')),
            ('joint_state_noise', 0.0, describe('std of the Gaussian noise added to published '
                                                'joint positions (rad; m for fingers), seeded '
                                                'with seed', 0.0, 0.1)),
        ]
        try:
            declare_parameters(self, declarations)
        except ParameterError as exc:
            raise ConfigError(str(exc)) from None

    def _configure(self) -> None:
        value = self.get_parameter
        self.sync_mode = value('sync_mode').value
        if self.sync_mode not in ('realtime', 'lockstep'):
            raise ConfigError(f'sync_mode {self.sync_mode!r} is unknown; use realtime or '
                              'lockstep')
        self.realtime_factor = float(value('realtime_factor').value)
        self.control_period = float(value('control_period').value)
        self.lockstep_timeout = float(value('lockstep_timeout').value)
        self.command_timeout = float(value('command_timeout').value)
        self.randomize = bool(value('randomize').value)
        self.keyframe = value('initial_keyframe').value
        self.publish_clock = bool(value('publish_clock').value)
        self.rng = np.random.default_rng(int(value('seed').value))
        self.joint_state_noise = float(value('joint_state_noise').value)
        # A generator of its own, so noise never shifts the randomisation sequence.
        self.noise_rng = np.random.default_rng([int(value('seed').value), 1])
        model_path = value('model').value
        try:
            self.spec = load_robot_spec(value('robot').value)
            self.topics = load_topics()
            params_file = value('sim_params_file').value
            params = load_sim_params(params_file) if params_file else SimParams()
            model = load_model(model_path)
            pairs = self.get_parameter_or('joint_map', Parameter('joint_map', value=[])).value
            joint_map = parse_joint_map(pairs)
            try:
                self.physics = Physics(model, self.spec, joint_map, params)
            except SimParamsError as exc:
                raise SimParamsError(f'{params_file}: {exc}') from None
            self.physics.reset_keyframe(self.keyframe)
        except SpecError as exc:
            raise ConfigError(f'{exc}; fix the robot spec or the robot parameter') from None
        except TopicConfigError as exc:
            raise ConfigError(f'{exc}; fix config/topics.yaml') from None
        except SimParamsError as exc:
            raise ConfigError(f'{exc}; fix the sim_params_file') from None
        except ModelError as exc:  # its message says how to fix it
            raise ConfigError(str(exc)) from None
        self.model_name = Path(model_path).name
        self.base_params = params
        dt = self.physics.timestep
        rate = float(value('joint_state_rate').value)
        if rate * dt > 1.0 + 1e-9:
            raise ConfigError(f'joint_state_rate {rate:g} Hz exceeds the physics rate '
                              f'{1 / dt:g} Hz; lower it')
        self._state_every = max(1, round(1.0 / (rate * dt)))
        self._pose_every = max(1, round(1.0 / (POSE_RATE * dt)))
        self._period_steps = max(1, round(self.control_period / dt))
        self._viewer = None
        if value('viewer').value:
            if os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY'):
                from mujoco import viewer

                self._viewer = viewer.launch_passive(self.physics.model, self.physics.data)
            else:
                self.get_logger().warning('viewer requested but no display is set; headless')

    def _create_interfaces(self) -> None:
        def qos(key: str) -> QoSProfile:
            return QoSProfile(**self.topics[key].qos.as_profile_kwargs())

        def name(key: str) -> str:
            return self.topics[key].name

        self._state_pub = self.create_publisher(JointState, name('joint_states'),
                                                qos('joint_states'))
        self._ee_pub = self.create_publisher(PoseStamped, name('ee_pose'), qos('ee_pose'))
        self._object_pub = self.create_publisher(PoseStamped, name('object_pose'),
                                                 qos('object_pose'))
        self._clock_pub = self.create_publisher(Clock, name('clock'), qos('clock'))
        self._diag_pub = self.create_publisher(DiagnosticArray, name('diagnostics'),
                                               qos('diagnostics'))
        self.create_subscription(Float64MultiArray, name('joint_commands'), self._on_command,
                                 qos('joint_commands'))
        self.create_subscription(JointTrajectory, name('joint_trajectory'),
                                 self._on_trajectory, qos('joint_trajectory'))
        self.create_subscription(PoseStamped, name('goal_pose'), self._on_goal,
                                 qos('goal_pose'))
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_service(SetBool, '~/pause', self._on_pause)
        self.create_timer(1.0, self._publish_diagnostics)
        self._state_wire = JointStateEncoder(self.spec.joint_names, self.spec.base_frame)
        self._clock_wire = ClockEncoder()
        self._pose_wire = PoseStampedEncoder(self.spec.base_frame)

    # --- ROS callbacks (executor thread) -------------------------------------------------

    def _warn(self, key: str, text: str) -> None:
        """Log ``text`` unless a warning with the same ``key`` was logged < 1 s ago."""
        now = time.monotonic()
        if now - self._last_warning.get(key, -WARN_PERIOD) >= WARN_PERIOD:
            self._last_warning[key] = now
            self.get_logger().warning(text)

    def _reject(self, topic: str, problem: str) -> None:
        with self._lock:
            self.counters.dropped_commands += 1
            count = self.counters.dropped_commands
        # Throttled per kind of problem (numbers left out), so one kind of fault cannot hide
        # another and a stream of distinct values cannot flood the log.
        self._warn(f'{topic}: {NUMBER.sub("#", problem)}',
                   f'rejected {topic} command: {problem}; holding the last valid target '
                   f'({count} rejected so far)')

    def _on_command(self, msg: Float64MultiArray) -> None:
        try:
            command = parse_joint_command(msg.data, self.spec.arm_joints)
            check_command(command, self.spec)
        except CommandError as exc:
            self._reject(self.topics['joint_commands'].name, str(exc))
            return
        self._enqueue(command)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            goal = goal_from_message(msg, self.spec.arm_joints)
            check_goal(goal, self.spec)
        except TrajectoryError as exc:
            self._reject(self.topics['joint_trajectory'].name, str(exc))
            return
        if goal.start is not None:
            stamp = goal.start
            with self._lock:
                start = stamp - 1e-9 * self._stamp_offset
                lead = start - self.physics.time
            lag = -lead - float(goal.times[-1])
            if max(lead, lag) > MAX_STAMP_OFFSET:  # a publisher on another clock
                clock = 'sim time (use_sim_time)' if self.publish_clock else 'system time'
                where = f'lies {lead:.0f} s ahead of' if lead > 0 else f'ends {lag:.0f} s behind'
                self._reject(self.topics['joint_trajectory'].name,
                             f'header.stamp {stamp:.3f} s {where} this node\'s clock; stamp '
                             f'with {clock} or leave it zero to start now')
                return
            goal = replace(goal, start=start)
        self._enqueue(goal)

    def _enqueue(self, command: ArmCommand | TrajectoryGoal) -> None:
        with self._lock:
            self._inbox.append(command)
            self._wakeup.notify()

    def _on_goal(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        pos = np.array([p.x, p.y, p.z])
        quat = np.array([o.w, o.x, o.y, o.z])
        norm = float(np.linalg.norm(quat))
        if not (np.all(np.isfinite(pos)) and np.isfinite(norm) and norm > 1e-9):
            self._reject(self.topics['goal_pose'].name, 'non-finite position or zero quaternion')
            return
        with self._lock:
            self.physics.set_goal_pose(pos, quat / norm)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            self._reset_physics(randomize=self.randomize)
            self._publish_state(force_all=True)
        response.success = True
        response.message = (f'reset to keyframe {self.keyframe!r}, sim time 0'
                            + (' with re-randomised physics' if self.randomize else ''))
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self._lock:
            self._paused = bool(request.data)
            self._anchor = None
            self._wakeup.notify()
        response.success = True
        response.message = 'paused' if request.data else 'running'
        return response

    # --- physics thread --------------------------------------------------------------------

    def _reset_physics(self, randomize: bool) -> None:
        """Back to the keyframe (sim time 0), optionally with freshly sampled physics."""
        if randomize:
            self.physics.randomize(self.rng, self.base_params)
        self.physics.reset_keyframe(self.keyframe)
        self._plan = None
        self._streaming = False
        self._inbox.clear()
        self._step_index = 0
        self._anchor = None
        self._anchor_stamps()

    def _anchor_stamps(self) -> None:
        """Without /clock, map the current sim time onto the system clock's now."""
        if not self.publish_clock:
            self._stamp_offset = (self.get_clock().now().nanoseconds
                                  - round(self.physics.time * 1e9))

    def _apply(self, command: ArmCommand | TrajectoryGoal) -> None:
        now = self.physics.time
        self._last_command = now
        if isinstance(command, ArmCommand):
            self._plan = None
            self._streaming = True
            self.physics.set_arm_target(command.arm)
            if command.gripper_width is not None:
                self.physics.set_gripper_width(command.gripper_width)
        else:
            self._streaming = False
            start = now if command.start is None else command.start
            self._plan = TrajectoryPlan(command, start, self.physics.arm_target)

    def _control_and_step(self) -> None:
        """One physics step: trajectory sampling / timeout hold, step, publish when due."""
        physics = self.physics
        if self._plan is not None:
            if self._plan.sample(physics.time, self._plan_target):
                self._plan = None
            physics.set_arm_target(self._plan_target)
        elif self._streaming and physics.time - self._last_command > self.command_timeout:
            physics.hold()
            self._streaming = False
            self.counters.command_timeouts += 1
        before = physics.time
        physics.step()
        problem = physics.diverged()
        if problem is not None:  # never publish a diverged state: back to the keyframe
            physics.recover(self.keyframe, before + physics.timestep)
            self._plan = None
            self._streaming = False
            self.counters.divergences += 1
            self.counters.last_divergence = problem
            self._warn('diverged', f'physics diverged ({problem}); reset to keyframe '
                                   f'{self.keyframe!r}, holding it ({self.counters.divergences} '
                                   'so far)')
        self._step_index += 1
        self._publish_state()

    def _publish_state(self, force_all: bool = False) -> None:
        index = self._step_index
        if force_all or index % self._state_every == 0:
            nanoseconds = self._stamp_ns()
            self.physics.read_joints(self._state_wire.rows)
            if self.joint_state_noise:
                position = self._state_wire.rows[0]
                position += self.noise_rng.normal(0.0, self.joint_state_noise, position.size)
            self._state_pub.publish(self._state_wire.encode(nanoseconds))
            self.counters.joint_states += 1
            if self.publish_clock:
                self._clock_pub.publish(self._clock_wire.encode(nanoseconds))
        if force_all or index % self._pose_every == 0:
            nanoseconds = self._stamp_ns()
            bodies = self.physics.index
            pos, quat = self.physics.body_pose(bodies.flange_body)
            self._ee_pub.publish(self._pose_wire.encode(nanoseconds, pos, quat))
            if bodies.object_body >= 0:
                pos, quat = self.physics.body_pose(bodies.object_body)
                self._object_pub.publish(self._pose_wire.encode(nanoseconds, pos, quat))

    def _stamp_ns(self) -> int:
        """Stamp (ns) of the current physics state: sim time, or its scheduled system time."""
        return round(self.physics.time * 1e9) + self._stamp_offset

    def _stamp(self) -> Time:
        nanoseconds = self._stamp_ns()
        return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)

    def _run(self) -> None:
        with self._lock:
            self._publish_state(force_all=True)
        try:
            if self.sync_mode == 'lockstep':
                self._run_lockstep()
            else:
                self._run_realtime()
        except Exception as exc:  # stop the node rather than run on without physics
            if self.context.ok() and self._running.is_set():
                self.failure = exc
                self.get_logger().fatal(f'physics thread failed: {exc!r}')
                rclpy.try_shutdown(context=self.context)

    def _timed_step(self) -> None:
        start = time.perf_counter()
        self._control_and_step()
        spent = time.perf_counter() - start
        counters = self.counters
        counters.steps += 1
        counters.step_wall += spent
        counters.step_wall_max = max(counters.step_wall_max, spent)

    def _run_realtime(self) -> None:
        """Step on absolute wall-clock deadlines (or as fast as possible at factor 0)."""
        dt = self.physics.timestep
        factor = self.realtime_factor
        next_viewer = 0.0
        while self._running.is_set():
            if self._paused:
                with self._lock:
                    self._wakeup.wait(0.05)
                continue
            late = 0.0
            if factor > 0:
                with self._lock:
                    if self._anchor is None:
                        self._anchor = (time.monotonic(), self._step_index)
                        self._anchor_stamps()
                    wall0, step0 = self._anchor
                    due = wall0 + (self._step_index + 1 - step0) * dt / factor
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                else:
                    late = -delay
            with self._lock:
                if late:
                    self.counters.lag_max = max(self.counters.lag_max, late)
                    if late > MAX_LAG:
                        self.counters.overruns += 1
                        self._anchor = None
                while self._inbox:
                    self._apply(self._inbox.popleft())
                self._timed_step()
            if self._viewer is not None and time.monotonic() >= next_viewer:
                next_viewer = time.monotonic() + 1.0 / VIEWER_RATE
                with self._lock:
                    self._viewer.sync()

    def _run_lockstep(self) -> None:
        """One control period per command, or per ``lockstep_timeout`` without one."""
        while self._running.is_set():
            with self._lock:
                self._wakeup.wait_for(
                    lambda: (self._inbox and not self._paused) or not self._running.is_set(),
                    self.lockstep_timeout)
                if self._paused or not self._running.is_set():
                    continue
                if self._inbox:
                    self._apply(self._inbox.popleft())
                for _ in range(self._period_steps):
                    self._timed_step()
            if self._viewer is not None:
                with self._lock:
                    self._viewer.sync()

    # --- diagnostics ---------------------------------------------------------------------------

    def _publish_diagnostics(self) -> None:
        with self._lock:
            c = self.counters
            now, sim = time.monotonic(), self.physics.time
            wall = max(now - c.window_wall, 1e-9)
            rtf = (sim - c.window_sim) / wall if sim >= c.window_sim else 0.0
            values = {
                'realtime_factor': rtf,
                'target_realtime_factor': self.realtime_factor,
                'step_time_mean_us': 1e6 * c.step_wall / max(c.steps, 1),
                'step_time_max_us': 1e6 * c.step_wall_max,
                'lag_max_ms': 1e3 * c.lag_max,
                'joint_state_rate_hz': c.joint_states / wall,
                'sim_time_s': sim,
                'dropped_commands': c.dropped_commands,
                'command_timeouts': c.command_timeouts,
                'overruns': c.overruns,
                'divergences': c.divergences,
                'last_divergence': c.last_divergence,
                'paused': self._paused,
            }
            diverged = c.divergences > self._divergences_reported
            self._divergences_reported = c.divergences
            self.counters = Counters(dropped_commands=c.dropped_commands,
                                     command_timeouts=c.command_timeouts, overruns=c.overruns,
                                     divergences=c.divergences,
                                     last_divergence=c.last_divergence,
                                     window_wall=now, window_sim=sim)
        slow = (self.sync_mode == 'realtime' and self.realtime_factor > 0 and not self._paused
                and rtf < 0.95 * self.realtime_factor)
        level, message = DiagnosticStatus.OK, 'ok'
        if diverged:
            level, message = DiagnosticStatus.ERROR, (f'physics diverged '
                                                      f'({c.last_divergence}); reset to '
                                                      f'keyframe {self.keyframe!r}')
        elif slow:
            level, message = DiagnosticStatus.WARN, 'behind real time'
        status = DiagnosticStatus(
            level=level,
            name=f'{self.get_name()}: physics', hardware_id=self.spec.name,
            message=message,
            values=[KeyValue(key=k, value=f'{v:.6g}' if isinstance(v, float) else str(v))
                    for k, v in values.items()])
        array_msg = DiagnosticArray(status=[status])
        array_msg.header.stamp = self._stamp()
        self._diag_pub.publish(array_msg)

    def stop(self) -> None:
        """Stop and join the physics thread, and close the viewer."""
        self._running.clear()
        with self._lock:
            self._wakeup.notify()
        self._thread.join(timeout=5.0)
        if self._viewer is not None:
            self._viewer.close()


def main(args: list[str] | None = None) -> int:
    """Run the simulator node; 0 on a clean shutdown, 1 if physics failed, 2 on bad config."""
    return run_node(NODE_NAME, 'Simulate the arm in MuJoCo behind the real arm\'s topics.',
                    SimNode, args, {1: 'the physics thread failed (a bug: see the log)'},
                    exit_code=lambda node: 1 if node.failure is not None else 0)


if __name__ == '__main__':
    sys.exit(main())
