"""A joystick's axes and buttons (sensor_msgs/Joy) as a TCP twist (no rclpy).

Layouts:

- ``spacenav``: spacenav_node's ``spacenav/joy`` (remap ``/joy`` to it): the 3D mouse's six
  degrees of freedom, linear x, y, z then angular x, y, z, each approximately within
  [-1, 1], then its buttons (ros-drivers/joystick_drivers, spacenav_node/README.md);
- ``gamepad``: an Xbox-style pad as joy_linux reads it: left stick (axes 1, 0) = linear x,
  y; right stick (axes 4, 3) = linear z and yaw; a stick's up and left are positive.

Axes scale the speed caps (m/s, rad/s): a full deflection asks for the cap. With a
``deadman`` button (>= 0) nothing moves unless it is held: teleop_twist_joy's
``enable_button``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simops_teleop.servo_law import ServoSettings

# twist component -> axis index; angular components carry the rotational cap
LAYOUTS: dict[str, tuple[int | None, ...]] = {
    'spacenav': (0, 1, 2, 3, 4, 5),
    'gamepad': (1, 0, 4, None, None, 3),
}


def joy_twist(axes: Sequence[float], buttons: Sequence[int], layout: str, deadman: int,
              settings: ServoSettings) -> np.ndarray | None:
    """The twist (6,) m/s and rad/s ``axes`` ask for; zeros without the dead-man held.

    None for a message this layout cannot read (too few axes or buttons), or with a
    non-finite axis.
    """
    slots = LAYOUTS[layout]
    if max(i for i in slots if i is not None) >= len(axes) or deadman >= len(buttons):
        return None
    values = np.array([axes[i] if i is not None else 0.0 for i in slots], dtype=float)
    if not np.all(np.isfinite(values)):
        return None
    if deadman >= 0 and not buttons[deadman]:
        return np.zeros(6)
    values = np.clip(values, -1.0, 1.0)
    values[:3] *= settings.linear
    values[3:] *= settings.rotational
    return values
