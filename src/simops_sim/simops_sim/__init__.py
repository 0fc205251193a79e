"""SimOps simulator: MuJoCo behind the real Franka arm's topics, with sim time and reset."""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_sim() -> int | None:
    """``sim``: :mod:`simops_sim.sim_node`."""
    return run_executable('simops_sim.sim_node:main')
