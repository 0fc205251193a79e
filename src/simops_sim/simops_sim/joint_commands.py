"""Validation of incoming joint commands (pure; the node turns a rejection into a warning).

A command is rejected, and the arm holds its last valid target, when it is malformed,
non-finite, or finite but absurd: a target outside the spec's position limits (or a gripper
width outside its range), or a trajectory velocity beyond the spec's velocity limit. Driving
such a target would only push the arm into its hard stops (a real FR3 stops with a reflex).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simops_core.franka_ros2 import ARM_CONTROLLER
from simops_core.robot_spec import RobotSpec

TOLERANCE = 1e-9   # rad or m of rounding accepted at a limit


class CommandError(ValueError):
    """A command that must be rejected: the message names the problem, ``kind`` its class.

    Kinds: ``malformed`` (shape, names, timing), ``non_finite``, ``position_limits``,
    ``velocity_limits``, ``gripper_limits``, ``clock`` (a stamp on another clock),
    ``inactive`` (the arm's controller or hardware component is not active). The node
    throttles its warnings per topic and kind, so one kind of fault cannot hide another.
    """

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ArmCommand:
    """Arm position targets (7,) in rad and an optional gripper width in m.

    ``controller``: the controller whose topic streamed it (SimOps' ``/joint_commands`` are
    the arm controller's, followed by the effort JTC; a forward position controller's are
    tracked by the arm's own loop).
    """

    arm: np.ndarray
    gripper_width: float | None
    controller: str = ARM_CONTROLLER


def parse_position_command(values: Sequence[float], joint_names: Sequence[str],
                           controller: str) -> ArmCommand:
    """Validate a forward position controller's ``~/commands`` array for ``controller``.

    Exactly one target per arm joint (ForwardCommandController ignores any other size:
    forward_controllers_base.cpp:169-175, ros2_controllers 4.9.0); raises
    :class:`CommandError` as :func:`parse_joint_command` does.
    """
    if len(values) != len(joint_names):
        raise CommandError(f'expected {len(joint_names)} arm targets (one per position '
                           f'interface), got {len(values)} values', 'malformed')
    command = parse_joint_command(values, joint_names)
    return ArmCommand(command.arm, None, controller)


def parse_joint_command(values: Sequence[float], joint_names: Sequence[str]) -> ArmCommand:
    """Validate a ``/joint_commands`` array: one target per arm joint, optional gripper width.

    ``joint_names`` are the arm joints in spec order (they name the faulty entry).
    Raises :class:`CommandError` for a wrong length or a non-finite value.
    """
    dof = len(joint_names)
    data = np.asarray(values, dtype=float)
    if data.shape not in ((dof,), (dof + 1,)):
        raise CommandError(f'expected {dof} arm targets (+ optional gripper width), '
                           f'got {data.size} values', 'malformed')
    bad = np.flatnonzero(~np.isfinite(data))
    if bad.size:
        where = joint_names[bad[0]] if bad[0] < dof else 'gripper width'
        raise CommandError(f'{where} target is {data[bad[0]]}', 'non_finite')
    return ArmCommand(data[:dof].copy(), float(data[dof]) if data.size > dof else None)


def limit_violation(values: np.ndarray, bound: tuple[np.ndarray, np.ndarray],
                    names: Sequence[str], joints: np.ndarray, what: str) -> str | None:
    """The first entry of ``values`` (K, 7) outside ``bound`` (lower, upper) (7,), or None.

    Only the columns ``joints`` are checked; the text names the row, the joint (from
    ``names``), the value and the bound, e.g. ``point 2: fr3_joint4 target 9 rad is ...``.
    """
    lower, upper = bound[0][joints], bound[1][joints]
    picked = np.atleast_2d(values)[:, joints]
    bad = np.nonzero((picked < lower - TOLERANCE) | (picked > upper + TOLERANCE))
    if not bad[0].size:
        return None
    row, col = int(bad[0][0]), int(bad[1][0])
    joint = int(joints[col])
    unit = 'rad/s' if what == 'velocity' else 'rad'
    return (f'point {row}: {names[joint]} {what} {picked[row, col]:.6g} {unit} is outside '
            f'[{bound[0][joint]:g}, {bound[1][joint]:g}] {unit}')


def check_command(command: ArmCommand, spec: RobotSpec) -> None:
    """Raise :class:`CommandError` for a target or gripper width outside the spec's range."""
    problem = limit_violation(command.arm, (spec.position_lower, spec.position_upper),
                              spec.arm_joints, np.arange(len(spec.arm_joints)), 'target')
    if problem is not None:
        raise CommandError(problem.split(': ', 1)[1] + ' (its position limits)', 'position_limits')
    width = command.gripper_width
    gripper = spec.gripper
    if width is not None and not (gripper.width_min - TOLERANCE <= width
                                  <= gripper.width_max + TOLERANCE):
        raise CommandError(f'gripper width {width:.6g} m is outside [{gripper.width_min:g}, '
                           f'{gripper.width_max:g}] m', 'gripper_limits')
