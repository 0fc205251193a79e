"""The sim's FollowJointTrajectory action, as MoveIt drives a JointTrajectoryController.

A real ``sim`` process over DDS; the client is an rclpy ActionClient on the probe, sending
goals the way MoveIt's controller manager does (every joint, positions, velocities and
accelerations per point, an unstamped header, no tolerances of its own).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.action import ActionClient
from ros_helpers import RosProbe, wait_until
from sim_helpers import (
    ACTION,
    duration,
    measured,
    qos,
    smooth_goal,
    start_sim,
    subscribe_states,
    topic,
    trajectory_publisher,
)
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.robot_spec import load_robot_spec
from simops_ros.rclpy_compat import DISTRO

SPEC = load_robot_spec('fr3')


class Goal:
    """One goal sent by ``client``: its handle, feedback and result."""

    def __init__(self, client: ActionClient, goal: FollowJointTrajectory.Goal) -> None:
        self.feedback: list[Any] = []
        sent = client.send_goal_async(goal, feedback_callback=lambda f: self.feedback.append(
            f.feedback))
        assert wait_until(sent.done, 20), 'no answer to the goal'
        self.handle = sent.result()
        self._result = self.handle.get_result_async() if self.handle.accepted else None

    def result(self, timeout: float = 20.0) -> tuple[int, Any]:
        assert self._result is not None and wait_until(self._result.done, timeout), 'no result'
        answer = self._result.result()
        return answer.status, answer.result


def client_for(probe: RosProbe) -> ActionClient:
    client = probe.action_client(FollowJointTrajectory, ACTION)
    assert client.wait_for_server(timeout_sec=30.0), f'no {ACTION} server'
    return client


def test_a_planned_goal_succeeds_and_a_goal_jtc_rejects_is_rejected(ros_probe: RosProbe,
                                                                     tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    with start_sim(tmp_path) as sim:
        client = client_for(ros_probe)
        _, home = measured(ros_probe)
        step = np.array([0.3, -0.2, 0.2, 0.3, -0.3, 0.3, 0.4])
        goal = Goal(client, smooth_goal(home, step, 2.0))
        assert goal.handle.accepted
        status, result = goal.result()
        assert status == GoalStatus.STATUS_SUCCEEDED, result
        assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
        first, last = goal.feedback[0], goal.feedback[-1]
        assert list(first.joint_names) == list(SPEC.arm_joints)
        assert len(first.desired.positions) == len(first.actual.positions) == 7
        assert len(goal.feedback) >= 30   # 20 Hz over 2 s
        if DISTRO == 'kilted':   # control_msgs >= 6.3: the point index; Jazzy's has none
            assert [f.index for f in goal.feedback] == sorted(f.index for f in goal.feedback)
            assert last.index == 3
        np.testing.assert_allclose(last.error.positions,
                                   np.subtract(last.desired.positions, last.actual.positions))
        # JTC succeeds once the arm is stopped (0.01 rad/s); it is then at the goal.
        np.testing.assert_allclose(measured(ros_probe)[1], home + step, atol=3e-3)

        wrong = smooth_goal(home, step, 1.0)
        wrong.trajectory.joint_names[2] = 'elbow'
        partial = smooth_goal(home, step, 1.0)
        partial.trajectory.joint_names = partial.trajectory.joint_names[:6]
        for point in partial.trajectory.points:
            point.positions, point.velocities = point.positions[:6], point.velocities[:6]
            point.accelerations = point.accelerations[:6]
        moving = smooth_goal(home, step, 1.0)
        moving.trajectory.points[-1].velocities = [0.1] * 7
        for bad in (wrong, partial, moving):   # as JTC: rejected outright, no result code
            assert not Goal(client, bad).handle.accepted
        assert sim.proc.poll() is None
    for reason in ('unknown joint', 'all of them', 'at rest'):
        assert reason in sim.output


def test_path_tolerance_cancel_and_preemption(ros_probe: RosProbe, tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    with start_sim(tmp_path) as sim:
        client = client_for(ros_probe)
        topic_commands = trajectory_publisher(ros_probe)
        _, home = measured(ros_probe)
        step = np.full(7, 0.3)

        # A path tolerance tighter than the controller tracks (its lag is a few mrad).
        tight = smooth_goal(home, step, 1.0)
        tight.path_tolerance = [JointTolerance(name='fr3_joint1', position=1e-4)]
        status, result = Goal(client, tight).result()
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
        assert 'joint 1' in result.error_string

        # A cancel holds the arm where it is, within a control period.
        _, here = measured(ros_probe)
        slow = Goal(client, smooth_goal(here, -step, 4.0))
        time.sleep(1.5)
        cancel = slow.handle.cancel_goal_async()
        assert wait_until(cancel.done, 10)
        canceled_at = time.monotonic()
        status, _ = slow.result()
        assert status == GoalStatus.STATUS_CANCELED
        time.sleep(max(0.0, canceled_at + 0.3 - time.monotonic()))
        t0, held = measured(ros_probe)
        time.sleep(0.5)
        t1, later = measured(ros_probe)
        assert t1 - t0 > 0.4 and np.abs(later - held).max() < 1e-3, later - held
        assert np.abs(held - here).max() > 0.05   # it had moved, and stopped half-way

        # A new goal aborts the running one.
        first = Goal(client, smooth_goal(held, step, 4.0))
        time.sleep(0.5)
        _, now = measured(ros_probe)
        second = Goal(client, smooth_goal(now, -0.1 * step, 1.0))
        status, result = first.result()
        assert status == GoalStatus.STATUS_ABORTED
        assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
        assert second.result()[0] == GoalStatus.STATUS_SUCCEEDED
        _, now = measured(ros_probe)
        third = Goal(client, smooth_goal(now, step, 4.0))
        time.sleep(0.5)
        _, now = measured(ros_probe)
        command = JointTrajectory(joint_names=list(SPEC.arm_joints), points=[
            JointTrajectoryPoint(positions=now.tolist(), time_from_start=duration(0.2))])
        topic_commands.publish(command)
        # A command on the topic replaces the goal's trajectory; as JTC, the goal stays
        # active, judged against the trajectory now followed, and succeeds at its end.
        status, result = third.result()
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        time.sleep(0.5)
        _, final = measured(ros_probe)
        assert np.abs(final - now).max() < 0.02, final - now    # the topic's target, not
        assert np.abs(final - (held + step)).max() > 0.2        # the goal's end
        assert sim.proc.poll() is None


def test_the_topic_refuses_what_jtc_refuses(ros_probe: RosProbe, tmp_path: Path) -> None:
    """JTC's validate_trajectory_msg judges the topic as it judges goals (franka's
    allow_partial_joints_goal false, Jazzy's allow_nonzero_velocity_at_trajectory_end false):
    a partial-joint trajectory, one ending in motion, or one stamped to end in the past
    leaves the arm where it was."""
    subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    with start_sim(tmp_path) as sim:
        topic_commands = trajectory_publisher(ros_probe)
        _, home = measured(ros_probe)
        target = home + 0.1
        partial = JointTrajectory(joint_names=list(SPEC.arm_joints[:6]), points=[
            JointTrajectoryPoint(positions=target[:6].tolist(), time_from_start=duration(0.5))])
        moving = JointTrajectory(joint_names=list(SPEC.arm_joints), points=[
            JointTrajectoryPoint(positions=target.tolist(), velocities=[0.1] * 7,
                                 time_from_start=duration(0.5))])
        past = JointTrajectory(joint_names=list(SPEC.arm_joints), points=[
            JointTrajectoryPoint(positions=target.tolist(), time_from_start=duration(0.5))])
        assert wait_until(lambda: measured(ros_probe)[0] > 6.0, 30)   # sim time, s
        stamp, _ = measured(ros_probe)
        past.header.stamp.sec = int(stamp) - 5   # ends 4.5 s ago on the sim clock
        for command in (partial, moving, past):
            topic_commands.publish(command)
            time.sleep(0.3)
        time.sleep(0.5)
        _, after = measured(ros_probe)
        assert np.abs(after - home).max() < 1e-3, after - home

        def dropped() -> str:
            status = ros_probe.messages(topic('diagnostics').name)[-1].status[0]
            return {kv.key: kv.value for kv in status.values}['dropped_commands']

        assert wait_until(lambda: dropped() == '3', 5), dropped()   # all three refused
        whole = JointTrajectory(joint_names=list(SPEC.arm_joints), points=[
            JointTrajectoryPoint(positions=target.tolist(), time_from_start=duration(0.5))])
        topic_commands.publish(whole)                            # the same, valid: it moves
        assert wait_until(lambda: np.abs(measured(ros_probe)[1] - target).max() < 3e-3, 5)
        log = sim.output
        assert sim.stop() == 0, log
    assert "names 6 of the controller's 7 joints" in log   # one warning per kind of fault


def test_a_heavy_payload_violates_the_path_tolerance(ros_probe: RosProbe,
                                                     tmp_path: Path) -> None:
    """12 kg at the flange (four times the FR3's rated 3 kg): joints 2 and 4 fall behind a
    0.8 s move of 0.8 rad by up to 0.4 rad, beyond 20 mrad for 0.45 s (without the load: at
    most 16 mrad), so a 20 mrad path tolerance aborts the goal."""
    params = tmp_path / 'heavy.yaml'
    params.write_text('version: 1\npayload: {mass: 12.0, com_z: 0.1}\n')
    subscribe_states(ros_probe)
    with start_sim(tmp_path, f'sim_params_file:={params}') as sim:
        client = client_for(ros_probe)
        time.sleep(1.0)   # the arm settles under the load
        _, home = measured(ros_probe)
        step = np.array([0.0, 0.8, 0.0, 0.8, 0.0, 0.0, 0.0])
        goal = smooth_goal(home, step, 0.8)
        goal.path_tolerance = [JointTolerance(name=name, position=0.02)
                               for name in ('fr3_joint2', 'fr3_joint4')]
        status, result = Goal(client, goal).result()
        assert status == GoalStatus.STATUS_ABORTED, result
        assert result.error_code == FollowJointTrajectory.Result.PATH_TOLERANCE_VIOLATED
        assert 'joint' in result.error_string
        assert sim.stop() == 0, sim.output
