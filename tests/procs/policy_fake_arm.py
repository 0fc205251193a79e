"""A stand-in arm for the policy node's tests: JointState out, commands in.

Publishes /joint_states at ``--rate`` Hz with the spec's arm and finger joints in reversed
order plus an extra joint (the node must match by name), /object_pose at 50 Hz, and jumps
to every target it receives on /joint_commands or the joint trajectory topic. Publishing
/fake_arm/mute true stops the joint states (the node must then hold on stale state).
"""

from __future__ import annotations

import argparse

import rclpy
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from spinning import spin_until_shutdown
from std_msgs.msg import Bool, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics


class FakeArm(Node):
    def __init__(self, rate: float) -> None:
        super().__init__('policy_fake_arm')
        self.spec = load_robot_spec('fr3')
        topics = load_topics()

        def qos(key: str) -> QoSProfile:
            return QoSProfile(**topics[key].qos.as_profile_kwargs())

        self.arm = [float(v) for v in self.spec.home]
        self.width = self.spec.gripper.home_width
        self.muted = False
        self.names = ['extra_joint', *reversed(self.spec.joint_names)]
        self.state_pub = self.create_publisher(JointState, topics['joint_states'].name,
                                               qos('joint_states'))
        self.object_pub = self.create_publisher(PoseStamped, topics['object_pose'].name,
                                                qos('object_pose'))
        self.create_subscription(Float64MultiArray, topics['joint_commands'].name,
                                 self.on_command, qos('joint_commands'))
        self.create_subscription(JointTrajectory, topics['joint_trajectory'].name,
                                 self.on_trajectory, qos('joint_trajectory'))
        # latched, as tests/policy_helpers.py's MUTE_QOS publishes it
        self.create_subscription(Bool, '/fake_arm/mute', self.on_mute, QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self.create_timer(1.0 / rate, self.publish_state)
        self.create_timer(0.02, self.publish_object)

    def on_command(self, msg: Float64MultiArray) -> None:
        self.arm = list(msg.data[:7])
        if len(msg.data) > 7:
            self.width = msg.data[7]

    def on_trajectory(self, msg: JointTrajectory) -> None:
        order = [list(msg.joint_names).index(j) for j in self.spec.arm_joints]
        self.arm = [msg.points[-1].positions[i] for i in order]

    def on_mute(self, msg: Bool) -> None:
        self.muted = msg.data

    def publish_state(self) -> None:
        if self.muted:
            return
        values = [0.0, self.width / 2, self.width / 2, *reversed(self.arm)]
        msg = JointState(name=self.names, position=values, velocity=[0.0] * len(values))
        msg.header.stamp = self.get_clock().now().to_msg()
        self.state_pub.publish(msg)

    def publish_object(self) -> None:
        msg = PoseStamped()
        msg.header.frame_id = self.spec.base_frame
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.pose.position.x, msg.pose.position.z = 0.5, 0.02
        msg.pose.orientation.w = 1.0
        self.object_pub.publish(msg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--rate', type=float, default=250.0, help='joint_states rate (Hz)')
    args = parser.parse_args()
    rclpy.init()
    node = FakeArm(args.rate)
    spin_until_shutdown(node)


if __name__ == '__main__':
    main()
