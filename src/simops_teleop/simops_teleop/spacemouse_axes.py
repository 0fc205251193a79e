"""A SpaceMouse's state as spacenav_node's ``spacenav/joy`` message carries it (no rclpy).

spacenav_node (ros-drivers/joystick_drivers, spacenav_node/README.md) publishes
sensor_msgs/Joy with six axes, linear x, y, z then angular x, y, z, each scaled to about
[-1, 1] (``full_scale``), in the ROS body convention (REP 103: x forward, y left, z up),
then the device's buttons. pyspacemouse reads the same six values in that convention
(``AxisConvention.ROS``), each within [-1, 1], so the front end publishes them unchanged;
the teleop node's ``spacenav`` layout (:mod:`simops_teleop.joy_twist`) reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

AXES = ('x', 'y', 'z', 'roll', 'pitch', 'yaw')   # pyspacemouse's names, spacenav's order
BUTTONS = 2   # spacenav's buttons: left (the dead-man of teleop:=spacemouse), right


class SpaceMouseState(Protocol):
    """What pyspacemouse's ``SpaceMouseDevice.read`` returns (the fields read here)."""

    x: float
    y: float
    z: float
    roll: float
    pitch: float
    yaw: float
    buttons: Sequence[int]


def joy_fields(state: SpaceMouseState) -> tuple[list[float], list[int]]:
    """``state`` as a Joy's axes (6,) within [-1, 1] and buttons (at least :data:`BUTTONS`).

    A device with fewer buttons reports the missing ones released.
    """
    axes = [min(1.0, max(-1.0, float(getattr(state, name)))) for name in AXES]
    buttons = [1 if pressed else 0 for pressed in state.buttons]
    return axes, buttons + [0] * (BUTTONS - len(buttons))
