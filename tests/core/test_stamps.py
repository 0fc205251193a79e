"""Stamps and the gripper width: the small rules every layer shares, each written once."""

from __future__ import annotations

import math

import numpy as np
from builtin_interfaces.msg import Duration, Time
from hypothesis import given
from hypothesis import strategies as st

from simops_core.robot_spec import gripper_width
from simops_core.stamps import split_nanoseconds, to_nanoseconds, to_seconds


@given(st.integers(-10**12, 2 * 10**18))
def test_nanoseconds_split_as_ros_stores_them_and_back(ns: int) -> None:
    sec, nanosec = split_nanoseconds(ns)
    assert 0 <= nanosec < 1_000_000_000 and sec * 1_000_000_000 + nanosec == ns
    assert to_nanoseconds(Duration(sec=sec, nanosec=nanosec)) == ns
    if sec >= 0:
        assert to_seconds(Time(sec=sec, nanosec=nanosec)) == sec + nanosec * 1e-9
    assert math.isclose(to_seconds(Duration(sec=sec, nanosec=nanosec)), ns * 1e-9,
                        rel_tol=1e-15, abs_tol=1e-15)


def test_the_gripper_width_is_the_sum_of_the_fingers_on_the_last_axis() -> None:
    fingers = np.array([[0.01, 0.02], [0.04, 0.04]])
    assert np.array_equal(gripper_width(fingers), [0.03, 0.08])
    assert float(gripper_width(fingers[1])) == 0.08
