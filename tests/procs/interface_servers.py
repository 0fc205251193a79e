"""A second rclpy process serving the workspace's interface copies.

For tests/ros/test_interfaces.py.

- ``/test/follow_joint_trajectory`` (control_msgs FollowJointTrajectory): INVALID_JOINTS
  for a joint not named ``j1``, else one feedback with the last point as ``desired`` and
  SUCCESSFUL;
- ``/test/move`` (franka_msgs Move): feedback and result carry the goal's width.
"""

from typing import Any

import rclpy
from control_msgs.action import FollowJointTrajectory
from franka_msgs.action import Move
from rclpy.action import ActionServer
from rclpy.node import Node
from spinning import spin_until_shutdown

from simops_ros.rclpy_compat import has_field


class InterfaceServers(Node):
    def __init__(self) -> None:
        super().__init__('interface_servers')
        ActionServer(self, FollowJointTrajectory, '/test/follow_joint_trajectory', self.follow)
        ActionServer(self, Move, '/test/move', self.move)
        self.get_logger().info('serving')

    def follow(self, handle: Any) -> FollowJointTrajectory.Result:
        goal, result = handle.request, FollowJointTrajectory.Result()
        if list(goal.trajectory.joint_names) != ['j1']:
            handle.abort()
            result.error_code = FollowJointTrajectory.Result.INVALID_JOINTS
            result.error_string = f'unknown joints {list(goal.trajectory.joint_names)}'
            return result
        feedback = FollowJointTrajectory.Feedback(joint_names=['j1'],
                                                  desired=goal.trajectory.points[-1])
        if has_field(feedback, 'index'):   # Kilted's control_msgs; Jazzy's has none
            feedback.index = len(goal.trajectory.points) - 1
        handle.publish_feedback(feedback)
        handle.succeed()
        result.error_code = FollowJointTrajectory.Result.SUCCESSFUL
        return result

    def move(self, handle: Any) -> Move.Result:
        handle.publish_feedback(Move.Feedback(current_width=handle.request.width))
        handle.succeed()
        return Move.Result(success=True, error=f'width {handle.request.width}')


def main() -> None:
    rclpy.init()
    spin_until_shutdown(InterfaceServers())


if __name__ == '__main__':
    main()
