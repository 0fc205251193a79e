"""The arm controller's FollowJointTrajectory action on the simulator (ROS wiring only).

``<controller>/follow_joint_trajectory`` next to the controller's ``joint_trajectory`` topic,
as ros2_controllers' JointTrajectoryController serves it (the rules are in
:mod:`simops_sim.follow_goal`): a goal JTC would reject is rejected with its reason in the
log; an accepted goal runs through the same trajectory path as the topic, its feedback
(desired, actual, error, point index) and outcome checked at :data:`MONITOR_RATE` (JTC's
default ``action_monitor_rate``) by a timer that runs while a goal does, as JTC starts its
goal timer when it accepts a goal (``goal_accepted_callback``,
joint_trajectory_controller.cpp:1486-1491, jazzy ed360c9). A new goal aborts the running
one with INVALID_GOAL; a command on the topics replaces the goal's trajectory and the goal
stays active, judged against the new trajectory (JTC's ``topic_callback`` and ``update``,
joint_trajectory_controller.cpp:270-283 and :1385-1398, jazzy ed360c9); a cancel holds the
arm where it is. A goal whose trajectory trips a protective stop (:mod:`simops_sim.reflexes`:
faster than the joint velocity limits), or that runs when the arm stops itself, is aborted
with INVALID_GOAL, as JTC aborts its goal when its hardware stops; while the arm is stopped
new goals are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.node import Node
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from simops_core.robot_spec import RobotSpec
from simops_core.stamps import to_seconds
from simops_core.topics import TopicSpec
from simops_ros.rclpy_compat import has_field
from simops_sim.arm_lane import ArmLane, FollowState
from simops_sim.follow_goal import (
    FollowResult,
    GoalMonitor,
    default_tolerances,
    goal_problem,
    goal_tolerances,
)
from simops_sim.joint_commands import CommandError
from simops_sim.trajectory_plan import TrajectoryGoal, check_goal, goal_from_message

MONITOR_RATE = 20.0   # Hz, JointTrajectoryController's default action_monitor_rate
FEEDBACK_INDEX = has_field(FollowJointTrajectory.Feedback, 'index')


def goal_key(handle: Any) -> bytes:
    """A goal handle's id (its UUID), the same for every handle object of the goal."""
    return bytes(handle.goal_id.uuid)


def action_name(trajectory_topic: str) -> str:
    """The action next to a controller's trajectory topic.

    ``/c/joint_trajectory`` gives ``/c/follow_joint_trajectory``.
    """
    return trajectory_topic.rpartition('/')[0] + '/follow_joint_trajectory'


@dataclass
class _Running:
    handle: Any
    number: int            # the arm lane's sequence number of the goal's trajectory
    monitor: GoalMonitor


class FollowJointTrajectoryServer:
    """Serves FollowJointTrajectory on ``node`` over the arm ``arm``."""

    def __init__(self, node: Node, arm: ArmLane, spec: RobotSpec,
                 trajectory_topic: TopicSpec) -> None:
        """Serve the action next to ``trajectory_topic`` (see :func:`action_name`).

        The node keeps the server: its action server and monitor timer hold it.
        """
        self._node, self._arm, self._spec = node, arm, spec
        name = action_name(trajectory_topic.name)
        self._defaults = default_tolerances(spec.constraints)
        self._running: _Running | None = None
        self._results: dict[bytes, Future] = {}   # by goal id: set when the goal ends
        self._server = ActionServer(
            node, FollowJointTrajectory, name, execute_callback=self._execute,
            goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
            cancel_callback=lambda _: CancelResponse.ACCEPT)
        self._timer = node.create_timer(1.0 / MONITOR_RATE, self._monitor)
        self._timer.cancel()   # started by a goal: an idle executor is not woken 20 times a second

    def _parse(self, request: Any) -> tuple[TrajectoryGoal | None, str | None]:
        """The goal on sim time, or why JTC would reject it."""
        trajectory = request.trajectory
        try:
            goal = goal_from_message(trajectory, self._spec.arm_joints)
            check_goal(goal, self._spec)
            goal = self._arm.on_sim_clock(goal)
        except CommandError as exc:
            return None, str(exc)
        last = trajectory.points[-1].velocities
        problem = goal_problem(goal, len(self._spec.arm_joints),
                               np.asarray(last) if len(last) else None,
                               self._arm.follow_state().time)
        return (None, problem) if problem else (goal, None)

    def _on_goal(self, request: Any) -> GoalResponse:
        stop = self._arm.stopped()   # JTC rejects goals while it is not running
        refusal = self._arm.refusal()
        goal, problem = (None, refusal) if refusal else self._parse(request) if stop is None else (
            None, f'the arm is in a {stop.message()}; call /action_server/error_recovery first')
        if goal is None:
            self._node.get_logger().error(f'rejected a FollowJointTrajectory goal: {problem}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: Any) -> None:
        self._finish(FollowResult.INVALID_GOAL, 'Current goal preempted by new incoming action.')
        self._results[goal_key(handle)] = Future()
        handle.execute()
        goal, problem = self._parse(handle.request)
        if goal is None:   # sim time moved past its end since it was accepted
            self._end(handle, FollowResult.INVALID_GOAL, str(problem))
            return
        request = handle.request
        tolerances, fallback = goal_tolerances(
            self._defaults, list(self._spec.arm_joints),
            [_tolerance(t) for t in request.path_tolerance],
            [_tolerance(t) for t in request.goal_tolerance],
            to_seconds(request.goal_time_tolerance))
        if fallback:
            self._node.get_logger().error(f'{fallback}; using the default tolerances')
        start = self._arm.follow_state().time if goal.start is None else goal.start
        monitor = GoalMonitor(tolerances, start, goal.times)
        self._running = _Running(handle, self._arm.submit(goal), monitor)
        self._timer.reset()

    async def _execute(self, handle: Any) -> FollowJointTrajectory.Result:
        """The goal's result, once :meth:`_end` sets it (perhaps before this runs)."""
        result = await self._results[goal_key(handle)]
        del self._results[goal_key(handle)]
        return result

    def _monitor(self) -> None:
        running = self._running
        if running is None or not running.handle.is_active:
            return
        state = self._arm.follow_state()
        if running.handle.is_cancel_requested:
            self._arm.hold()
            self._finish(None, 'canceled')
            return
        if state.refusal and state.stop is None:   # JTC's on_deactivate aborts its goal
            self._finish(FollowResult.INVALID_GOAL, state.refusal)
            return
        if state.rejected[0] == running.number:
            self._finish(FollowResult.INVALID_GOAL, f'the simulator refused the trajectory: '
                                                    f'{state.rejected[1]}')
            return
        if state.applied < running.number:   # still queued
            return
        if state.stop is not None:   # the arm stopped itself under the goal
            self._finish(FollowResult.INVALID_GOAL, f'{state.stop.message()}; the controller '
                                                    'stopped')
            return
        if state.applied > running.number:
            if state.plan is None:   # a hold replaced it (a reset of the simulator)
                self._finish(FollowResult.INVALID_GOAL, 'the simulator was reset')
                return
            # A command on the topics replaced the trajectory; as JTC, the goal stays active
            # and is judged against the trajectory now followed.
            running.number = state.applied
            running.monitor = GoalMonitor(running.monitor.tolerances, *state.plan)
        error_q, error_qd = state.desired_q - state.actual_q, state.desired_qd - state.actual_qd
        running.handle.publish_feedback(self._feedback(state, running.monitor))
        outcome = running.monitor.check(state.time, error_q, error_qd)
        if outcome is not None:
            self._finish(*outcome)

    def _feedback(self, state: FollowState, monitor: GoalMonitor
                  ) -> FollowJointTrajectory.Feedback:
        feedback = FollowJointTrajectory.Feedback()
        feedback.header.stamp.sec, feedback.header.stamp.nanosec = divmod(state.stamp_ns,
                                                                          10**9)
        feedback.header.frame_id = self._spec.base_frame
        feedback.joint_names = list(self._spec.arm_joints)
        feedback.desired = _point(state.desired_q, state.desired_qd)
        feedback.actual = _point(state.actual_q, state.actual_qd)
        feedback.error = _point(state.desired_q - state.actual_q,
                                state.desired_qd - state.actual_qd)
        if FEEDBACK_INDEX:   # control_msgs >= 6.3 (Kilted); Jazzy's has no index
            feedback.index = monitor.index(state.time)
        return feedback

    def _finish(self, code: FollowResult | None, reason: str) -> None:
        """End the running goal, if any (see :meth:`_end`)."""
        running, self._running = self._running, None
        self._timer.cancel()
        if running is not None and running.handle.is_active:
            self._end(running.handle, code, reason)

    def _end(self, handle: Any, code: FollowResult | None, reason: str) -> None:
        """Set a goal's final state: ``code`` None cancels it, else succeeds (0) or aborts."""
        result = FollowJointTrajectory.Result()
        if code is None:
            handle.canceled()
        else:
            result.error_code, result.error_string = int(code), reason
            if code is FollowResult.SUCCESSFUL:
                handle.succeed()
            else:
                handle.abort()
                self._node.get_logger().warning(f'FollowJointTrajectory goal aborted '
                                                f'({code.name}): {reason}')
        self._results[goal_key(handle)].set_result(result)


def _tolerance(entry: Any) -> tuple[str, float, float, float]:
    return entry.name, entry.position, entry.velocity, entry.acceleration


def _point(q: np.ndarray, qd: np.ndarray) -> JointTrajectoryPoint:
    return JointTrajectoryPoint(positions=q.tolist(), velocities=qd.tolist())

