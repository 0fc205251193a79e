"""SimOps recorder: rosbag2 (MCAP) episodes of real and simulated trajectories."""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_record() -> int | None:
    """``record``: :mod:`simops_recorder.record_node`."""
    return run_executable('simops_recorder.record_node:main')


def run_repair() -> int | None:
    """``repair``: :mod:`simops_recorder.repair`."""
    return run_executable('simops_recorder.repair:cli')
