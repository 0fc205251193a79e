"""Publish a deterministic robot stream for recorder tests and benchmarks.

Message k on every topic carries k in its content, so a reader can check that a bag holds
0, 1, ..., N-1 with nothing missing and nothing changed:

- /joint_states (JointState, fr3 joint names): position[j] = k + j / 16,
  velocity[j] = -k - j / 16, effort[j] = j - k; header.stamp = publish time.
- /joint_commands (Float64MultiArray): data = [k + j / 16 for j in 0..7].
- /object_pose and /ee_pose (PoseStamped, frame fr3_link0): position = (k, k / 2, k / 4),
  orientation = (0, 0, 0, 1).
- /goal_pose: one latched PoseStamped at (0.5, 0.0, 0.2).

Topic names, types and QoS come from config/topics.yaml (``--best-effort`` overrides the
joint state reliability, as franka_ros2's convenience topics do; ``--depth`` its history).
The publisher waits until every topic has ``--subscribers`` subscriptions (plus
``--settle`` s for the subscribers to match it in turn), publishes for
``--duration`` s (exactly duration * rate messages per stream, message k due k / rate s
after the start), lingers so reliable samples are delivered, then prints
``published <topic> <count>`` lines.
"""

import argparse
import sys
import time

import rclpy
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--joint-rate', type=float, default=1000.0)
    parser.add_argument('--command-rate', type=float, default=20.0)
    parser.add_argument('--pose-rate', type=float, default=100.0)
    parser.add_argument('--duration', type=float, default=5.0)
    parser.add_argument('--subscribers', type=int, default=1)
    parser.add_argument('--best-effort', action='store_true')
    parser.add_argument('--depth', type=int, default=0,
                        help='joint state history depth (default: config/topics.yaml)')
    parser.add_argument('--joint-states-only', action='store_true')
    parser.add_argument('--settle', type=float, default=0.5,
                        help='s to wait after the subscriptions matched')
    args = parser.parse_args()

    topics = load_topics()
    joints = list(load_robot_spec('fr3').joint_names)
    rclpy.init()
    node = rclpy.create_node('trajectory_publisher')

    def publisher(key: str, msg_type: type, best_effort: bool = False, depth: int = 0) -> object:
        qos = QoSProfile(**topics[key].qos.as_profile_kwargs())
        if best_effort:
            qos.reliability = ReliabilityPolicy.BEST_EFFORT
        if depth:
            qos.depth = depth
        return node.create_publisher(msg_type, topics[key].name, qos)

    js_pub = publisher('joint_states', JointState, args.best_effort, args.depth)
    streams = [(js_pub, args.joint_rate, 'joint_states')]
    if not args.joint_states_only:
        streams += [(publisher('joint_commands', Float64MultiArray), args.command_rate,
                     'joint_commands'),
                    (publisher('object_pose', PoseStamped), args.pose_rate, 'object_pose'),
                    (publisher('ee_pose', PoseStamped), args.pose_rate, 'ee_pose')]
        goal_pub = publisher('goal_pose', PoseStamped)
    deadline = time.monotonic() + 30.0
    while any(p.get_subscription_count() < args.subscribers for p, _, _ in streams):
        if time.monotonic() > deadline:
            print('publisher: no subscriber after 30 s', file=sys.stderr)
            return 1
        time.sleep(0.02)
    # A writer can see a reader match before the reader has matched the writer (DDS
    # discovery is not symmetric); samples sent in between are dropped by the reader.
    time.sleep(args.settle)
    if not args.joint_states_only:
        goal = PoseStamped()
        goal.header.frame_id = 'fr3_link0'
        goal.header.stamp = node.get_clock().now().to_msg()
        goal.pose.position.x, goal.pose.position.z = 0.5, 0.2
        goal.pose.orientation.w = 1.0
        goal_pub.publish(goal)
    print('publishing', flush=True)

    counts = [0] * len(streams)
    totals = [round(args.duration * rate) for _, rate, _ in streams]
    start = time.monotonic()
    end = start + args.duration
    while True:
        now = time.monotonic()
        for index, (pub, rate, key) in enumerate(streams):
            # Message k is due at k / rate s; at the end every stream has sent all
            # duration * rate of them, however late the last sleep woke.
            due = totals[index] if now >= end else min(int((now - start) * rate) + 1,
                                                        totals[index])
            while counts[index] < due:
                pub.publish(make(key, counts[index], joints, node))
                counts[index] += 1
        if now >= end:
            break
        time.sleep(max(0.0, min(0.0005, end - time.monotonic())))
    time.sleep(1.0)  # let reliable samples reach the subscribers
    for (_, _, key), count in zip(streams, counts, strict=True):
        print(f'published {topics[key].name} {count}', flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


def make(key: str, k: int, joints: list[str], node: object) -> object:
    stamp = node.get_clock().now().to_msg()
    if key == 'joint_states':
        msg = JointState(name=joints, position=[k + j / 16 for j in range(len(joints))],
                         velocity=[-k - j / 16 for j in range(len(joints))],
                         effort=[float(j - k) for j in range(len(joints))])
        msg.header.stamp = stamp
        return msg
    if key == 'joint_commands':
        return Float64MultiArray(data=[k + j / 16 for j in range(8)])
    msg = PoseStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = 'fr3_link0'
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = float(k), k / 2, k / 4
    msg.pose.orientation.w = 1.0
    return msg


if __name__ == '__main__':
    sys.exit(main())
