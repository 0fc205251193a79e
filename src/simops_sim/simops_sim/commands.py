"""Validation of incoming joint commands (pure; the node turns a rejection into a warning)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class CommandError(ValueError):
    """A command that must be rejected; the message names the problem."""


@dataclass(frozen=True)
class ArmCommand:
    """Arm position targets (7,) in rad and an optional gripper width in m."""

    arm: np.ndarray
    gripper_width: float | None


def parse_joint_command(values: Sequence[float], joint_names: Sequence[str]) -> ArmCommand:
    """Validate a ``/joint_commands`` array: one target per arm joint, optional gripper width.

    ``joint_names`` are the arm joints in spec order (they name the faulty entry).
    Raises :class:`CommandError` for a wrong length or a non-finite value.
    """
    dof = len(joint_names)
    data = np.asarray(values, dtype=float)
    if data.shape not in ((dof,), (dof + 1,)):
        raise CommandError(f'expected {dof} arm targets (+ optional gripper width), '
                           f'got {data.size} values')
    bad = np.flatnonzero(~np.isfinite(data))
    if bad.size:
        where = joint_names[bad[0]] if bad[0] < dof else 'gripper width'
        raise CommandError(f'{where} target is {data[bad[0]]}')
    return ArmCommand(data[:dof].copy(), float(data[dof]) if data.size > dof else None)
