"""A node's own command line, parsed before rclpy starts.

``ros2 run simops_sysid excite --help`` must print help, not start a node that moves the arm.
Everything after ``--ros-args`` belongs to ROS (parameters, remappings, log levels) and is
passed to ``rclpy.init`` untouched; what is left must be empty, or ``--help``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rclpy.utilities import remove_ros_args

from simops_core.command_line import EXIT_CONFIG, EXIT_OK, CommandLineParser, exit_codes

NODE_EXIT_CODES = {EXIT_OK: 'clean shutdown (Ctrl-C, SIGTERM or ros2 launch)',
                   EXIT_CONFIG: 'bad command line, parameter or configuration file (one line '
                                'on stderr)'}


def parse_node_args(executable: str, description: str, args: Sequence[str] | None = None,
                    codes: dict[int, str] | None = None) -> list[str]:
    """Check a node's command line; return the arguments for ``rclpy.init``.

    ``--help`` prints usage and exits 0; any argument outside ``--ros-args`` exits 2 with one
    line. ``args`` defaults to ``sys.argv``; ``codes`` adds exit codes to the help text.
    """
    argv = list(sys.argv if args is None else args)
    parser = CommandLineParser(
        executable, description,
        epilog='ROS arguments follow --ros-args, e.g.\n'
               f'  ros2 run <package> {executable} --ros-args -p name:=value -r from:=to\n'
               'Parameters, topics and services: docs/interfaces.md.\n\n'
               + exit_codes({**NODE_EXIT_CODES, **(codes or {})}))
    parser.parse_args(remove_ros_args(argv)[1:])
    return argv
