"""ros2 launch simops_bringup real_robot.launch.py [name:=value ...]: policy, recorder, excite.

The ``real_robot`` profile of simops_bringup.graph; ``simops-launch real_robot`` runs the
same graph where ros2 launch is not available. The arm's driver is not started here: run
franka_bringup beside it (README).
"""

from launch.launch_description import LaunchDescription

from simops_bringup.ros2_launch import profile_description

PROFILE = 'real_robot'


def generate_launch_description() -> LaunchDescription:
    return profile_description(PROFILE)
