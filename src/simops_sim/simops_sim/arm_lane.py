"""One arm's way through the simulator's clockwork: commands in, frames out (no rclpy).

A :class:`~simops_sim.stepper.Stepper` steps one world and holds an :class:`ArmLane` per arm
(one for a lone arm, ``left_`` and ``right_`` for ``fr3_duo``). The lane is everything that
is the arm's own:

- the command inbox: streamed :class:`~simops_sim.joint_commands.ArmCommand` targets, each
  a plan by the stream rule (:mod:`simops_sim.stream_rule`, which ``fit``'s replay runs
  too; a protective stop if the stream asks for too much speed), and
  :class:`~simops_sim.trajectory_plan.TrajectoryGoal` trajectories; the physics samples the
  plan. Each command is applied at the first step that runs after it arrived (with
  ``/clock``: the simulator's lag never delays a command), or, with stamps on the system
  clock, at the first step due after it, as its stamp says and ``fit``'s replay does
  (:meth:`~simops_sim.stepper.Stepper.advance`);
- the command timeout (a streamed target older than ``command_timeout`` s of sim time is
  replaced by a hold);
- protective stops (:mod:`simops_sim.reflexes`): a command beyond the velocity limits, or a
  measured state beyond the arm's limits, stops the arm; it holds, commands are refused and
  diagnostics report an error until :meth:`ArmLane.recover` (franka_msgs' ErrorRecovery);
- with :attr:`ArmLane.control` set (the simulator node serves a controller manager), the
  states of the hardware component and the controllers
  (:mod:`simops_sim.controller_states`): a command is refused unless the hardware and the
  controller it is for are active, a stop moves them as the chosen franka_ros2 release
  does, and recovery follows its steps; a switch that changes the arm's command mode
  changes its controller law (:meth:`~simops_sim.physics.Physics.set_controller`: the
  effort JTC, or the arm's own impedance loop behind the position interface) and the arm
  holds;
- its :class:`FollowState` for the action servers, the gripper's, the recovery's and the
  stepper's frames, and its counts (:class:`LaneCounts`).

The lane knows its stepper only as a :class:`LaneHost`: the lock, the timing, stamps and
warnings; rates, frames and the diagnostics' counters are the stepper's.

Methods without a leading underscore that are not marked "physics thread" are called from
the executor and take the stepper's lock; the physics-thread ones run with it held.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from simops_core.franka_ros2 import ARM_CONTROLLER
from simops_sim.controller_states import ACTIVE, ControllerStates
from simops_sim.joint_commands import ArmCommand
from simops_sim.physics import Physics
from simops_sim.reflexes import RELEASED, ProtectiveStop, user_stop_pressed
from simops_sim.stream_rule import MAX_CATCH_UP, StreamPacer
from simops_sim.trajectory_plan import TrajectoryError, TrajectoryGoal, TrajectoryPlan

MAX_STAMP_OFFSET = 60.0    # s a trajectory may start ahead of, or end behind, sim time


class LaneTiming(Protocol):
    """The part of the stepper's timing a lane reads (times in s)."""

    sync_mode: str
    control_period: float
    command_timeout: float


class LaneHost(Protocol):
    """What a lane needs of the stepper that holds it (:class:`simops_sim.stepper.Stepper`).

    ``lock`` guards the world; ``timing`` may change while it runs; ``stamp_at`` turns sim
    time (s) into a stamp (ns), ``stamp_offset`` (ns) is their difference, and
    ``system_stamps`` says whether stamps are system time; ``warn(kind, text)`` reports.
    """

    lock: threading.Lock
    stamp_offset: int

    @property
    def timing(self) -> LaneTiming:
        """The stepper's timing now."""

    @property
    def system_stamps(self) -> bool:
        """Whether stamps are system time (no ``/clock``)."""

    def notify(self) -> None:
        """Wake the physics thread (a command was queued); the lock is held."""

    def stamp_at(self, sim_time: float) -> int:
        """The stamp (ns) of sim time ``sim_time`` s."""

    def stamp_ns(self) -> int:
        """The stamp (ns) of the current state."""

    def warn(self, kind: str, text: str) -> None:
        """Report ``text``, throttled per ``kind``."""


class RecoveryRefusedError(RuntimeError):
    """Error recovery cannot run now (the user stop is pressed); the message says why."""


@dataclass
class LaneCounts:
    """An arm's cumulative counts, which the stepper's diagnostics sum over the arms."""

    dropped_commands: int = 0
    command_timeouts: int = 0
    protective_stops: int = 0


@dataclass(frozen=True)
class FollowState:
    """The arm at one instant, for an action server.

    Sim ``time`` (s) and its ``stamp_ns``; ``applied``, the sequence number of the command
    the arm follows, and ``rejected``, the last rejected one with the reason; ``stop``, the
    protective stop in force, ``last_stop`` the latest one (kept after a recovery);
    ``desired_q`` (7,) rad and ``desired_qd`` (7,) rad/s, the controller's targets;
    ``actual_q``, ``actual_qd``, ``actual_effort`` (N*m) the measured joints (sensor bias
    included, as published, without noise); ``contact`` (7,) N*m, the joint torques the
    contacts apply (what the collision reflex checks); ``refusal``, why the controller
    manager lets no command through ('' when it does); ``plan``, the sim start time (s) and
    the points' times (K,) s of the trajectory the arm follows, None while it holds (after
    a cancel, a reset or a stop); ``ee``, Franka's ``O_T_EE`` (position (3,) m, quaternion
    (4,) w-x-y-z in the base frame: :meth:`simops_sim.physics.Physics.ee_pose`).
    """

    time: float
    stamp_ns: int
    applied: int
    rejected: tuple[int, str]
    stop: ProtectiveStop | None
    last_stop: ProtectiveStop | None
    desired_q: np.ndarray
    desired_qd: np.ndarray
    actual_q: np.ndarray
    actual_qd: np.ndarray
    actual_effort: np.ndarray
    contact: np.ndarray
    refusal: str = ''
    plan: tuple[float, np.ndarray] | None = None
    ee: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Frame:
    """What one step publishes for arm ``arm`` (its prefix): the stamp (ns) and copies.

    Each part is None unless due. ``joints`` (3, n): position, velocity, effort in
    ``spec.joint_names`` order (sensor bias and noise included); poses: (position (3,) m,
    quaternion (4,) w-x-y-z) in the arm's base frame; ``robot``: the arm's state for
    franka's robot-state topic.
    """

    stamp_ns: int
    joints: np.ndarray | None = None
    flange: tuple[np.ndarray, np.ndarray] | None = None
    object: tuple[np.ndarray, np.ndarray] | None = None
    robot: FollowState | None = None
    arm: str = ''


class ArmLane:
    """The arm ``physics`` (prefix ``prefix``) of ``stepper``; see the module docstring."""

    def __init__(self, stepper: LaneHost, prefix: str, physics: Physics) -> None:
        self.prefix = prefix
        self.physics = physics
        self.lock = stepper.lock
        self._stepper = stepper
        self.counts = LaneCounts()
        # (time.monotonic() at DDS receipt, sequence number, command): applied once it has
        # arrived (Stepper.advance says by when). Numbers count submissions; ``_applied`` is
        # the number of the command the arm follows (a hold or reset moves it past every
        # earlier one), and ``_rejected`` the last rejected one with the reason.
        self._inbox: deque[tuple[float, int, ArmCommand | TrajectoryGoal]] = deque()
        self._submitted = 0
        self._applied = 0
        self._rejected: tuple[int, str] = (0, '')
        self._last_stop: ProtectiveStop | None = None
        self._streaming = False
        # the stream rule, on time.monotonic() arrivals; its stream ends at a trajectory, a
        # cancel, a reset or a stop
        self._pacer = StreamPacer(physics.spec,
                                  stepper.timing.sync_mode == 'realtime')
        self._last_command = 0.0
        self._plan: tuple[float, np.ndarray] | None = None   # see FollowState.plan
        # The controller manager's states, when the node serves one (None: always commandable).
        self.control: ControllerStates | None = None

    # --- from the executor thread ----------------------------------------------------------

    def submit(self, command: ArmCommand | TrajectoryGoal, received_ns: int | None = None
               ) -> int:
        """Queue a checked command; realtime applies it at the next step, lockstep per period.

        ``received_ns``: when DDS received it (system clock, ns), so a stream's pace is its
        own even when this node's executor takes two commands back to back after a stall;
        None: now. Returns its sequence number (see :meth:`follow_state`).
        """
        arrival = time.monotonic()
        if received_ns:
            arrival -= min(max(time.time_ns() - received_ns, 0) * 1e-9, MAX_CATCH_UP)
        return self.queue(command, arrival)

    def queue(self, command: ArmCommand | TrajectoryGoal, arrival: float) -> int:
        """Queue a checked command that arrived at ``arrival`` (``time.monotonic()`` s).

        Returns its sequence number; see :meth:`submit`.
        """
        with self.lock:
            self._submitted += 1
            self._inbox.append((arrival, self._submitted, command))
            self._stepper.notify()
            return self._submitted

    def follow_state(self) -> FollowState:
        """What an action server needs to judge its goal, read at one instant."""
        with self.lock:
            return self.state_now()

    def state_now(self) -> FollowState:
        """:meth:`follow_state` with the lock held (the physics thread's frames)."""
        physics, arm = self.physics, self.physics.index.arm_dof
        desired_q, desired_qd = physics.arm_desired()
        joints = np.empty((3, len(physics.spec.joint_names)))
        physics.read_joints(joints)
        contact = np.empty(arm)
        physics.contact_torque(contact)
        return FollowState(physics.time, self._stepper.stamp_at(physics.time),
                           self._applied, self._rejected, physics.stop, self._last_stop,
                           desired_q, desired_qd, *joints[:, :arm].copy(), contact,
                           self._refusal(), self._plan, physics.ee_pose())

    def _refusal(self, controller: str = ARM_CONTROLLER) -> str:
        return '' if self.control is None else self.control.refusal(controller)

    def refusal(self, controller: str = ARM_CONTROLLER) -> str:
        """Why the controller manager lets no command for ``controller`` through ('' if it does)."""
        with self.lock:
            return self._refusal(controller)

    def set_hardware(self, target: str) -> tuple[str, str]:
        """Move the hardware component to ``target``: (why not or '', its state now).

        Needs :attr:`control`. Re-activated, the arm holds where it stopped.
        """
        with self.lock:
            assert self.control is not None
            problem = self.control.set_hardware(target, self.physics.stop is None)
            if not problem and target != ACTIVE:
                self._hold()
            return problem, self.control.hardware

    def switch(self, activate: list[str], deactivate: list[str], strictness: int
               ) -> tuple[bool, str]:
        """``switch_controller`` (needs :attr:`control`); a deactivated arm controller holds."""
        with self.lock:
            assert self.control is not None
            before = self.control.refusal()
            ok, message = self.control.switch(activate, deactivate, strictness)
            if self.control.refusal() and not before:
                self._hold()
            self._follow_law()
            return ok, message

    def _follow_law(self) -> None:
        """Run the controller law of the command mode the controllers leave (if it changed)."""
        law = self.control.controller_law() if self.control is not None else None
        if law is not None and law != self.physics.controller:
            self.physics.set_controller(law)
            self._hold()

    def sim_time(self) -> float:
        """The arm's sim time (s) now."""
        with self.lock:
            return self.physics.time

    def stopped(self) -> ProtectiveStop | None:
        """The protective stop in force, or None."""
        with self.lock:
            return self.physics.stop

    def recover(self) -> ProtectiveStop | None:
        """End the protective stop (ErrorRecovery); the arm holds where it stopped.

        Returns the stop that ended, or None when none was in force. Raises
        :class:`RecoveryRefusedError` while the user stop is pressed (nothing changes).
        """
        with self.lock:
            stop = self.physics.stop
            if stop is not None and stop.pressed:
                raise RecoveryRefusedError('the user stop is still pressed; release it first')
            return self.physics.clear_stop()

    def user_stop(self, pressed: bool) -> str:
        """Press or release the arm's user stop; what happened, in one line.

        Pressed, the arm holds where it is and ignores commands (robot mode USER_STOPPED);
        released, it stays stopped (IDLE) until :meth:`recover` (:mod:`simops_sim.reflexes`).
        """
        with self.lock:
            physics, stop = self.physics, self.physics.stop
            if pressed:
                if stop is not None and stop.pressed:
                    return 'the user stop is already pressed'
                stop = user_stop_pressed(physics.time)
                physics.latch_stop(stop)
                self._stopped(stop)
                return 'pressed the user stop: the arm holds and ignores commands'
            if stop is None or not stop.pressed:
                return 'the user stop is not pressed'
            physics.latch_stop(replace(stop, time=physics.time, text=RELEASED))
            return 'released the user stop: the arm is idle until error recovery'

    def set_collision_torque(self, threshold: np.ndarray) -> None:
        """The collision reflex's threshold (7,) N*m (franka's set_full_collision_behavior)."""
        with self.lock:
            self.physics.set_collision_torque(threshold)

    def move_gripper(self, width: float, speed: float, force: float) -> None:
        """Drive the fingers to ``width`` (m) at ``speed`` (m/s) with at most ``force`` N."""
        with self.lock:
            self.physics.move_gripper(width, speed, force)

    def stop_gripper(self) -> None:
        """Hold the fingers at their current opening."""
        with self.lock:
            self.physics.set_gripper_width(self.physics.gripper_width()[0])

    def gripper_state(self) -> tuple[float, float, float]:
        """Sim time (s), the measured opening (m) and its rate (m/s), read at one instant."""
        with self.lock:
            return (self.physics.time, *self.physics.gripper_width())

    def stamp_ns(self) -> int:
        """The stamp (ns) of the current state."""
        return self._stepper.stamp_ns()

    def hold(self) -> None:
        """Hold the arm where it is now, dropping queued commands (a cancel)."""
        with self.lock:
            self._hold()

    def _hold(self) -> None:
        self.physics.hold()
        self._inbox.clear()
        self._streaming = False
        self._pacer.end()
        self._pass_queued()

    def _pass_queued(self) -> None:
        """Mark every command submitted so far as replaced (a hold or a reset).

        The replacement takes a number of its own, so the next submitted command does not
        count as applied already.
        """
        self._submitted += 1
        self._applied = self._submitted
        self._plan = None

    def on_sim_clock(self, goal: TrajectoryGoal) -> TrajectoryGoal:
        """``goal`` with its ``header.stamp`` start moved onto sim time.

        Raises :class:`TrajectoryError` when the stamp is on another clock (it starts more
        than :data:`MAX_STAMP_OFFSET` s ahead, or ends that far behind).
        """
        if goal.start is None:
            return goal
        with self.lock:
            start = goal.start - 1e-9 * self._stepper.stamp_offset
            lead = start - self.physics.time
        lag = -lead - float(goal.times[-1])
        if max(lead, lag) > MAX_STAMP_OFFSET:
            clock = 'system time' if self._stepper.system_stamps else 'sim time (use_sim_time)'
            where = f'lies {lead:.0f} s ahead of' if lead > 0 else f'ends {lag:.0f} s behind'
            raise TrajectoryError(f'header.stamp {goal.start:.3f} s {where} this node\'s '
                                  f'clock; stamp with {clock} or leave it zero to start now',
                                  'clock')
        return replace(goal, start=start)

    def count_rejected(self) -> int:
        """Count a rejected command; return this arm's running total."""
        with self.lock:
            self.counts.dropped_commands += 1
            return self.counts.dropped_commands

    def set_goal_pose(self, position: np.ndarray, quaternion: np.ndarray) -> None:
        """Move the goal marker: ``position`` (3,) m, unit ``quaternion`` (4,) w-x-y-z."""
        with self.lock:
            self.physics.set_goal_pose(position, quaternion)

    # --- the physics thread, with the lock held ----------------------------------------------

    def take_arrived(self, by: float, late: float = 0.0) -> None:
        """Apply every command that had arrived ``by`` (``time.monotonic()`` s).

        :meth:`~simops_sim.stepper.Stepper.advance` says when that is, and how ``late`` (s)
        the step runs on its schedule: the stream rule takes each arrival that much earlier,
        on the schedule's clock. Physics thread.
        """
        inbox = self._inbox
        while inbox and inbox[0][0] <= by:
            arrival, number, command = inbox.popleft()
            self._apply(arrival - late, number, command)

    def waiting(self) -> bool:
        """Whether a command waits (lockstep advances on one). Physics thread."""
        return bool(self._inbox)

    def take_next(self) -> None:
        """Apply the next queued command, if any (lockstep). Physics thread."""
        if self._inbox:
            self._apply(*self._inbox.popleft())

    def before_step(self) -> ProtectiveStop | None:
        """Replace a timed-out streamed target with a hold; return the stop now in force.

        Physics thread.
        """
        physics = self.physics
        if (self._streaming
                and physics.time - self._last_command > self._stepper.timing.command_timeout):
            physics.hold()
            self._streaming = False
            self.counts.command_timeouts += 1
        return physics.stop

    def after_step(self, before: ProtectiveStop | None) -> None:
        """Report a stop that latched during the step (``before``: the one in force then).

        Physics thread.
        """
        stop = self.physics.stop
        if stop is not before and stop is not None:
            self._stopped(stop)

    def restart(self, clear: bool) -> None:
        """After the world was reset: the stream ends; ``clear`` also drops what is queued.

        Physics thread.
        """
        self._streaming = False
        if clear:
            self._pacer.end()
            self._inbox.clear()
            self._pass_queued()
            if self.control is not None:   # a new world: its stop ended, everything runs
                self.control.restart()
                self._follow_law()

    def _apply(self, arrival: float, number: int, command: ArmCommand | TrajectoryGoal) -> None:
        physics, timing = self.physics, self._stepper.timing
        refusal = self._refusal(command.controller if isinstance(command, ArmCommand)
                                else ARM_CONTROLLER)
        if refusal:   # the controller went inactive while the command waited
            self.counts.dropped_commands += 1
            self._rejected = (number, refusal)
            return
        now, before = physics.time, physics.stop
        streamed = isinstance(command, ArmCommand)
        if streamed:   # from the target, by the stream rule
            current, moving = physics.arm_target, None
            goal, speed = self._pacer.goal(arrival, command.arm, current, timing.control_period,
                                           timing.command_timeout)
        else:   # from the measured state, as JointTrajectoryController
            (current, moving), goal, speed = physics.arm_measured(), command, None
        start = now if goal.start is None else goal.start
        plan = TrajectoryPlan(goal, start, current, now, moving)
        stop = physics.follow(plan, speed)
        if stop is not None:
            counts = self.counts
            counts.dropped_commands += 1
            self._rejected = (number, stop.message())
            self._pacer.end()
            self._streaming = False
            if stop is not before:
                self._stopped(stop)
            else:
                self._warn('stopped', f'ignored a command: the arm is in a {stop.message()}; '
                                      'call ErrorRecovery first '
                                      f'({counts.dropped_commands} refused so far)')
            return
        self._applied = number
        self._plan = (plan.start, goal.times)
        self._last_command = now
        self._streaming = streamed
        if streamed:
            self._pacer.followed(arrival, plan.positions[-1])
        else:
            self._pacer.end()
        if isinstance(command, ArmCommand) and command.gripper_width is not None:
            physics.set_gripper_width(command.gripper_width)

    def _stopped(self, stop: ProtectiveStop) -> None:
        """Count and report a stop that just latched."""
        self._last_stop = stop
        self.counts.protective_stops += 1
        self._streaming = False
        if self.control is not None:
            self.control.on_error()
        self._warn('protective_stop', f'{stop.message()}; the arm holds and ignores commands '
                                      'until ErrorRecovery')

    def _warn(self, kind: str, text: str) -> None:
        self._stepper.warn(kind, f'{self.prefix.rstrip("_")}: {text}' if self.prefix else text)
