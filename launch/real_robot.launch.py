"""ros2 launch simops_bringup real_robot.launch.py [name:=value ...]: policy, recorder, excite.

A thin translation of simops_bringup.graph (profile ``real_robot``) into launch_ros Nodes;
the ``simops-launch real_robot`` runner executes the same graph where ros2 launch is not
available. The arm's driver is not started here: run franka_bringup beside it (README).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from simops_bringup.graph import build_graph, launch_arguments

PROFILE = 'real_robot'


def nodes(context: LaunchContext) -> list[Node]:
    values = {arg.name: LaunchConfiguration(arg.name).perform(context)
              for arg in launch_arguments(PROFILE)}
    return [
        Node(package=node.package, executable=node.executable, name=node.name,
             namespace=node.namespace or None,
             parameters=[*node.param_files, node.parameter_dict()],
             remappings=list(node.remappings), output='screen',
             on_exit=Shutdown(reason=f'{node.name} exited') if node.required else None)
        for node in build_graph(PROFILE, values)
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        *(DeclareLaunchArgument(arg.name, default_value=arg.default,
                                description=arg.description, choices=list(arg.choices) or None)
          for arg in launch_arguments(PROFILE)),
        OpaqueFunction(function=nodes),
    ])
