"""rclpy-side helpers shared by the SimOps nodes (the functional core is simops_core)."""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_arm_setup() -> int | None:
    """``arm_setup``: :mod:`simops_ros.arm_setup`."""
    return run_executable('simops_ros.arm_setup:main')
