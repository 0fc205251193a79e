"""The arm's protective stops, apart from ROS: when a real Franka arm stops itself (no rclpy).

A Franka arm that is commanded or pushed beyond a limit stops its motion, holds, and reports
the error (libfranka's ``franka::Exception``; franka_ros2 reports it, and the arm stays in
reflex mode until franka_msgs' ``ErrorRecovery`` action is called). The simulator stops the
same way, on the same limits (the robot spec's, one source):

- ``joint_velocity_violation``: a command that would move a joint faster than its velocity
  limit (checked when the command is applied: the controller would drive the arm there), or
  a measured joint velocity beyond the limit (checked at every physics step). Where the spec
  gives position-based limits (:meth:`~simops_core.robot_spec.RobotSpec.velocity_bounds`,
  the FR3's), the limit is the one at the position: a command segment's mean velocity at
  its end point, a measured velocity at the measured position;
- ``joint_position_limits_violation``: a measured joint position beyond the spec's limits;
- ``joint_reflex``: the torque contacts put on a joint beyond its collision threshold (the
  collision behaviour's ``upper_torque_thresholds_nominal``: the spec's, or what
  ``set_full_collision_behavior`` set).

Errors are named as franka_msgs' ``Errors`` fields. Arrays are (7,) in the spec's arm order;
rad, rad/s, N*m. A NaN counts as beyond every limit.

The arm's user stop latches the same way (:data:`USER_STOP`, no ``Errors`` field: libfranka
sets none for it): pressed, the arm holds where it is (robot mode USER_STOPPED); released,
it stays stopped (robot mode IDLE) until error recovery, which is refused while it is
pressed (franka_gazebo's model of the arm: franka_gazebo/include/franka_gazebo/
statemachine.h:52-66, 73-78 at 09be037).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simops_core.franka_ros2 import (
    ROBOT_MODE_IDLE,
    ROBOT_MODE_MOVE,
    ROBOT_MODE_REFLEX,
    ROBOT_MODE_USER_STOPPED,
)
from simops_core.robot_spec import RobotSpec

SPEED_TOLERANCE = 0.01    # fraction a command may exceed the velocity limit by (rounding)
POSITION_TOLERANCE = 1e-3  # rad a measured position may lie beyond a limit (joint-limit softness)
USER_STOP = 'user_stop'    # a stop's ``error`` for the user stop; its text: pressed or released
PRESSED, RELEASED = 'pressed', 'released'


@dataclass(frozen=True)
class ProtectiveStop:
    """A latched stop: the franka_msgs ``Errors`` field ``error``, the joint, sim ``time`` (s).

    ``text`` says what was beyond which limit, e.g. ``fr3_joint4 at 3.1 rad/s beyond its
    2.62 rad/s limit``. The user stop's ``error`` is :data:`USER_STOP`, its ``text``
    :data:`PRESSED` or :data:`RELEASED`, its joint ''.
    """

    error: str
    joint: str
    time: float
    text: str

    @property
    def user_stop(self) -> bool:
        """Whether this is the arm's user stop (pressed or released, not yet recovered)."""
        return self.error == USER_STOP

    @property
    def pressed(self) -> bool:
        """Whether this is the arm's user stop, still pressed (error recovery is refused)."""
        return self.user_stop and self.text == PRESSED

    def message(self) -> str:
        """One line for a log, a diagnostics status or an action result."""
        if self.user_stop:
            return f'user stop ({self.text}) at t={self.time:.3f} s'
        return f'protective stop ({self.error}): {self.text} at t={self.time:.3f} s'


def user_stop_pressed(time: float) -> ProtectiveStop:
    """The arm's user stop, pressed at sim ``time`` (s)."""
    return ProtectiveStop(USER_STOP, '', time, PRESSED)


def robot_mode(stop: ProtectiveStop | None) -> int:
    """Franka's ``robot_mode`` of an arm with ``stop`` in force (None: it moves)."""
    if stop is None:
        return ROBOT_MODE_MOVE
    if stop.user_stop:
        return ROBOT_MODE_USER_STOPPED if stop.pressed else ROBOT_MODE_IDLE
    return ROBOT_MODE_REFLEX


def stop_errors(stop: ProtectiveStop | None) -> list[str]:
    """The franka_msgs ``Errors`` fields ``stop`` sets (the user stop sets none)."""
    return [] if stop is None or stop.user_stop else [stop.error]


class Reflexes:
    """The checks of one arm; see the module docstring."""

    def __init__(self, spec: RobotSpec) -> None:
        self.spec = spec
        self._lower = spec.position_lower - POSITION_TOLERANCE
        self._upper = spec.position_upper + POSITION_TOLERANCE
        self._speed = spec.velocity
        self._position_based = spec.velocity_offset is not None
        # A sufficient condition for the position-based limits, cheaper than computing them:
        # a joint whose stopping distance (|qd| + v_offset)^2 / (2 a_dec) from where it is
        # stays within its position limits is under both of them (velocity_bounds). (7,):
        # the limits' centre and half-width, v_offset and 1 / (2 a_dec); without
        # position-based limits nothing limits (an infinite half-width).
        self._stop_centre, self._stop_half = np.zeros(7), np.full(7, np.inf)
        self._offset, self._inverse = np.zeros(7), np.zeros(7)
        if self._position_based:
            self._stop_centre = (spec.position_upper + spec.position_lower) / 2.0
            self._stop_half = (spec.position_upper - spec.position_lower) / 2.0
            self._offset = np.asarray(spec.velocity_offset, float)
            self._inverse = 0.5 / spec.deceleration
        self.set_collision_torque(spec.collision_torque)

    def set_collision_torque(self, threshold: np.ndarray) -> None:
        """Stop on a contact torque beyond ``threshold`` (7,) N*m, all positive.

        The spec's at start; franka_hardware's ``set_full_collision_behavior`` changes it
        (its ``upper_torque_thresholds_nominal``).
        """
        self._contact = np.array(threshold, dtype=float)
        # The box every measured (position, velocity, contact) (3, 7) must lie in, as its
        # centre and half-widths, for a one-pass check at every physics step.
        low = np.stack((self._lower, -self._speed, -self._contact))
        high = np.stack((self._upper, self._speed, self._contact))
        self._centre, self._half = (high + low) / 2.0, (high - low) / 2.0

    def command(self, peak_speed: np.ndarray, now: float,
                segments: tuple[np.ndarray, np.ndarray] | None = None
                ) -> ProtectiveStop | None:
        """The stop a command moving each joint at up to ``peak_speed`` (7,) rad/s trips.

        ``segments``: the command's segments as (end positions (K, 7) rad, mean velocities
        (K, 7) rad/s), judged against the position-based limits at their ends.
        """
        over = _beyond(peak_speed, self.spec.velocity * (1.0 + SPEED_TOLERANCE))
        if over is not None:
            joint = over
            return self._stop('joint_velocity_violation', joint, now,
                              f'a command moves {self.spec.arm_joints[joint]} at '
                              f'{peak_speed[joint]:.3g} rad/s, beyond its '
                              f'{self.spec.velocity[joint]:g} rad/s limit')
        if segments is None or not self._position_based:
            return None
        ends, velocities = segments
        speed = np.abs(velocities)
        if (speed <= self._speed).all() and _stops_within(
                ends, speed, self._stop_centre, self._stop_half, self._offset, self._inverse,
                np.empty_like(speed)):
            return None   # the usual case: every segment ends far enough from the limits
        low, high = self.spec.velocity_bounds(ends)
        excess = _position_based_excess(velocities, low, high)
        if not np.any(excess > 0.0):
            return None
        row, joint = np.unravel_index(int(np.argmax(excess)), excess.shape)
        bound = high[row, joint] if velocities[row, joint] > 0 else low[row, joint]
        return self._stop('joint_velocity_violation', int(joint), now,
                          f'a command moves {self.spec.arm_joints[joint]} at '
                          f'{velocities[row, joint]:.3g} rad/s towards '
                          f'{ends[row, joint]:.4g} rad, where the position-based limit is '
                          f'{bound:.3g} rad/s')

    def within(self, measured: np.ndarray) -> bool:
        """Whether ``measured`` (3, 7) (position, velocity, contact) trips no stop.

        False for a NaN (then :meth:`measure` names the stop); :class:`ReflexBank`'s check.
        """
        return bool(ReflexBank([self]).inside(measured[:, None])[0])

    def measure(self, position: np.ndarray, velocity: np.ndarray, contact: np.ndarray,
                now: float) -> ProtectiveStop | None:
        """The stop the measured arm state trips, or None.

        ``position`` (7,) rad, ``velocity`` (7,) rad/s, ``contact`` (7,) N*m: the joint
        torques the contacts apply.
        """
        names, spec = self.spec.arm_joints, self.spec
        checks = (
            ('joint_position_limits_violation',
             np.maximum(self._lower - position, position - self._upper), 0.0,
             lambda j: f'{names[j]} is at {position[j]:.4g} rad, outside '
                       f'[{spec.position_lower[j]:g}, {spec.position_upper[j]:g}] rad'),
            ('joint_velocity_violation', np.abs(velocity), self._speed,
             lambda j: f'{names[j]} moves at {velocity[j]:.3g} rad/s, beyond its '
                       f'{spec.velocity[j]:g} rad/s limit'),
            ('joint_velocity_violation', _position_based_excess(
                velocity, *spec.velocity_bounds(position)) if self._position_based
             else np.zeros_like(velocity), 0.0,
             lambda j: f'{names[j]} moves at {velocity[j]:.3g} rad/s at {position[j]:.4g} '
                       'rad, beyond its position-based limit there'),
            ('joint_reflex', np.abs(contact), self._contact,
             lambda j: f'a contact puts {contact[j]:.3g} N*m on {names[j]}, beyond its '
                       f'{self._contact[j]:g} N*m collision threshold'))
        for error, values, limit, text in checks:
            joint = _beyond(values, limit)
            if joint is not None:
                return self._stop(error, joint, now, text(joint))
        return None

    def _stop(self, error: str, joint: int, now: float, text: str) -> ProtectiveStop:
        return ProtectiveStop(error, self.spec.arm_joints[joint], now, text)


class ReflexBank:
    """The checks of several arms' :class:`Reflexes` at once (the actuator law's rows).

    Each arm's own box (its limits and collision thresholds), and the position-based limits
    of each spec, on arrays: the one-pass check the actuator law runs after every physics
    step (:mod:`simops_sim.actuator_law`).
    """

    def __init__(self, reflexes: Sequence[Reflexes]) -> None:
        # (3, n, 7); n >= 1: the measured quantity first, so each is contiguous per arm
        self._centre = np.array([r._centre for r in reflexes]).swapaxes(0, 1).copy()
        self._half = np.array([r._half for r in reflexes]).swapaxes(0, 1).copy()
        by_spec: dict[bytes, list[int]] = {}   # arms whose position-based limits are equal
        for i, r in enumerate(reflexes):
            if r._position_based:
                by_spec.setdefault(_limits_key(r.spec), []).append(i)
        everyone = len(reflexes)
        self._everyone = np.ones(everyone, bool)
        self._everyone.flags.writeable = False
        self._position_based = [(reflexes[rows[0]].spec,
                                 slice(None) if len(rows) == everyone else np.array(rows))
                                for rows in by_spec.values()]
        # each arm's stopping-distance terms (Reflexes.__init__), (n, 7)
        self._stop_centre = np.array([r._stop_centre for r in reflexes])
        self._stop_half = np.array([r._stop_half for r in reflexes])
        self._offset = np.array([r._offset for r in reflexes])
        self._inverse = np.array([r._inverse for r in reflexes])
        self._reach = np.zeros((everyone, 7))   # scratch

    def inside(self, measured: np.ndarray) -> np.ndarray:
        """Whether each arm's state trips no stop: (n,) bool (read only).

        ``measured`` (3, n, 7): positions (rad), velocities (rad/s) and contact torques
        (N*m) of the n arms.
        """
        box = np.abs(measured - self._centre) <= self._half
        if box.all():
            reach = self._reach
            np.abs(measured[1], out=reach)
            if _stops_within(measured[0], reach, self._stop_centre, self._stop_half,
                             self._offset, self._inverse, reach):
                return self._everyone   # the usual case: far enough from the limits
            for spec, rows in self._position_based:
                if self._beyond_position_based(measured, spec, rows).any():
                    break
            else:
                return self._everyone   # the usual case: no NaN, every arm inside
        ok = box.all(axis=(0, 2))
        for spec, rows in self._position_based:
            ok[rows] &= ~self._beyond_position_based(measured, spec, rows).any(axis=-1)
        return ok

    @staticmethod
    def _beyond_position_based(measured: np.ndarray, spec: RobotSpec,
                               rows: slice | np.ndarray) -> np.ndarray:
        """(n, 7) bool: each velocity beyond its position-based limit (a NaN counts)."""
        if measured.shape[1] == 1:   # one arm: (7,) operands broadcast at half the cost
            low, high = spec.velocity_bounds(measured[0, 0])
            return (_position_based_excess(measured[1, 0], low, high) > 0.0)[None]
        low, high = spec.velocity_bounds(measured[0, rows])
        return _position_based_excess(measured[1, rows], low, high) > 0.0


def _limits_key(spec: RobotSpec) -> bytes:
    """What :meth:`RobotSpec.velocity_bounds` depends on, as one key (equal specs, one key)."""
    return b''.join(np.ascontiguousarray(a, dtype=float).tobytes() for a in (
        spec.position_lower, spec.position_upper, spec.velocity, spec.velocity_offset,
        spec.deceleration))


def _stops_within(position: np.ndarray, speed: np.ndarray, centre: np.ndarray,
                  half: np.ndarray, offset: np.ndarray, inverse: np.ndarray,
                  out: np.ndarray) -> bool:
    """Whether every joint stops within its position limits (then it is under its limits).

    ``position`` (..., 7) rad, ``speed`` (..., 7) rad/s (>= 0). The stopping distance
    ``(speed + offset)^2 * inverse`` (``inverse`` = 1 / (2 a_dec)) from the position lies
    within ``half`` of the limits' ``centre``; sufficient, not necessary (a joint near a
    limit may still be under it). A NaN answers False. ``out``: scratch of ``speed``'s shape
    (it may be ``speed`` itself).
    """
    np.add(speed, offset, out=out)
    np.square(out, out=out)
    out *= inverse
    out += np.abs(position - centre)
    return bool((out <= half).all())


def _position_based_excess(velocity: np.ndarray, low: np.ndarray, high: np.ndarray
                           ) -> np.ndarray:
    """How far (rad/s) each ``velocity`` lies beyond [``low``, ``high``], less the rounding.

    > 0 trips a stop; a NaN counts as beyond.
    """
    slack = 1.0 + SPEED_TOLERANCE
    excess = np.maximum(velocity - high * slack, low * slack - velocity)
    return np.where(np.isnan(excess), np.inf, excess)


def _beyond(values: np.ndarray, limit: np.ndarray | float) -> int | None:
    """The joint furthest beyond ``limit`` (a NaN counts as beyond it), or None."""
    excess = values - limit
    if not np.any(~(excess <= 0.0)):
        return None
    return int(np.argmax(np.where(np.isnan(excess), np.inf, excess)))
