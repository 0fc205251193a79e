"""A second rclpy process for the DDS smoke test.

Subscribes to /test/joint_states_in and republishes every JointState on
/test/joint_states_out with each position increased by 1.0 rad, so the test sees that a
message crossed the process boundary both ways and was decoded on each side.
"""

import rclpy
from rclpy.node import Node
from sensor_msgs.msg import JointState
from spinning import spin_until_shutdown


class JointStateEcho(Node):
    def __init__(self) -> None:
        super().__init__('joint_state_echo')
        self.pub = self.create_publisher(JointState, '/test/joint_states_out', 10)
        self.create_subscription(JointState, '/test/joint_states_in', self.echo, 10)

    def echo(self, msg: JointState) -> None:
        msg.position = [p + 1.0 for p in msg.position]
        self.pub.publish(msg)


def main() -> None:
    rclpy.init()
    node = JointStateEcho()
    spin_until_shutdown(node)


if __name__ == '__main__':
    main()
