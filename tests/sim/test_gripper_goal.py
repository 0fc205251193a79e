"""Franka Hand motion verdicts (simops_sim.gripper_goal), no ROS."""

from __future__ import annotations

import pytest

from simops_core.robot_spec import load_robot_spec
from simops_sim.gripper_goal import (
    STOP_TIME,
    GripperMotion,
    GripperTask,
    judge,
    task_problem,
)

HAND = load_robot_spec('fr3').gripper


def test_grasp_succeeds_only_within_epsilon() -> None:
    task = GripperTask('grasp', 0.04, 0.1, 20.0, 0.005, 0.005)
    assert judge(task, 0.0401) == (True, '')
    assert judge(task, 0.0351)[0] and judge(task, 0.0449)[0]
    ok, why = judge(task, 0.0)   # closed on nothing
    assert not ok and 'outside' in why
    assert not judge(task, 0.046)[0]


def test_move_succeeds_near_its_width_and_fails_when_blocked() -> None:
    task = GripperTask('move', 0.08, 0.1, 70.0)
    assert judge(task, 0.0795)[0]
    ok, why = judge(task, 0.04)
    assert not ok and '40.0 mm' in why


def test_a_grasp_drives_past_its_width() -> None:
    closing = GripperTask('grasp', 0.04, 0.1, 20.0)
    assert closing.drive_to(HAND, 0.08) == HAND.width_min
    assert closing.drive_to(HAND, 0.02) == HAND.width_max   # an inner grasp opens
    assert GripperTask('move', 0.03, 0.1, 70.0).drive_to(HAND, 0.08) == 0.03


@pytest.mark.parametrize(('task', 'named'), [
    (GripperTask('move', 0.09, 0.1, 70.0), 'width'),
    (GripperTask('move', 0.05, 0.0, 70.0), 'speed'),
    (GripperTask('move', 0.05, 0.2, 70.0), 'speed'),
    (GripperTask('grasp', 0.05, 0.1, 80.0), 'force'),
    (GripperTask('grasp', 0.05, 0.1, 20.0, -0.001, 0.0), 'epsilon'),
])
def test_tasks_beyond_the_hand_are_refused(task: GripperTask, named: str) -> None:
    assert named in task_problem(task, HAND)


def test_a_motion_ends_after_the_fingers_stand_still() -> None:
    task = GripperTask('move', 0.04, 0.1, 70.0)
    motion = GripperMotion(task, start=0.0, opening=0.08, gripper=HAND)
    assert motion.update(0.05, 0.075, -0.1) is None          # moving
    assert motion.update(0.40, 0.0401, 0.0) is None          # just stopped
    assert motion.update(0.40 + STOP_TIME / 2, 0.0401, 0.0) is None
    assert motion.update(0.40 + STOP_TIME + 1e-6, 0.0401, 0.0) == (True, '')
    stuck = GripperMotion(task, start=0.0, opening=0.08, gripper=HAND)
    assert stuck.update(0.1, 0.08, 0.0) is None
    assert stuck.update(stuck.deadline, 0.08, -0.05)[0] is False   # past the deadline
