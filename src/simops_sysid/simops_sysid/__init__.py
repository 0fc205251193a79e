"""System identification: fit the simulator's physics to recorded bags; excite the arm safely."""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_fit() -> int | None:
    """``fit``: :mod:`simops_sysid.fit_cli`."""
    return run_executable('simops_sysid.fit_cli:cli')


def run_excite() -> int | None:
    """``excite``: :mod:`simops_sysid.excite_node`."""
    return run_executable('simops_sysid.excite_node:main')


def run_fit_fleet() -> int | None:
    """``fit-fleet``: :mod:`simops_sysid.fleet`."""
    return run_executable('simops_sysid.fleet:cli')
