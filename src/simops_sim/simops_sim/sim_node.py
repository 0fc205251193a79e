"""``ros2 run simops_sim sim``: the MuJoCo simulation behind the real arm's topics.

ROS wiring over :class:`simops_sim.stepper.Stepper`, which owns the physics, the command
inbox and trajectory plan, pacing (``realtime`` or ``lockstep``), stamps and the diagnostics
values. A physics thread runs the stepper and publishes each step's frame outside the
physics lock; the executor serves the subscriptions, services and 1 Hz diagnostics.
Parameters: ``config/parameters/sim.yaml`` (table in docs/interfaces.md).

- ``joint_states``: names, position, velocity, effort for the arm and fingers every
  1 / ``joint_state_rate`` s of sim time; effort is the actuator torque including the
  gravity-holding torque, like Franka's measured ``tau_J`` (see :mod:`simops_sim.physics`).
- ``ee_pose`` (flange), ``object_pose`` (100 Hz of sim time, base frame), ``/clock`` and
  franka's robot state (:mod:`simops_sim.robot_state`); the FollowJointTrajectory action
  (:mod:`simops_sim.follow_action`) and the :mod:`simops_sim.companions` nodes.
- A bad command is rejected with a warning throttled per kind; the arm holds. A protective
  stop (:mod:`simops_sim.reflexes`) is an ERROR on ``/diagnostics``. ``randomize`` samples
  ``config/randomization.yaml`` around the params at start and on every reset.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from simops_core.command_line import ConfigError
from simops_core.robot_spec import SpecError, load_robot_spec
from simops_core.sim_params import SimParams, SimParamsError, load_sim_params
from simops_core.topics import TopicConfigError, load_topics
from simops_ros.declarations import declare_schema
from simops_ros.diagnostics import diagnostic_array
from simops_ros.qos import qos_profile
from simops_ros.scaffold import run_node
from simops_ros.spinning import spin
from simops_ros.throttled import KindWarnings
from simops_sim.companions import companion_nodes
from simops_sim.follow_action import FollowJointTrajectoryServer
from simops_sim.joint_commands import CommandError, check_command, parse_joint_command
from simops_sim.physics import ModelError, Physics, load_model, parse_joint_map
from simops_sim.randomization import default_randomization
from simops_sim.robot_state import RobotStatePublisher
from simops_sim.stepper import Frame, Stepper, Timing, open_viewer
from simops_sim.trajectory_plan import check_goal, goal_from_message
from simops_sim.wire import ClockEncoder, JointStateEncoder, PoseStampedEncoder

NODE_NAME = 'sim'


class SimNode(Node):
    """Publishes the simulated arm like franka_ros2 and accepts the real stack's commands."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self._warn = KindWarnings(self.get_logger())
        self.settings = declare_schema(self, NODE_NAME, apply=self._set_live)
        self.failure: BaseException | None = None  # an unexpected error in the physics thread
        self.stepper = self._build_stepper()
        self._create_interfaces()
        self._running = threading.Event()
        self._running.set()
        self._thread = threading.Thread(target=self._run, name='physics', daemon=True)
        self._thread.start()
        self.get_logger().info(f'{Path(self.settings.model).name}: {self.stepper.summary()}')

    def _build_stepper(self) -> Stepper:
        s = self.settings
        try:
            self.spec, self.topics = load_robot_spec(s.robot), load_topics()
            params = load_sim_params(s.sim_params_file) if s.sim_params_file else SimParams()
            params = params if s.gripper else replace(params, end_effector='none')
            try:
                physics = Physics(load_model(s.model), self.spec, parse_joint_map(s.joint_map),
                                  params, reflexes=True)
            except SimParamsError as exc:
                raise SimParamsError(f'{s.sim_params_file}: {exc}') from None
            physics.reset_keyframe(s.initial_keyframe)
        except SpecError as exc:
            raise ConfigError(f'{exc}; fix the robot spec or the robot parameter') from None
        except TopicConfigError as exc:
            raise ConfigError(f'{exc}; fix config/topics.yaml') from None
        except SimParamsError as exc:
            raise ConfigError(f'{exc}; fix the sim_params_file') from None
        except ModelError as exc:  # its message says how to fix it
            raise ConfigError(str(exc)) from None
        if s.joint_state_rate * physics.timestep > 1.0 + 1e-9:
            raise ConfigError(f'joint_state_rate {s.joint_state_rate:g} Hz exceeds the physics '
                              f'rate {1 / physics.timestep:g} Hz; lower it')
        sample = default_randomization().sampler(physics.nominal, self.spec.arm_joints,
                                                 physics.index.mass_bodies, s.control_period)
        timing = Timing(s.sync_mode, s.realtime_factor, s.control_period, s.lockstep_timeout,
                        s.command_timeout, s.joint_state_rate, s.joint_state_noise,
                        s.joint_effort_noise, s.robot_state_rate)
        system_ns = None if s.publish_clock else (lambda: self.get_clock().now().nanoseconds)
        viewer = open_viewer(physics) if s.viewer else None
        if s.viewer and viewer is None:
            self.get_logger().warning('viewer requested but no display is set; headless')
        return Stepper(physics, timing, s.initial_keyframe, sample if s.randomize else None,
                       s.seed, system_ns, self._warn, viewer)

    def _set_live(self, name: str, value: Any) -> None:
        self.stepper.set(name, value)
        self.get_logger().info(f'{name} set to {value}')

    def _create_interfaces(self) -> None:
        def qos(key: str) -> QoSProfile:
            return qos_profile(self.topics[key])

        def publisher(kind: type, key: str) -> Any:
            return self.create_publisher(kind, self.topics[key].name, qos(key))

        self._state_pub = publisher(JointState, 'joint_states')
        self._ee_pub = publisher(PoseStamped, 'ee_pose')
        self._object_pub = publisher(PoseStamped, 'object_pose')
        self._clock_pub = publisher(Clock, 'clock')
        self._diag_pub = publisher(DiagnosticArray, 'diagnostics')
        for kind, key, callback in ((Float64MultiArray, 'joint_commands', self._on_command),
                                    (JointTrajectory, 'joint_trajectory', self._on_trajectory),
                                    (PoseStamped, 'goal_pose', self._on_goal)):
            self.create_subscription(kind, self.topics[key].name, callback, qos(key))
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_service(SetBool, '~/pause', self._on_pause)
        self.create_timer(1.0, self._publish_diagnostics)
        FollowJointTrajectoryServer(self, self.stepper, self.spec, self.topics['joint_trajectory'])
        self._robot_state = RobotStatePublisher(self, self.topics['robot_state'], self.spec)
        self.companions = companion_nodes(self.stepper, self.spec, self.get_namespace())
        self._wire_lock = threading.Lock()   # the encoders: physics thread and ~/reset
        self._state_wire = JointStateEncoder(self.spec.joint_names, self.spec.base_frame)
        self._clock_wire, self._pose_wire = ClockEncoder(), PoseStampedEncoder(self.spec.base_frame)

    # --- ROS callbacks (executor thread) -------------------------------------------------

    def _reject(self, key: str, exc: CommandError) -> None:
        topic = self.topics[key].name
        count = self.stepper.count_rejected()
        self._warn(f'{topic}.{exc.kind}', f'rejected {topic} command: {exc}; holding the last '
                                          f'valid target ({count} rejected so far)')

    def _on_command(self, msg: Float64MultiArray) -> None:
        try:
            command = parse_joint_command(msg.data, self.spec.arm_joints)
            check_command(command, self.spec)
        except CommandError as exc:
            self._reject('joint_commands', exc)
            return
        self.stepper.submit(command)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            goal = goal_from_message(msg, self.spec.arm_joints)
            check_goal(goal, self.spec)
            goal = self.stepper.on_sim_clock(goal)
        except CommandError as exc:
            self._reject('joint_trajectory', exc)
            return
        self.stepper.submit(goal)

    def _on_goal(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        position, quaternion = np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])
        norm = float(np.linalg.norm(quaternion))
        if not (np.all(np.isfinite(position)) and np.isfinite(norm) and norm > 1e-9):
            self._reject('goal_pose', CommandError('non-finite position or zero quaternion',
                                                   'non_finite'))
            return
        self.stepper.set_goal_pose(position, quaternion / norm)

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self._publish(self.stepper.reset())
        response.success = True
        response.message = (f'reset to keyframe {self.settings.initial_keyframe!r}, sim time '
                            f'0{" with re-randomised physics" if self.settings.randomize else ""}')
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.stepper.pause(bool(request.data))
        response.success, response.message = True, 'paused' if request.data else 'running'
        return response

    def _publish_diagnostics(self) -> None:
        report = self.stepper.report()
        self._diag_pub.publish(diagnostic_array(
            f'{self.get_name()}: physics', self.spec.name, report.level, report.message,
            report.values, self.stepper.stamp_ns()))

    # --- physics thread ------------------------------------------------------------------

    def _publish(self, frame: Frame) -> None:
        """Publish a stepper frame (pre-serialized messages; see :mod:`simops_sim.wire`)."""
        stamp = frame.stamp_ns
        with self._wire_lock:
            if frame.joints is not None:
                for row, values in zip(self._state_wire.rows, frame.joints, strict=True):
                    row[:] = values
                self._state_pub.publish(self._state_wire.encode(stamp))
                if self.settings.publish_clock:
                    self._clock_pub.publish(self._clock_wire.encode(stamp))
            if frame.flange is not None:
                self._ee_pub.publish(self._pose_wire.encode(stamp, *frame.flange))
            if frame.object is not None:
                self._object_pub.publish(self._pose_wire.encode(stamp, *frame.object))
            if frame.robot is not None:
                self._robot_state.publish_state(frame.robot)

    def _run(self) -> None:
        try:
            self.stepper.run(self._running, self._publish)
        except Exception as exc:  # stop the node rather than run on without physics
            if self.context.ok() and self._running.is_set():
                self.failure = exc
                self.get_logger().fatal(f'physics thread failed: {exc!r}')
                rclpy.try_shutdown(context=self.context)

    def stop(self) -> None:
        """Stop and join the physics thread, and close the viewer."""
        self._running.clear()
        self.stepper.wake()
        self._thread.join(timeout=5.0)
        if self.stepper.viewer is not None:
            self.stepper.viewer.close()
        for companion in self.companions:
            companion.destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the simulator node; 0 on a clean shutdown, 1 if physics failed, 2 on bad config."""
    return run_node(NODE_NAME, 'Simulate the arm in MuJoCo behind the real arm\'s topics.',
                    SimNode, args, {1: 'the physics thread failed (a bug: see the log)'},
                    spin=lambda node: spin(node, *node.companions),
                    exit_code=lambda node: 1 if node.failure is not None else 0)


if __name__ == '__main__':
    sys.exit(main())
