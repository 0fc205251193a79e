"""Franka Hand motions as franka_gripper judges them (no rclpy).

franka_gripper (franka_ros2) offers ``homing``, ``move`` and ``grasp`` (franka_msgs) and a
control_msgs ``gripper_action``. The fingers move at the goal's speed until they reach the
target or something blocks them; a motion ends once the fingers have stood still for
:data:`STOP_TIME`. Then

- ``move`` and ``homing`` succeed when the opening is within :data:`MOVE_TOLERANCE` of the
  target (a blocked move fails);
- ``grasp`` drives the fingers towards the object (closing when the width is below the
  current opening) with at most the goal's force, and succeeds only when the final opening
  ``d`` satisfies ``width - epsilon.inner <= d <= width + epsilon.outer``: an empty grasp
  closes fully and fails, as on the real gripper;
- ``gripper_action`` (GripperCommand) is a ``move`` to ``2 * position`` when that opens the
  gripper and a ``grasp`` with the default epsilon otherwise, as franka_gripper maps it.
"""

from __future__ import annotations

from dataclasses import dataclass

from simops_core.robot_spec import GripperSpec

STOP_SPEED = 0.002       # m/s: slower fingers count as standing still (or speed / 2)
STOP_TIME = 0.1          # s standing still that ends a motion
MOVE_TOLERANCE = 0.002   # m: how close a move must end to its width
DEFAULT_EPSILON = 0.005  # m, franka_gripper's default grasp epsilon (inner and outer)
DEFAULT_SPEED = 0.1      # m/s, franka_gripper's default speed (gripper_action)
SLACK = 2.0              # s beyond the nominal duration before a motion is ended anyway


@dataclass(frozen=True)
class GripperTask:
    """One gripper motion.

    ``kind`` (``move``, ``grasp``, ``homing``), the ``width`` (m) it aims at, the finger
    ``speed`` (m/s) and ``force`` (N), and for a grasp the ``inner`` and ``outer`` epsilon (m).
    """

    kind: str
    width: float
    speed: float
    force: float
    inner: float = 0.0
    outer: float = 0.0

    def drive_to(self, gripper: GripperSpec, opening: float) -> float:
        """Where the fingers are driven (m) from ``opening``: a grasp goes past its width."""
        if self.kind != 'grasp':
            return self.width
        return gripper.width_min if self.width <= opening else gripper.width_max


def task_problem(task: GripperTask, gripper: GripperSpec) -> str | None:
    """Why ``task`` cannot run on ``gripper``, or None."""
    if not gripper.width_min <= task.width <= gripper.width_max:
        return (f'width {task.width:g} m is outside {gripper.width_min:g}-'
                f'{gripper.width_max:g} m')
    if not 0.0 < task.speed <= gripper.speed_max:
        return f'speed {task.speed:g} m/s is outside (0, {gripper.speed_max:g}] m/s'
    if not 0.0 <= task.force <= gripper.force_max:
        return f'force {task.force:g} N is outside [0, {gripper.force_max:g}] N'
    if task.inner < 0.0 or task.outer < 0.0:
        return 'epsilon inner and outer must be >= 0 m'
    return None


class GripperMotion:
    """Watches one running task; ``start`` (s) and ``opening`` (m) when it began."""

    def __init__(self, task: GripperTask, start: float, opening: float,
                 gripper: GripperSpec) -> None:
        self.task = task
        span = abs(task.drive_to(gripper, opening) - opening) / task.speed
        self.deadline = start + span + SLACK
        self._still_since: float | None = None
        self._still_speed = min(STOP_SPEED, task.speed / 2.0)

    def update(self, now: float, opening: float, rate: float) -> tuple[bool, str] | None:
        """(success, error) once the motion has ended, else None.

        At sim time ``now`` (s), with the measured ``opening`` (m) and its ``rate`` (m/s).
        """
        if abs(rate) > self._still_speed and now < self.deadline:
            self._still_since = None
            return None
        if self._still_since is None:
            self._still_since = now
        if now - self._still_since < STOP_TIME and now < self.deadline:
            return None
        return judge(self.task, opening)


def judge(task: GripperTask, opening: float) -> tuple[bool, str]:
    """(success, error) of ``task`` ending at ``opening`` (m)."""
    if task.kind == 'grasp':
        low, high = task.width - task.inner, task.width + task.outer
        if low <= opening <= high:
            return True, ''
        return False, (f'grasp failed: the fingers stopped at {opening:.4f} m, outside '
                       f'[{low:.4f}, {high:.4f}] m')
    if abs(opening - task.width) <= MOVE_TOLERANCE:
        return True, ''
    return False, (f'{task.kind} failed: the fingers stopped at {opening:.4f} m, '
                   f'{abs(opening - task.width) * 1e3:.1f} mm from {task.width:.4f} m')
