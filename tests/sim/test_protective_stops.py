"""Protective stops over DDS: the arm stops itself like a real FR3 and waits for recovery.

A real ``sim`` process. A step command beyond the velocity limit stops the arm: it holds,
``/diagnostics`` and franka_robot_state_broadcaster's ``robot_state`` report the error,
commands on the topics and FollowJointTrajectory goals are refused until franka_hardware's
recovery procedure (:class:`sim_helpers.Recovery`); then the arm moves again. A goal that
drives the hand onto the table ends in the collision reflex and is aborted.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from franka_msgs.msg import FrankaRobotState
from policy_helpers import call_enable, states, wait_state, watch, write_policy
from rclpy.qos import qos_profile_system_default
from ros_helpers import NodeProcess, RosProbe, wait_until
from sim_helpers import (
    Recovery,
    command_publisher,
    measured,
    qos,
    settled,
    smooth_goal,
    start_sim,
    subscribe_states,
    topic,
)
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool
from test_follow_action import Goal, client_for

from simops_core.robot_spec import load_robot_spec
from simops_ros.franka_recovery import RecoveryError

SPEC = load_robot_spec('fr3')
ROBOT_STATE = '/franka_robot_state_broadcaster/robot_state'


def status(probe: RosProbe) -> DiagnosticStatus:
    return probe.wait_for_messages(topic('diagnostics').name)[-1].status[0]


def robot_state(probe: RosProbe) -> FrankaRobotState:
    return probe.wait_for_messages(ROBOT_STATE)[-1]


def values(report: DiagnosticStatus) -> dict[str, str]:
    return {kv.key: kv.value for kv in report.values}


def test_a_step_beyond_the_velocity_limit_stops_the_arm_until_error_recovery(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState, qos_profile_system_default)
    with start_sim(tmp_path) as node:
        commands = command_publisher(ros_probe)
        arm = client_for(ros_probe)
        recovery = Recovery(ros_probe)
        home = settled(ros_probe)
        state = robot_state(ros_probe)
        assert state.robot_mode == FrankaRobotState.ROBOT_MODE_MOVE
        assert list(state.measured_joint_state.name) == list(SPEC.arm_joints)
        np.testing.assert_allclose(state.measured_joint_state.position, home, atol=1e-3)
        np.testing.assert_allclose(state.desired_joint_state.position, home, atol=1e-3)
        assert not state.current_errors.joint_velocity_violation
        step = home.copy()
        step[4] += 0.5            # 10 rad/s over one 50 ms period; the limit is 5.26 rad/s
        commands.publish(Float64MultiArray(data=step.tolist()))
        assert wait_until(lambda: status(ros_probe).level == DiagnosticStatus.ERROR, 5)
        report = status(ros_probe)
        assert 'joint_velocity_violation' in report.message and 'fr3_joint5' in report.message
        assert values(report)['protective_stop'] == 'joint_velocity_violation'
        assert values(report)['protective_stops'] == '1'
        assert np.abs(settled(ros_probe) - home).max() < 1e-3     # it never moved
        state = robot_state(ros_probe)
        assert state.robot_mode == FrankaRobotState.ROBOT_MODE_REFLEX
        assert state.current_errors.joint_velocity_violation
        assert not state.current_errors.joint_reflex

        slow = home.copy()
        slow[0] += 0.05           # 1 rad/s: valid, but the arm is stopped
        for _ in range(10):
            commands.publish(Float64MultiArray(data=slow.tolist()))
            time.sleep(0.05)
        assert np.abs(settled(ros_probe) - home).max() < 1e-3     # ignored
        assert not Goal(arm, smooth_goal(home, np.full(7, 0.1), 1.0)).handle.accepted
        assert status(ros_probe).level == DiagnosticStatus.ERROR

        recovery()
        assert wait_until(lambda: status(ros_probe).level == DiagnosticStatus.OK, 5)
        state = robot_state(ros_probe)
        assert state.robot_mode == FrankaRobotState.ROBOT_MODE_MOVE
        assert not state.current_errors.joint_velocity_violation
        assert state.last_motion_errors.joint_velocity_violation   # kept, as libfranka does
        for _ in range(10):
            commands.publish(Float64MultiArray(data=slow.tolist()))
            time.sleep(0.05)
        assert np.abs(settled(ros_probe) - slow).max() < 3e-3     # moves again
        recovery()                                                 # nothing to clear: fine
        log = node.output
        assert node.stop() == 0, log
    assert 'protective stop (joint_velocity_violation)' in log
    # franka_ros2 v3 (the default): the hardware component is unconfigured until recovery
    assert 'the hardware component is unconfigured after an error; recover' in log
    assert 'rejected a FollowJointTrajectory goal: the hardware component is unconfigured' in log
    assert 'error recovery: cleared the protective stop' in log


def test_a_goal_into_the_table_ends_in_the_collision_reflex(ros_probe: RosProbe,
                                                            tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    with start_sim(tmp_path) as node:
        arm = client_for(ros_probe)
        _, home = measured(ros_probe)
        down = np.zeros(7)
        down[1], down[3] = 1.2 - home[1], -1.2 - home[3]   # the hand far below the table top
        goal = Goal(arm, smooth_goal(home, down, 3.0))
        assert goal.handle.accepted
        state, result = goal.result()
        assert state == GoalStatus.STATUS_ABORTED
        assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
        assert 'protective stop (joint_reflex)' in result.error_string
        assert 'collision threshold' in result.error_string
        time.sleep(1.0)                                          # the contact settles
        held = settled(ros_probe)
        assert np.abs(held - home).max() > 0.2                   # it got there first
        Recovery(ros_probe)()
        back = Goal(arm, smooth_goal(held, home - held, 3.0))
        assert back.result()[0] == GoalStatus.STATUS_SUCCEEDED
        assert node.stop() == 0, node.output


def running_policy(tmp_path: Path, model: Path) -> NodeProcess:
    """The policy node on ``model``, enabled at start, ramping in over 0.5 s."""
    return NodeProcess.ros2_run('simops_policy', 'policy', '--ros-args',
                                '-p', f'model_path:={model}', '-p', 'ramp_time:=0.5',
                                '-p', 'start_enabled:=true', log_path=tmp_path / 'policy.log')


def test_the_policy_faults_when_the_arm_stops_itself_and_resumes_only_after_recovery(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """A constant policy tilting joint 2 forward presses the hand onto the table: the arm's
    collision reflex stops it, the policy reads the reflex from ``robot_state`` and latches
    FAULT; ``~/enable`` while the arm is still stopped faults again; after
    ``/action_server/error_recovery`` it does run again."""
    model, _ = write_policy(tmp_path, [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    subscribe_states(ros_probe)
    watch(ros_probe)
    with start_sim(tmp_path) as sim, running_policy(tmp_path, model) as policy:
        wait_state(ros_probe, policy, 'RUNNING', timeout=30)
        wait_state(ros_probe, policy, 'FAULT', timeout=20)
        assert 'the arm stopped itself (protective stop: joint_reflex)' in policy.output
        time.sleep(1.0)                                     # the contact settles
        held = settled(ros_probe)
        assert call_enable(ros_probe, True).success
        time.sleep(0.5)
        assert states(ros_probe)[-1] == 'FAULT'             # still stopped: faults again
        assert np.abs(settled(ros_probe) - held).max() < 1e-3
        Recovery(ros_probe)()
        assert call_enable(ros_probe, True).success
        assert wait_until(lambda: 'RUNNING' in states(ros_probe)[-3:], 10), states(ros_probe)
        assert policy.stop() == 0, policy.output
        assert sim.stop() == 0, sim.output


def press_user_stop(probe: RosProbe, pressed: bool) -> str:
    """Press (or release) the simulated arm's user stop with the sim's ``~/user_stop``.

    A lost response is sent again (pressing twice says so); the robot mode confirms it.
    """
    client = probe.node.create_client(SetBool, '/sim/user_stop')
    assert client.wait_for_service(timeout_sec=10.0)
    mode = (FrankaRobotState.ROBOT_MODE_USER_STOPPED if pressed
            else FrankaRobotState.ROBOT_MODE_IDLE)
    for _ in range(3):
        future = client.call_async(SetBool.Request(data=pressed))
        if wait_until(future.done, 3.0):
            break
        client.remove_pending_request(future)
    assert wait_until(lambda: robot_state(probe).robot_mode == mode, 5), robot_state(probe)
    return future.result().message if future.done() else ''


def test_the_user_stop_holds_the_policy_and_the_arm_until_released_and_recovered(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """The arm's user stop, pressed while a policy runs: the arm holds where it is (robot
    mode USER_STOPPED, no error set), the policy latches FAULT with the user stop's line, and
    error recovery is refused while it stays pressed; released, the arm is idle and still
    ignores commands until the recovery; then ``~/enable`` runs the policy again."""
    model, _ = write_policy(tmp_path, [0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    subscribe_states(ros_probe)
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState, qos_profile_system_default)
    watch(ros_probe)
    with start_sim(tmp_path) as sim, running_policy(tmp_path, model) as policy:
        wait_state(ros_probe, policy, 'RUNNING', timeout=30)
        time.sleep(0.5)                                     # moving
        assert 'pressed the user stop' in press_user_stop(ros_probe, True)
        wait_state(ros_probe, policy, 'FAULT', timeout=10)
        state = robot_state(ros_probe)
        assert not any(getattr(state.current_errors, name)
                       for name in state.current_errors.get_fields_and_field_types())
        time.sleep(1.0)                                     # the arm comes to rest
        held = settled(ros_probe)
        with pytest.raises(RecoveryError, match='user stop still pressed'):
            Recovery(ros_probe)()
        assert robot_state(ros_probe).robot_mode == FrankaRobotState.ROBOT_MODE_USER_STOPPED
        assert 'released the user stop' in press_user_stop(ros_probe, False)
        assert call_enable(ros_probe, True).success          # the arm is idle: faults again
        time.sleep(0.5)
        assert states(ros_probe)[-1] == 'FAULT'
        assert np.abs(settled(ros_probe) - held).max() < 1e-3
        Recovery(ros_probe)()
        assert wait_until(lambda: robot_state(ros_probe).robot_mode
                          == FrankaRobotState.ROBOT_MODE_MOVE, 5)
        assert call_enable(ros_probe, True).success
        wait_state(ros_probe, policy, 'RUNNING', timeout=10)
        assert wait_until(lambda: np.abs(measured(ros_probe)[1] - held).max() > 1e-3, 5)
        assert policy.stop() == 0, policy.output
        log = sim.output
        assert sim.stop() == 0, log
    assert "the arm's user stop is pressed; release it, recover it" in policy.output
    assert "the arm's user stop was released and the arm is idle" in policy.output
    assert 'user stop (pressed)' in log
    assert 'error recovery refused: the user stop is still pressed' in log
