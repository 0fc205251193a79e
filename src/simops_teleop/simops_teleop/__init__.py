"""Teleoperation: drive the arm from velocity commands, as moveit_servo does."""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_teleop() -> int | None:
    """``teleop``: :mod:`simops_teleop.teleop_node`."""
    return run_executable('simops_teleop.teleop_node:main')


def run_teleop_keyboard() -> int | None:
    """``simops-teleop-keyboard``: :mod:`simops_teleop.keyboard_teleop`."""
    return run_executable('simops_teleop.keyboard_teleop:main')


def run_teleop_spacemouse() -> int | None:
    """``simops-teleop-spacemouse``: :mod:`simops_teleop.spacemouse_teleop`."""
    return run_executable('simops_teleop.spacemouse_teleop:main')
