"""SimOps bringup: launch files, configuration, models and the node graph.

The node graph is shared by the launch files and the runner for machines without ros2 launch.
"""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_demo() -> int | None:
    """``simops-demo``: :mod:`simops_bringup.demo.cli`."""
    return run_executable('simops_bringup.demo.cli:main')


def run_launch() -> int | None:
    """``simops-launch``: :mod:`simops_bringup.runner`."""
    return run_executable('simops_bringup.runner:main')


def run_recover() -> int | None:
    """``simops-recover``: :mod:`simops_bringup.recover`."""
    return run_executable('simops_bringup.recover:main')


def run_pipeline() -> int | None:
    """``simops-pipeline``: :mod:`simops_bringup.pipeline`."""
    return run_executable('simops_bringup.pipeline:main')
