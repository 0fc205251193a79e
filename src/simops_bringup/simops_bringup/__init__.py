"""SimOps bringup: launch files, configuration, models and the node graph.

The node graph is shared by the launch files and the runner for machines without ros2 launch.
"""
