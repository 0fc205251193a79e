"""A joystick's axes as a TCP twist: layouts, the dead-man, and messages it cannot read."""

from __future__ import annotations

import numpy as np

from simops_teleop.joy_twist import joy_twist
from simops_teleop.servo_law import ServoSettings

SETTINGS = ServoSettings.defaults(linear=0.2, rotational=0.8)


def test_a_spacemouse_maps_its_six_axes_to_the_caps() -> None:
    twist = joy_twist([1.0, -0.5, 0.25, 0.5, 0.0, -1.0], [1, 0], 'spacenav', 0, SETTINGS)
    np.testing.assert_allclose(twist, [0.2, -0.1, 0.05, 0.4, 0.0, -0.8])


def test_a_gamepad_maps_its_sticks() -> None:
    axes = [0.5, 1.0, 0.0, -0.25, 0.5, 0.0, 0.0, 0.0]   # left x, left y, lt, right x, right y
    twist = joy_twist(axes, [1] + [0] * 10, 'gamepad', 0, SETTINGS)
    np.testing.assert_allclose(twist, [0.2, 0.1, 0.1, 0.0, 0.0, -0.2])


def test_without_the_dead_man_nothing_moves_and_none_means_none_needed() -> None:
    axes = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert not joy_twist(axes, [0, 0], 'spacenav', 0, SETTINGS).any()
    assert joy_twist(axes, [0, 0], 'spacenav', -1, SETTINGS)[0] == 0.2


def test_deflections_beyond_full_are_clipped_and_unreadable_messages_refused() -> None:
    assert joy_twist([3.0, 0, 0, 0, 0, 0], [1], 'spacenav', 0, SETTINGS)[0] == 0.2
    assert joy_twist([0.0] * 5, [1], 'spacenav', 0, SETTINGS) is None        # too few axes
    assert joy_twist([0.0] * 6, [], 'spacenav', 0, SETTINGS) is None         # no dead-man
    assert joy_twist([np.nan] + [0.0] * 5, [1], 'spacenav', 0, SETTINGS) is None
