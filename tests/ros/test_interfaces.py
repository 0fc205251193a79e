"""The interface copies of interfaces/ (control_msgs, franka_msgs), built by ``make build``.

Their fields match the published definitions they copy (control_msgs 6.8.0, franka_msgs of
franka_ros2 2.5.0), and rclpy uses them across processes over DDS: action goals, feedback
and results round trip between this test and tests/procs/interface_servers.py.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import JointComponentTolerance, JointTolerance
from franka_msgs.action import ErrorRecovery, Grasp, Homing, Move
from franka_msgs.msg import Errors, FrankaRobotState, GraspEpsilon
from franka_msgs.srv import (
    SetCartesianStiffness,
    SetForceTorqueCollisionBehavior,
    SetJointStiffness,
    SetStiffnessFrame,
    SetTCPFrame,
)
from ros_helpers import NodeProcess, RosProbe, wait_until
from trajectory_msgs.msg import JointTrajectoryPoint

from simops_core import franka_ros2
from simops_ros.rclpy_compat import DISTRO

PROCS = Path(__file__).parents[1] / 'procs'
RETRY = 5.0   # s before an unanswered goal or result request is sent again


def fields(cls: type) -> dict[str, str]:
    """A message class's field names and types, in order."""
    return dict(cls.get_fields_and_field_types())


def test_fields_match_the_published_definitions() -> None:
    assert list(fields(FollowJointTrajectory.Goal)) == [
        'trajectory', 'multi_dof_trajectory', 'path_tolerance', 'component_path_tolerance',
        'goal_tolerance', 'component_goal_tolerance', 'goal_time_tolerance']
    assert fields(FollowJointTrajectory.Result) == {'error_code': 'int32',
                                                    'error_string': 'string'}
    # control_msgs 6.3+ (Kilted) adds the point indices; Jazzy's 5.8 has none
    index, dof_index = (['index'], ['multi_dof_index']) if DISTRO == 'kilted' else ([], [])
    assert list(fields(FollowJointTrajectory.Feedback)) == [
        'header', 'joint_names', 'desired', 'actual', 'error', *index, 'multi_dof_joint_names',
        'multi_dof_desired', 'multi_dof_actual', 'multi_dof_error', *dof_index]
    codes = {name: getattr(FollowJointTrajectory.Result, name) for name in (
        'SUCCESSFUL', 'INVALID_GOAL', 'INVALID_JOINTS', 'OLD_HEADER_TIMESTAMP',
        'PATH_TOLERANCE_VIOLATED', 'GOAL_TOLERANCE_VIOLATED')}
    assert list(codes.values()) == [0, -1, -2, -3, -4, -5]
    assert list(fields(JointTolerance)) == ['name', 'position', 'velocity', 'acceleration']
    assert JointComponentTolerance.ROTATION == 5
    assert list(fields(GripperCommand.Goal)) == ['command']
    assert list(fields(GripperCommand.Result)) == ['position', 'effort', 'stalled',
                                                   'reached_goal']
    assert list(fields(Grasp.Goal)) == ['width', 'epsilon', 'speed', 'force']
    assert GraspEpsilon().inner == GraspEpsilon().outer == 0.005   # m, franka_msgs' defaults
    assert list(fields(Move.Goal)) == ['width', 'speed']
    for action in (Grasp, Homing, Move):
        assert fields(action.Result) == {'success': 'boolean', 'error': 'string'}
        assert fields(action.Feedback) == {'current_width': 'double'}
    assert fields(Homing.Goal) == fields(ErrorRecovery.Result) == {}
    assert list(fields(FrankaRobotState)) == [
        'header', 'collision_indicators', 'measured_joint_state', 'desired_joint_state',
        'measured_joint_motor_state', 'ddq_d', 'dtau_j', 'tau_ext_hat_filtered', 'elbow',
        'k_f_ext_hat_k', 'o_f_ext_hat_k', 'inertia_ee', 'inertia_load', 'inertia_total',
        'o_t_ee', 'o_t_ee_d', 'o_t_ee_c', 'f_t_ee', 'ee_t_k', 'o_dp_ee_d', 'o_dp_ee_c',
        'o_ddp_ee_c', 'time', 'control_command_success_rate', 'robot_mode', 'current_errors',
        'last_motion_errors']
    assert fields(FrankaRobotState)['ddq_d'] == 'double[7]'
    services = {SetJointStiffness: {'joint_stiffness': 'double[7]'},
                SetCartesianStiffness: {'cartesian_stiffness': 'double[6]'},
                SetTCPFrame: {'transformation': 'double[16]'},
                SetStiffnessFrame: {'transformation': 'double[16]'},
                SetForceTorqueCollisionBehavior: {
                    f'{bound}_{kind}_thresholds_nominal': f'double[{7 if kind == "torque" else 6}]'
                    for kind in ('torque', 'force') for bound in ('lower', 'upper')}}
    for service, request in services.items():
        assert fields(service.Request) == request, service
        assert fields(service.Response) == {'success': 'boolean', 'error': 'string'}
    assert FrankaRobotState.ROBOT_MODE_REFLEX == 4
    # the modes simops_core.franka_ros2 (ROS-free) reads are franka_msgs' own
    assert (franka_ros2.ROBOT_MODE_IDLE, franka_ros2.ROBOT_MODE_MOVE,
            franka_ros2.ROBOT_MODE_REFLEX, franka_ros2.ROBOT_MODE_USER_STOPPED) == (
        FrankaRobotState.ROBOT_MODE_IDLE, FrankaRobotState.ROBOT_MODE_MOVE,
        FrankaRobotState.ROBOT_MODE_REFLEX, FrankaRobotState.ROBOT_MODE_USER_STOPPED)
    assert FrankaRobotState.ROBOT_MODE_AUTOMATIC_ERROR_RECOVERY == 6
    errors = list(fields(Errors))
    assert len(errors) == 36 and set(fields(Errors).values()) == {'boolean'}
    assert errors[:4] == ['joint_position_limits_violation',
                          'cartesian_position_limits_violation',
                          'self_collision_avoidance_violation', 'joint_velocity_violation']
    assert errors[6] == 'joint_reflex' and errors[-1] == 'instability_detected'


def send(probe: RosProbe, action: type, name: str, goal: Any) -> tuple[Any, list[Any]]:
    """Send ``goal``; return the result message and the feedback received.

    A service response can be lost while the server has not yet matched the client's
    response reader (a loaded machine, right after discovery): an unanswered goal request is
    sent again, and an unanswered result request asked again, every :data:`RETRY` s.
    """
    client = probe.action_client(action, name)
    assert client.wait_for_server(timeout_sec=30.0), f'no {name} server'
    feedback: list[Any] = []
    done = threading.Event()
    box: dict[str, Any] = {}

    def on_result(future: Any) -> None:
        box['result'] = future.result().result
        done.set()

    def on_goal(future: Any) -> None:
        handle = future.result()
        assert handle.accepted
        box['handle'] = handle
        handle.get_result_async().add_done_callback(on_result)

    deadline = time.monotonic() + 30.0
    while not done.is_set():
        handle = box.get('handle')
        if handle is None:
            client.send_goal_async(goal, feedback_callback=lambda f: feedback.append(f.feedback)
                                   ).add_done_callback(on_goal)
        else:
            handle.get_result_async().add_done_callback(on_result)
        assert done.wait(RETRY) or time.monotonic() < deadline, f'no result from {name}'
    return box['result'], feedback


def test_actions_round_trip_across_processes(ros_probe: RosProbe, tmp_path: Path) -> None:
    with NodeProcess.python(PROCS / 'interface_servers.py',
                            log_path=tmp_path / 'servers.log') as servers:
        assert wait_until(lambda: 'serving' in servers.output, 30), servers.output
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = ['j1']
        goal.trajectory.points = [
            JointTrajectoryPoint(positions=[0.1 * k], time_from_start=Duration(sec=k))
            for k in (1, 2, 3)]
        goal.path_tolerance = [JointTolerance(name='j1', position=0.05)]
        goal.goal_time_tolerance = Duration(nanosec=500_000_000)
        result, feedback = send(ros_probe, FollowJointTrajectory,
                                '/test/follow_joint_trajectory', goal)
        assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
        assert list(feedback[0].desired.positions) == [pytest.approx(0.3)]
        assert DISTRO != 'kilted' or feedback[0].index == 2
        goal.trajectory.joint_names = ['elbow']
        result, _ = send(ros_probe, FollowJointTrajectory, '/test/follow_joint_trajectory',
                         goal)
        assert result.error_code == FollowJointTrajectory.Result.INVALID_JOINTS
        assert 'elbow' in result.error_string
        result, feedback = send(ros_probe, Move, '/test/move', Move.Goal(width=0.08, speed=0.1))
        assert result.success and feedback[0].current_width == 0.08
