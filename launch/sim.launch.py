"""ros2 launch simops_bringup sim.launch.py [name:=value ...]: simulator, policy, recorder.

The ``sim`` profile of simops_bringup.graph; ``simops-launch sim`` runs the same graph
where ros2 launch is not available.
"""

from launch.launch_description import LaunchDescription

from simops_bringup.ros2_launch import profile_description

PROFILE = 'sim'


def generate_launch_description() -> LaunchDescription:
    return profile_description(PROFILE)
