"""``ros2 run simops_sysid excite``: a safe excitation trajectory for system identification.

A thin node over :func:`simops_sysid.excitation.fourier_excitation` and the policy's safety
pipeline (:mod:`simops_core.safety`): at ``control_rate`` Hz it takes the next sample of
the trajectory as the wanted target, blends in from the measured position over the ramp,
runs it through ``safety.step`` (position limits minus a margin, ``amplitude_fraction`` of
the velocity and acceleration limits) and publishes it on the command topic the policy uses
(``joint_commands`` or ``joint_trajectory``, config/topics.yaml). Trajectory commands form
a chain of one-period segments on a fixed time grid, each from the previous target
(:class:`simops_ros.point_commands.SegmentChain`), so a recording times the arm's target
exactly, whenever each message reached the controller. The 1 kHz joint states
are polled at each tick, not handled per message. Without a joint state received within
:data:`STALE_STATE` s it holds. Once enabled it first holds where the arm is until the
arm's controller (a subscriber of the command topic in the process that publishes the joint
states) and every other subscriber (a recorder) have acknowledged its commands, then for
:data:`SETTLE` s more, so the controller never misses commands a
recording holds. When the trajectory is done it holds ``home``
for a moment and exits with code 0. Parameters: ``config/parameters/excite.yaml``.

It moves an arm, so it behaves like the policy node, through the same
:class:`simops_core.motion_supervisor.MotionSupervisor`: it starts DISABLED and publishes
nothing until ``~/enable`` (``start_enabled`` only on a simulator); ``/simops/estop`` holds
the last target at once and latches HOLD on release until ``~/enable``; ``~/enable`` false
brakes to rest within the acceleration limit and stops commanding. The excitation's clock
only runs while it drives the arm: after a hold it blends back in over the ramp from where
the arm was held, and it resumes the trajectory where it left off.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

from simops_core import safety
from simops_core.motion_supervisor import MotionSupervisor, stand_still
from simops_core.policy_step import StepSettings
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics
from simops_ros.arm_positions import ArmPositions
from simops_ros.arming import ModeReport, attach_motion_controls, resume
from simops_ros.declarations import declare_schema
from simops_ros.point_commands import ArmCommandPublisher
from simops_ros.scaffold import run_node
from simops_ros.spinning import spin_once
from simops_sysid.excitation import fourier_excitation

NODE_NAME = 'excite'
JOINT_LIMIT_MARGIN = StepSettings.joint_limit_margin   # rad, the policy's default
STALE_STATE = 0.1           # s; an older joint state means hold
RAMP = 3.0                  # s blending in from the measured position
FINAL_HOLD = 1.0            # s of holding home before exiting
SETTLE = 1.0                # s of holding once the controller has the commands


class ExciteNode(Node):
    """Publishes the excitation through the safety pipeline, one target per control period."""

    def __init__(self) -> None:
        super().__init__(NODE_NAME)
        s = self.settings = declare_schema(self, NODE_NAME)
        self.rate, self.period = s.control_rate, 1.0 / s.control_rate
        self.spec = load_robot_spec(s.robot)
        topics = load_topics()
        self.excitation = fourier_excitation(self.spec, s.duration, s.seed,
                                             s.amplitude_fraction, self.rate, ramp=RAMP)
        self.limits = safety.SafetyLimits.from_spec(self.spec, self.period,
                                                    s.amplitude_fraction, JOINT_LIMIT_MARGIN)
        self.mapping = safety.ActionMapping.target_steps(len(self.spec.arm_joints))
        self._publish = ArmCommandPublisher(self, topics, s.command_interface,
                                            self.spec.arm_joints, self.period, chained=True)
        self._measured = ArmPositions(self, topics['joint_states'], self.spec, STALE_STATE)
        self._safety: safety.SafetyState | None = None
        self._lock = threading.Lock()       # the supervisor: services vs. the timer
        self.supervisor = MotionSupervisor(s.start_enabled, RAMP)
        self._report_mode = ModeReport(self, self.supervisor, '~/state', QoSProfile(
            **topics['policy_state'].qos.as_profile_kwargs()))
        self._arm_stop = attach_motion_controls(self, self.supervisor, self._lock, topics)
        self._tick = 0          # samples of the excitation already commanded
        self._holds = 0
        self._delivered: float | None = None   # monotonic s the controller first had them
        self.finished = False
        self.create_timer(self.period, self._on_tick)
        self.get_logger().info(
            f'exciting {len(self.spec.arm_joints)} joints for {self.excitation.duration:g} s '
            f'at {self.rate:g} Hz '
            f'(seed {s.seed}, {s.amplitude_fraction:g} of the limits) on '
            f'{self._publish.topic} from '
            f'{self._measured.topic}; {self.supervisor.reason}')

    def _on_tick(self) -> None:
        measured = self._measured()
        with self._lock:
            self._arm_stop.check()   # a protective stop latches FAULT
            decision = self.supervisor.tick(
                self._tick * self.period, measured is not None,
                f'no joint state newer than {STALE_STATE:g} s', self._safety is not None)
        if decision.run and measured is not None:
            self._excite(measured, decision.restart, decision.blend)
        else:
            held = stand_still(self.supervisor, decision, self._safety, self.limits, self._lock)
            if held is not None:
                self._publish(held.target)
            self._safety = held if held is not None or decision.publish else None
        self._report_mode()

    def _excite(self, measured: np.ndarray, restart: bool, blend: float) -> None:
        """Command the next excitation sample, ``blend`` of the way from the ramp's anchor."""
        if restart:
            self._safety = resume(self, self.supervisor, self._lock, measured, self._safety,
                                  self.limits)
            if self._safety is None:
                return
            if self._tick == 0:
                self.get_logger().info('enabled and joint states received; exciting')
        assert self._safety is not None
        if not self._connected():   # hold where it started until the controller listens
            self._publish(self._safety.target)
            return
        samples = self.excitation.q
        if self._tick >= samples.shape[0]:
            self._holds += 1
            self.finished = self._holds * self.period >= FINAL_HOLD
            self._safety = safety.hold(self._safety)
            self._publish(self._safety.target)
            return
        out = safety.step(self._safety, samples[self._tick] - self._safety.target, measured,
                          blend, self.limits, self.mapping)
        self._safety = out.state
        self._tick += 1
        self._publish(out.state.target)

    def _connected(self) -> bool:
        """Whether every subscriber of the command topic has had the commands for SETTLE s.

        Only then does the excitation start (the arm's controller is one such subscriber). A
        controller that discovers excite after the recorder does would otherwise miss the
        first commands the bag holds, then jump to the newest: an unrecorded motion that no
        replay reproduces. Its first target is where the arm is, so the hold moves it little,
        and the settling lets any transient end before the ramp.
        """
        now = time.monotonic()
        if self._delivered is None:
            lacking = self._publish.delivered(self._measured.topic)
            if lacking is not None:
                self.get_logger().info(f'holding until the controller has the commands: '
                                       f'{lacking}', throttle_duration_sec=2.0)
                return False
            self._delivered = now
            self.get_logger().info(f'every subscriber has the commands; exciting after '
                                   f'{SETTLE:g} s of holding')
        return now - self._delivered >= SETTLE


def main(args: list[str] | None = None) -> int:
    """Run the node; 0 when the excitation completed or on SIGINT, 2 on a config error."""
    return run_node(NODE_NAME, 'Excite the arm for system identification: a Fourier '
                    'trajectory through the safety pipeline. Starts DISABLED; call ~/enable '
                    'to start, publish true on /simops/estop to stop.', ExciteNode, args,
                    {0: 'the excitation finished at home, or a clean shutdown'},
                    spin=_spin_until_finished)


def _spin_until_finished(node: ExciteNode) -> None:
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        while rclpy.ok() and not node.finished:
            spin_once(executor, node.get_logger())
    finally:
        executor.shutdown()
    if node.finished:
        node.get_logger().info('excitation finished at home')


if __name__ == '__main__':
    sys.exit(main())
