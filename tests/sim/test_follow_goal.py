"""FollowJointTrajectory rules (simops_sim.follow_goal): JointTrajectoryController's, no ROS."""

from __future__ import annotations

import numpy as np
import pytest
from control_msgs.action import FollowJointTrajectory
from hypothesis import given
from hypothesis import strategies as st

from simops_core.robot_spec import load_robot_spec
from simops_sim.follow_goal import (
    FollowResult,
    GoalMonitor,
    Tolerances,
    default_tolerances,
    goal_problem,
    goal_tolerances,
)
from simops_sim.trajectory_plan import parse_trajectory

SPEC = load_robot_spec('fr3')
JOINTS = list(SPEC.arm_joints)
DEFAULTS = default_tolerances(SPEC.constraints)


def test_result_codes_are_control_msgs() -> None:
    for code in FollowResult:
        assert getattr(FollowJointTrajectory.Result, code.name) == code.value


def test_defaults_are_the_controllers_constraints() -> None:
    assert not DEFAULTS.path.any() and not DEFAULTS.goal[:, 0].any()
    assert np.all(DEFAULTS.goal[:, 1] == 0.01) and DEFAULTS.goal_time == 0.0


def test_goal_values_replace_erase_or_keep_the_defaults() -> None:
    base = Tolerances(np.full((7, 3), 0.1), np.full((7, 3), 0.2), 1.0)
    got, why = goal_tolerances(base, JOINTS, [('fr3_joint2', 0.05, -1.0, 0.0)],
                               [('fr3_joint7', 0.0, 0.3, -1.0)], -1.0)
    assert why is None and got.goal_time == 0.0                 # -1: erased
    np.testing.assert_array_equal(got.path[1], [0.05, 0.0, 0.1])
    np.testing.assert_array_equal(got.goal[6], [0.2, 0.3, 0.0])
    np.testing.assert_array_equal(got.path[0], base.path[0])    # untouched joints keep theirs


@pytest.mark.parametrize(('path', 'goal', 'goal_time', 'named'), [
    ([('elbow', 0.1, 0.0, 0.0)], [], 0.0, "'elbow'"),
    ([], [('fr3_joint1', -0.5, 0.0, 0.0)], 0.0, 'illegal'),
    ([], [], -2.0, 'goal_time_tolerance'),
])
def test_a_bad_tolerance_keeps_every_default(path: list, goal: list, goal_time: float,
                                            named: str) -> None:
    got, why = goal_tolerances(DEFAULTS, JOINTS, path, goal, goal_time)
    assert got is DEFAULTS and why is not None and named in why


def goal(names: list[str], start: float | None = None) -> object:
    times = [1.0, 2.0]
    return parse_trajectory(names, times, [[0.0] * len(names)] * 2, [[], []], JOINTS, start)


def test_goals_jtc_rejects() -> None:
    assert goal_problem(goal(JOINTS), 7, None, now=5.0) is None
    assert 'all of them' in goal_problem(goal(JOINTS[:3]), 7, None, now=5.0)
    assert 'rest' in goal_problem(goal(JOINTS), 7, np.full(7, 0.1), now=5.0)
    assert 'past' in goal_problem(goal(JOINTS, start=1.0), 7, None, now=5.0)
    assert goal_problem(goal(JOINTS, start=4.0), 7, None, now=5.0) is None   # ends at 6 s


def test_monitor_path_goal_and_goal_time() -> None:
    tight = Tolerances(np.tile([0.01, 0.0, 0.0], (7, 1)), np.tile([0.002, 0.01, 0.0], (7, 1)),
                       0.5)
    monitor = GoalMonitor(tight, start=10.0, times=np.array([1.0, 2.0]))
    still, off = np.zeros(7), np.zeros(7)
    off[3] = 0.02
    assert monitor.check(10.5, still, still) is None
    code, why = monitor.check(10.5, off, still)
    assert code is FollowResult.PATH_TOLERANCE_VIOLATED and 'joint 4' in why
    assert monitor.check(12.2, off, still) is None                  # late, within goal_time
    assert monitor.check(12.6, off, still)[0] is FollowResult.GOAL_TOLERANCE_VIOLATED
    assert monitor.check(12.6, still, still)[0] is FollowResult.SUCCESSFUL
    assert [monitor.index(t) for t in (10.0, 11.0, 11.5, 12.0)] == [0, 1, 1, 2]
    forever = GoalMonitor(DEFAULTS, start=0.0, times=np.array([1.0]))   # goal_time 0
    moving = np.full(7, 0.05)
    assert forever.check(1e6, still, moving) is None                # never stopped, never late
    assert forever.check(1e6, off, still)[0] is FollowResult.SUCCESSFUL   # no position bound


@given(st.lists(st.floats(-1.0, 1.0), min_size=14, max_size=14),
       st.lists(st.floats(0.0, 0.5), min_size=14, max_size=14),
       st.floats(0.0, 3.0))
def test_monitor_outcome_follows_the_tolerances(errors: list[float], bounds: list[float],
                                                now: float) -> None:
    """Before the end only the path bounds matter; after it, success means every set goal
    bound holds; a 0 bound never fails anything."""
    error = np.array(errors).reshape(7, 2)
    limits = np.zeros((7, 3))
    limits[:, :2] = np.array(bounds).reshape(7, 2)
    monitor = GoalMonitor(Tolerances(limits, limits, 0.0), start=0.0, times=np.array([1.5]))
    outcome = monitor.check(now, error[:, 0], error[:, 1])
    within = bool(np.all((limits[:, :2] == 0) | (np.abs(error) <= limits[:, :2])))
    if now < 1.5:
        assert (outcome is None) == within
    else:
        assert (outcome is not None and outcome[0] is FollowResult.SUCCESSFUL) == within
