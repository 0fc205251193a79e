"""SimOps policy: a TorchScript policy at 20 Hz behind a safety layer.

The safety layer keeps every command inside the arm's limits.
"""

from simops_core.command_line import run_executable

# The executables (setup.py's console scripts): each imports its module only when run.


def run_policy() -> int | None:
    """``policy``: :mod:`simops_policy.policy_node`."""
    return run_executable('simops_policy.policy_node:main')
