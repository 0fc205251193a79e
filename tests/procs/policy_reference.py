"""Seed-style reference policy node for bench/control_loop.py: the common deploy pattern.

One SingleThreadedExecutor runs everything: a JointState callback per message (1 kHz from
the simulator) and a 20 Hz rclpy timer that builds the observation, runs inference, applies
the same safety pipeline and publishes /joint_commands. It reports the same timing figures
as the policy node on /diagnostics (period, period error, latency from the DDS receipt of the
joint state used, inference), so the bench compares the two architectures one to one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from spinning import spin_until_shutdown
from std_msgs.msg import Float64MultiArray

from simops_core import safety
from simops_core.observation import JointIndex, ObservationBuilder, RobotObservation
from simops_core.policy_card import load_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics
from simops_policy.loop_stats import WindowStats
from simops_policy.model import load_policy


class ReferencePolicy(Node):
    def __init__(self, model_path: Path, window: int) -> None:
        super().__init__('policy_reference')
        self.spec = load_robot_spec('fr3')
        topics = load_topics()

        def qos(key: str) -> QoSProfile:
            return QoSProfile(**topics[key].qos.as_profile_kwargs())

        card = load_policy_card(model_path.with_suffix('.yaml'), self.spec.joint_names,
                                self.spec.arm_joints)
        self.model = load_policy(model_path, card)
        self.period = 1.0 / card.control_rate
        self.builder = ObservationBuilder(card, self.spec.joint_names, self.spec.gripper.joints)
        self.index = JointIndex(self.spec.joint_names)
        self.limits = safety.SafetyLimits.from_spec(self.spec, self.period, 0.5, 0.05)
        action = card.action
        self.mapping = safety.ActionMapping(
            arm_index=np.array([action.joints.index(j) for j in self.spec.arm_joints]),
            gripper_index=7 if action.gripper else None, clip=action.clip, scale=action.scale,
            reference=action.reference,
            lpf_alpha=safety.lowpass_alpha(5.0, card.control_rate))
        n = len(self.spec.joint_names)
        self.obs = RobotObservation(np.zeros(n), np.zeros(n), np.zeros(3),
                                    np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(3),
                                    np.zeros(action.size))
        self.state: safety.SafetyState | None = None
        self.latest: tuple[JointState, int] | None = None
        self.stats = {key: WindowStats(window)
                      for key in ('period', 'period_error', 'state_age', 'latency',
                                  'compute', 'inference')}
        self.previous: float | None = None
        self.command_pub = self.create_publisher(Float64MultiArray, topics['joint_commands'].name,
                                                 qos('joint_commands'))
        self.diag_pub = self.create_publisher(DiagnosticArray, topics['diagnostics'].name,
                                              qos('diagnostics'))
        self.create_subscription(JointState, topics['joint_states'].name, self.on_state,
                                 qos('joint_states'))
        self.create_subscription(PoseStamped, topics['object_pose'].name, self.on_object,
                                 qos('object_pose'))
        self.create_subscription(PoseStamped, topics['goal_pose'].name, self.on_goal,
                                 qos('goal_pose'))
        self.create_timer(self.period, self.on_timer)
        self.create_timer(1.0, self.publish_diagnostics)

    def on_state(self, msg: JointState, info: Any) -> None:
        self.latest = (msg, info['received_timestamp'] or time.time_ns())

    def on_object(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        self.obs.object_position[:] = (p.x, p.y, p.z)
        self.obs.object_quaternion[:] = (o.x, o.y, o.z, o.w)

    def on_goal(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        self.obs.goal_position[:] = (p.x, p.y, p.z)

    def on_timer(self) -> None:
        if self.latest is None:
            return
        msg, received_ns = self.latest
        tick_ns = time.time_ns()
        self.stats['state_age'].add(1e-9 * (tick_ns - received_ns))
        self.index.select(msg.name, msg.position, self.obs.joint_position)
        self.index.select(msg.name, msg.velocity, self.obs.joint_velocity)
        arm = self.obs.joint_position[:7].copy()
        if self.state is None:
            self.state = safety.start(arm, float(self.obs.joint_position[7:].sum()),
                                      self.limits)
            observation = self.builder.reset(self.obs)
        else:
            observation = self.builder.build(self.obs)
        started = time.perf_counter()
        action = self.model.infer(observation)
        self.stats['inference'].add(time.perf_counter() - started)
        out = safety.step(self.state, action, arm, 1.0, self.limits, self.mapping)
        self.state = out.state
        self.obs.last_action[:] = out.action
        self.command_pub.publish(Float64MultiArray(data=[*out.state.target, out.state.gripper]))
        done_ns = time.time_ns()
        published = time.monotonic()
        if self.previous is not None:   # the command period, as the policy node measures it
            self.stats['period'].add(published - self.previous)
            self.stats['period_error'].add(abs(published - self.previous - self.period))
        self.previous = published
        self.stats['latency'].add(1e-9 * (done_ns - received_ns))
        self.stats['compute'].add(1e-9 * (done_ns - tick_ns))

    def publish_diagnostics(self) -> None:
        values = []
        for key, stats in self.stats.items():
            summary = stats.summary()
            values += [KeyValue(key=f'{key}_{stat}_ms', value=f'{1e3 * getattr(summary, stat):.4g}')
                       for stat in ('p50', 'p99', 'max')]
        status = DiagnosticStatus(name='policy_reference: control loop', values=values)
        self.diag_pub.publish(DiagnosticArray(status=[status]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('model', type=Path, help='TorchScript policy with its card beside it')
    parser.add_argument('--window', type=int, default=1200, help='samples per percentile')
    args, ros_args = parser.parse_known_args()
    rclpy.init(args=ros_args)
    node = ReferencePolicy(args.model, args.window)
    spin_until_shutdown(node)


if __name__ == '__main__':
    main()
