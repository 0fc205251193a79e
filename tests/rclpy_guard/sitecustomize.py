"""Loaded first by every Python process a test marked ``ros_free`` starts (on PYTHONPATH).

Such a test runs with the tests that do not touch ROS: two at a time, on the Kilted venv
only. It promises that the commands it starts never touch ROS, and this holds it to that:
in them, rclpy and the ROS message packages (which load rosidl_parser) cannot be imported.
"""

from __future__ import annotations

import importlib.abc
import sys

FORBIDDEN = ('rclpy', 'rosidl_parser')


class RosImportRefused(importlib.abc.MetaPathFinder):
    """A finder that refuses the packages in FORBIDDEN, ahead of every other finder."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split('.')[0] in FORBIDDEN:
            raise ImportError(f'{name} imported by a command that a test marked ros_free '
                              f'started: the command touches ROS, so remove the marker')


sys.meta_path.insert(0, RosImportRefused())
