"""franka_gripper's interface on the simulator (ROS wiring only): node ``franka_gripper``.

As franka_ros2's franka_gripper serves it, under the chosen release's node name
(``franka_gripper`` from v2.0.0, ``<robot>_gripper`` before: config/franka_ros2.yaml): the
actions ``~/homing``, ``~/move``, ``~/grasp`` (franka_msgs) and ``~/gripper_action``
(control_msgs GripperCommand), the service ``~/stop`` (std_srvs/Trigger) and the fingers'
``~/joint_states`` (reliable, depth 1: QoS ``gripper_state`` of config/topics.yaml) at the
release's ``state_publish_rate``. The motions and
their verdicts are :mod:`simops_sim.gripper_goal`'s; the fingers are the simulator's,
driven through its :class:`~simops_sim.arm_lane.ArmLane`. One motion runs at a time: a new goal
aborts the running one, a cancel or ``~/stop`` holds the fingers where they are.

The node ignores the process's global ROS arguments (a ``__node`` remap of the simulator
must not rename it too) but takes the simulator's namespace, as franka_ros2 puts the
gripper in the arm's; its stamps are the simulator's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from control_msgs.action import GripperCommand
from franka_msgs.action import Grasp, Homing, Move
from rclpy.action import ActionServer, CancelResponse
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from simops_core.franka_ros2 import FrankaRelease
from simops_core.robot_spec import RobotSpec
from simops_core.topics import load_qos
from simops_ros.qos import qos_from_spec
from simops_sim.arm_lane import ArmLane
from simops_sim.follow_action import goal_key
from simops_sim.gripper_goal import (
    DEFAULT_EPSILON,
    DEFAULT_SPEED,
    GripperMotion,
    GripperTask,
    task_problem,
)

SAME_WIDTH = 1e-4          # m: a GripperCommand to the current width succeeds at once


@dataclass
class _Running:
    handle: Any
    motion: GripperMotion


class GripperNode(Node):
    """The simulated Franka Hand's node, beside the simulator node in its process."""

    def __init__(self, arm: ArmLane, spec: RobotSpec, namespace: str,
                 release: FrankaRelease) -> None:
        super().__init__(release.gripper_node_name(spec.name), namespace=namespace,
                         use_global_arguments=False)
        self._arm, self._spec = arm, spec
        self._running: _Running | None = None
        for action, name in ((Homing, 'homing'), (Move, 'move'), (Grasp, 'grasp'),
                             (GripperCommand, 'gripper_action')):
            ActionServer(self, action, f'~/{name}', execute_callback=self._execute,
                         handle_accepted_callback=self._on_accepted,
                         cancel_callback=lambda _: CancelResponse.ACCEPT)
        self.create_service(Trigger, '~/stop', self._on_stop)
        self._states = self.create_publisher(JointState, '~/joint_states',
                                             qos_from_spec(load_qos('gripper_state')))
        self._results: dict[bytes, Future] = {}   # by goal id: set when the goal ends
        self.create_timer(1.0 / release.gripper_state_rate, self._tick)

    def _task(self, handle: Any, opening: float) -> GripperTask | None:
        """The motion a goal asks for; None for a GripperCommand already at its width."""
        goal, hand = handle.request, self._spec.gripper
        if isinstance(goal, Homing.Goal):
            return GripperTask('homing', hand.width_max, hand.speed_max, hand.force_max)
        if isinstance(goal, Move.Goal):
            return GripperTask('move', goal.width, goal.speed, hand.force_max)
        if isinstance(goal, Grasp.Goal):
            return GripperTask('grasp', goal.width, goal.speed, goal.force,
                               goal.epsilon.inner, goal.epsilon.outer)
        width = 2.0 * goal.command.position   # franka_gripper: position is half the opening
        if abs(width - opening) < SAME_WIDTH:
            return None
        if width >= opening:
            return GripperTask('move', width, DEFAULT_SPEED, hand.force_max)
        force = goal.command.max_effort if goal.command.max_effort > 0 else hand.force_max
        return GripperTask('grasp', width, DEFAULT_SPEED, min(force, hand.force_max),
                           DEFAULT_EPSILON, DEFAULT_EPSILON)

    def _on_accepted(self, handle: Any) -> None:
        self._finish(False, 'preempted by a new gripper goal')
        self._results[goal_key(handle)] = Future()
        handle.execute()
        now, opening, _ = self._arm.gripper_state()
        task = self._task(handle, opening)
        if task is None:
            self.get_logger().info(f'goal: already at {opening:.4f} m')
            self._end(handle, True, '', opening)
            return
        self.get_logger().info(f'goal: {task.kind} to {task.width:.4f} m at {task.speed:g} m/s')
        problem = task_problem(task, self._spec.gripper)
        if problem is not None:
            self._end(handle, False, f'{task.kind}: {problem}', opening)
            return
        self._arm.move_gripper(task.drive_to(self._spec.gripper, opening), task.speed,
                                   task.force)
        self._running = _Running(handle, GripperMotion(task, now, opening, self._spec.gripper))

    async def _execute(self, handle: Any) -> Any:
        """The goal's result, once :meth:`_end` sets it (perhaps before this runs)."""
        result = await self._results[goal_key(handle)]
        del self._results[goal_key(handle)]
        return result

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        self._arm.stop_gripper()
        self._finish(False, 'stopped by ~/stop')
        response.success, response.message = True, 'gripper stopped'
        return response

    def _tick(self) -> None:
        now, opening, rate = self._arm.gripper_state()
        msg = JointState(name=list(self._spec.gripper.joints), position=[opening / 2] * 2,
                         velocity=[rate / 2] * 2, effort=[0.0, 0.0])
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(self._arm.stamp_ns(),
                                                                10**9)
        self._states.publish(msg)
        running = self._running
        if running is None:
            return
        if running.handle.is_cancel_requested:
            self._arm.stop_gripper()
            self._running = None
            running.handle.canceled()
            self._results[goal_key(running.handle)].set_result(self._result(
                running.handle, False, 'canceled', opening))
            return
        running.handle.publish_feedback(self._feedback(running.handle, opening))
        verdict = running.motion.update(now, opening, rate)
        if verdict is not None:
            self._running = None
            self._end(running.handle, *verdict, opening)

    def _finish(self, success: bool, error: str) -> None:
        running, self._running = self._running, None
        if running is not None and running.handle.is_active:
            self._end(running.handle, success, error, self._arm.gripper_state()[1])

    def _end(self, handle: Any, success: bool, error: str, opening: float) -> None:
        if success:
            handle.succeed()
        else:
            handle.abort()
            self.get_logger().warning(f'gripper goal failed: {error}')
        self._results[goal_key(handle)].set_result(self._result(handle, success, error, opening))

    @staticmethod
    def _result(handle: Any, success: bool, error: str, opening: float) -> Any:
        if isinstance(handle.request, GripperCommand.Goal):
            return GripperCommand.Result(position=opening, effort=0.0, stalled=False,
                                         reached_goal=success)
        action = {Homing.Goal: Homing, Move.Goal: Move, Grasp.Goal: Grasp}[type(handle.request)]
        return action.Result(success=success, error=error)

    @staticmethod
    def _feedback(handle: Any, opening: float) -> Any:
        if isinstance(handle.request, GripperCommand.Goal):
            return GripperCommand.Feedback(position=opening, effort=0.0, stalled=False,
                                           reached_goal=False)
        action = {Homing.Goal: Homing, Move.Goal: Move, Grasp.Goal: Grasp}[type(handle.request)]
        return action.Feedback(current_width=opening)

