"""The launch_ros description of a profile of the node graph (for ``ros2 launch`` only).

Both launch files call :func:`profile_description`; ``simops-launch`` runs the same
:func:`simops_bringup.graph.build_graph` where launch_ros is not installed. A required node
that exits shuts the whole launch down (``on_exit`` :class:`~launch.actions.Shutdown`);
``ros2 launch`` then exits 0, while ``simops-launch`` exits with that node's code.
"""

from __future__ import annotations

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.launch_context import LaunchContext
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from simops_bringup.graph import build_graph, launch_arguments


def profile_nodes(context: LaunchContext, profile: str) -> list[Node]:
    """The graph's nodes for the launch arguments in ``context``, as launch_ros Nodes."""
    values = {arg.name: LaunchConfiguration(arg.name).perform(context)
              for arg in launch_arguments(profile)}
    return [
        Node(package=node.package, executable=node.executable, name=node.name,
             namespace=node.namespace or None,
             parameters=[*node.param_files, node.parameter_dict()],
             remappings=list(node.remappings), output='screen',
             on_exit=Shutdown(reason=f'{node.name} exited') if node.required else None)
        for node in build_graph(profile, values)
    ]


def profile_description(profile: str) -> LaunchDescription:
    """The launch arguments of ``profile`` and the nodes they select."""
    return LaunchDescription([
        *(DeclareLaunchArgument(arg.name, default_value=arg.default,
                                description=arg.description, choices=list(arg.choices) or None)
          for arg in launch_arguments(profile)),
        OpaqueFunction(function=profile_nodes, args=[profile]),
    ])
