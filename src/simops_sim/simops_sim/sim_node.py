"""``ros2 run simops_sim sim``: the MuJoCo simulation behind the real arm's topics.

ROS wiring over :class:`simops_sim.stepper.Stepper` (the physics, a
:class:`~simops_sim.world.World`; pacing, ``realtime`` or ``lockstep``; stamps; diagnostics).
A physics thread (SCHED_FIFO at ``thread_priority``, as ros2_control_node runs its loop)
steps and publishes each frame outside the lock; the executor serves the rest.
Parameters: ``config/parameters/sim.yaml`` (table in docs/interfaces.md).

- Each arm's topics, actions and companions come from :mod:`simops_sim.arm_ports`: on this
  node for a lone arm; with ``arms`` (``fr3_duo``: ``[left, right]``) on a node per arm in
  ``<ns>/<arm>``, all on one physics and one ``/clock``.
- ``joint_states``: names, position, velocity, effort for the arm and fingers every
  1 / ``joint_state_rate`` s of sim time; effort is the actuator torque including the
  gravity-holding torque, like Franka's measured ``tau_J`` (see :mod:`simops_sim.physics`).
- ``~/reset``, ``~/pause``, ``/clock`` and ``/diagnostics`` (1 Hz) are the world's. A
  protective stop (:mod:`simops_sim.reflexes`) is an ERROR there. ``randomize`` samples
  ``config/randomization.yaml`` around the params at start and on every reset.
- ``cameras``: rendered RGB-D on realsense2_camera's topics, on a camera thread
  (:mod:`simops_sim.camera_ports`), with a ``cameras`` status beside ``physics``.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rosgraph_msgs.msg import Clock
from std_srvs.srv import SetBool, Trigger

from simops_core.command_line import ConfigError
from simops_core.franka_ros2 import franka_release
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import SimParams, SimParamsError, load_sim_params
from simops_core.thread_priority import schedule_fifo
from simops_core.topics import load_topics
from simops_ros.declarations import declare_schema
from simops_ros.diagnostics import diagnostic_array, status_name
from simops_ros.qos import qos_profile
from simops_ros.scaffold import run_node
from simops_ros.spinning import spin_threaded
from simops_ros.thread_failure import THREAD_EXIT_CODES, ThreadFailure
from simops_ros.throttled import KindWarnings
from simops_sim.arm_lane import Frame
from simops_sim.arm_ports import ArmPorts, arm_topics
from simops_sim.camera_ports import SimCameras
from simops_sim.model_index import load_model, parse_joint_map
from simops_sim.randomization import default_randomization
from simops_sim.serialized_messages import ClockEncoder
from simops_sim.sim_profiles import apply_profile
from simops_sim.stepper import Stepper, Timing, open_viewer
from simops_sim.world import World

NODE_NAME = 'sim'


class SimNode(Node):
    """Publishes the simulated arm like franka_ros2 and accepts the real stack's commands."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        self._warn = KindWarnings(self.get_logger())
        self.settings = declare_schema(self, NODE_NAME, apply=self._set_live)
        self.stepper = self._build_stepper()
        self._create_interfaces()
        self._running = threading.Event()
        self._running.set()
        self.failed = ThreadFailure(self, self._running)   # a dead thread stops the node
        self.cameras = (SimCameras(self, self.stepper, self.settings, self._running,
                                   lambda exc: self.failed(exc, 'camera'))
                        if self.settings.cameras else None)
        self._thread = self.failed.start(self._run, 'physics')
        self.get_logger().info(f'{Path(self.settings.model).name}: {self.stepper.summary()}')

    def _build_stepper(self) -> Stepper:
        s = self.settings
        self.spec, self.topics = load_robot_spec(s.robot), load_topics()
        self.release = franka_release(s.franka_ros2)
        try:
            params = load_sim_params(s.sim_params_file) if s.sim_params_file else SimParams()
        except SimParamsError as exc:
            raise ConfigError(f'{exc}; fix the sim_params_file') from None
        params = params if s.gripper else replace(params, end_effector='none')
        prefixes = arm_prefixes(s.arms)
        try:
            world = World(apply_profile(load_model(s.model), s.sim_profile),
                          dict.fromkeys(prefixes, self.spec),
                          dict.fromkeys(prefixes, params), reflexes=True,
                          joint_map=parse_joint_map(s.joint_map))
        except SimParamsError as exc:
            raise ConfigError(f'{s.sim_params_file}: {exc}; fix the sim_params_file') from None
        world.reset_keyframe(s.initial_keyframe)
        if s.joint_state_rate * world.timestep > 1.0 + 1e-9:
            raise ConfigError(f'joint_state_rate {s.joint_state_rate:g} Hz exceeds the physics '
                              f'rate {1 / world.timestep:g} Hz; lower it')
        physics = world.arms[prefixes[0]]
        sample = default_randomization().sampler(physics.nominal, self.spec.arm_joints,
                                                 physics.index.mass_bodies, s.control_period)
        timing = Timing(s.sync_mode, s.realtime_factor, s.control_period, s.lockstep_timeout,
                        s.command_timeout, s.joint_state_rate, s.joint_state_noise,
                        s.joint_effort_noise, s.robot_state_rate)
        system_ns = None if s.publish_clock else (lambda: self.get_clock().now().nanoseconds)
        viewer = open_viewer(world) if s.viewer else None
        if s.viewer and viewer is None:
            self.get_logger().warning('viewer requested but no display is set; headless')
        return Stepper(world, timing, s.initial_keyframe, sample if s.randomize else None,
                       s.seed, system_ns, self._warn, viewer)

    def _set_live(self, name: str, value: Any) -> None:
        self.stepper.set(name, value)
        self.get_logger().info(f'{name} set to {value}')

    def _create_interfaces(self) -> None:
        def publisher(kind: type, key: str) -> Any:
            return self.create_publisher(kind, self.topics[key].name,
                                         qos_profile(self.topics[key]))

        self._clock_pub = publisher(Clock, 'clock')
        self._diag_pub = publisher(DiagnosticArray, 'diagnostics')
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_service(SetBool, '~/pause', self._on_pause)
        self.create_timer(1.0, self._publish_diagnostics)
        self.arm_nodes: list[Node] = []   # one per arm of a multi-arm world
        self.ports: dict[str, ArmPorts] = {}
        for prefix, lane in self.stepper.lanes.items():
            node: Node = self
            warn = self._warn
            if prefix:
                namespace = f'{self.get_namespace().rstrip("/")}/{prefix.rstrip("_")}'
                node = Node(NODE_NAME, namespace=namespace, context=self.context,
                            use_global_arguments=False)
                self.arm_nodes.append(node)
                warn = KindWarnings(node.get_logger())
            self.ports[prefix] = ArmPorts(node, lane, self.spec, arm_topics(
                self.topics, relative=bool(prefix)), warn, self.release,
                polled=self.settings.sync_mode == 'realtime')
        self.companions = [*self.arm_nodes, *(c for p in self.ports.values()
                                              for c in p.companions)]
        self._clock_wire, self._clock_arm = ClockEncoder(), next(iter(self.ports))

    # --- ROS callbacks (executor thread) -------------------------------------------------

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        for frame in self.stepper.reset():
            self._publish(frame)
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
        stamp = self.stepper.stamp_ns()
        msg = diagnostic_array(status_name(self, 'physics'), self.spec.name, report.level,
                               report.message, report.values, stamp)
        if self.cameras is not None:   # a second status in the same array
            msg.status.append(self.cameras.status(float(report.values['realtime_factor']),
                                                  self.spec.name, stamp))
        self._diag_pub.publish(msg)

    # --- physics thread ------------------------------------------------------------------

    def _publish(self, frame: Frame) -> None:
        """Publish an arm's frame; with the first arm's joint states, the world's /clock."""
        self.ports[frame.arm].publish(frame)
        if (frame.joints is not None and frame.arm == self._clock_arm
                and self.settings.publish_clock):
            self._clock_pub.publish(self._clock_wire.encode(frame.stamp_ns))

    def _take_commands(self) -> None:
        for ports in self.ports.values():
            ports.take_commands()

    def _run(self) -> None:
        fifo, line = schedule_fifo(self.settings.thread_priority, 'physics thread',
                                  'thread_priority')
        (self.get_logger().info if fifo or not self.settings.thread_priority
         else self.get_logger().warning)(line)
        self.stepper.run(self._running, self._publish, self._take_commands)

    def stop(self) -> None:
        """Stop and join the physics thread, and close the viewer."""
        self._running.clear()
        self.stepper.wake()
        self._thread.join(timeout=5.0)
        if self.cameras is not None:
            self.cameras.join()
        if self.stepper.viewer is not None:
            self.stepper.viewer.close()
        for companion in self.companions:
            companion.destroy_node()


def arm_prefixes(arms: Sequence[str]) -> list[str]:
    """The model prefixes (``left_``) of the ``arms`` parameter; ``['']`` for a lone arm.

    Raises :class:`ConfigError` for a name that cannot be a namespace, or a repeated one.
    """
    for arm in arms:
        if not re.fullmatch(r'[A-Za-z][A-Za-z0-9_]*', arm):
            raise ConfigError(f'bad arm name {arm!r} in arms; use letters, digits and _, '
                              'starting with a letter (left, right)')
    if len(set(arms)) != len(arms):
        raise ConfigError(f'arms {list(arms)} names an arm twice; name each arm once')
    return [f'{arm}_' for arm in arms] or ['']


def main(args: list[str] | None = None) -> int:
    """Run the simulator node; 0 on a clean shutdown, 1 if a thread failed, 2 on bad config."""
    return run_node(NODE_NAME, 'Simulate the arm in MuJoCo behind the real arm\'s topics.',
                    SimNode, args, THREAD_EXIT_CODES,
                    spin=lambda node: spin_threaded(node, *node.companions),
                    exit_code=lambda node: node.failed.exit_code,
                    signals=SignalHandlerOptions.NO)   # the physics thread stops first


if __name__ == '__main__':
    sys.exit(main())
