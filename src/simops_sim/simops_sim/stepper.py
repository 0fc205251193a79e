"""The simulator's clockwork, apart from ROS: commands in, paced steps, frames out (no rclpy).

:class:`Stepper` owns a :class:`~simops_sim.physics.Physics` and everything around a step:

- the command inbox: streamed :class:`~simops_sim.joint_commands.ArmCommand` targets, each
  reached linearly over one ``control_period`` (within a realtime stream: over the time
  since the previous one arrived, if longer; a protective stop if that is too fast; slower
  where a stall of this node left the target behind) as JointTrajectoryController reaches
  a one-point trajectory, and
  :class:`~simops_sim.trajectory_plan.TrajectoryGoal` trajectories; the physics samples the
  plan. Each command is applied at the first step due after it arrived, also while the
  schedule catches up after a hiccup;
- pacing: ``realtime`` steps on absolute wall-clock deadlines (``realtime_factor`` sim s per
  wall s, 0 runs free; a hiccup under :data:`MAX_CATCH_UP` s is caught up, a longer stall
  re-anchors the schedule and counts an overrun); ``lockstep`` advances one control period
  per command, or per ``lockstep_timeout`` wall seconds without one;
- stamps: sim time, or without ``/clock`` sim time plus an offset onto the system clock
  fixed whenever the schedule is (re)anchored, so a step's stamp is the system time it was
  scheduled for, as a real arm's driver stamps;
- the command timeout (a streamed target older than ``command_timeout`` s of sim time is
  replaced by a hold), divergence recovery, and the diagnostics values;
- protective stops (:mod:`simops_sim.reflexes`): a command beyond the velocity limits, or a
  measured state beyond the arm's limits, stops the arm; it holds, commands are refused and
  diagnostics report an error until :meth:`Stepper.recover` (franka_msgs' ErrorRecovery).

After each step the physics thread copies what is due into a :class:`Frame` under the lock
and hands it to the :data:`Publish` hook after releasing it, so publishing never blocks the
executor's callbacks.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from simops_core.sim_params import SimParams
from simops_sim.joint_commands import ArmCommand
from simops_sim.physics import Physics
from simops_sim.reflexes import ProtectiveStop
from simops_sim.trajectory_plan import (
    TrajectoryError,
    TrajectoryGoal,
    TrajectoryPlan,
    stream_goal,
)

POSE_RATE = 100.0          # Hz of sim time, flange and object poses
VIEWER_RATE = 60.0         # Hz of wall time
MAX_CATCH_UP = 1.0         # s behind schedule before the schedule is re-anchored
CATCH_UP_SPEED = 0.8       # of the velocity limits: a stalled stream's fastest catch-up
MAX_STAMP_OFFSET = 60.0    # s a trajectory may start ahead of, or end behind, sim time
PAUSE_POLL = 0.05          # s between checks while paused


def open_viewer(physics: Physics) -> Viewer | None:
    """MuJoCo's passive viewer on ``physics``; None when no display is set."""
    if not (os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')):
        return None
    from mujoco import viewer

    return viewer.launch_passive(physics.model, physics.data)


@dataclass(frozen=True)
class FollowState:
    """The arm at one instant, for an action server.

    Sim ``time`` (s) and its ``stamp_ns``; ``applied``, the sequence number of the command
    the arm follows, and ``rejected``, the last rejected one with the reason; ``stop``, the
    protective stop in force, ``last_stop`` the latest one (kept after a recovery);
    ``desired_q`` (7,) rad and ``desired_qd`` (7,) rad/s, the controller's targets;
    ``actual_q``, ``actual_qd``, ``actual_effort`` (N*m) the measured joints (sensor bias
    included, as published, without noise); ``contact`` (7,) N*m, the joint torques the
    contacts apply (what the collision reflex checks).
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


@dataclass
class Frame:
    """What one step publishes: the stamp (ns) and copies of what is due, else None.

    ``joints`` (3, n): position, velocity, effort in ``spec.joint_names`` order (sensor bias
    and noise included); poses: (position (3,) m, quaternion (4,) w-x-y-z) in the base frame;
    ``robot``: the arm's state for franka's robot-state topic.
    """

    stamp_ns: int
    joints: np.ndarray | None = None
    flange: tuple[np.ndarray, np.ndarray] | None = None
    object: tuple[np.ndarray, np.ndarray] | None = None
    robot: FollowState | None = None


Publish = Callable[[Frame], None]
"""Hook called by the physics thread, outside the lock, with each step's frame."""

Warn = Callable[[str, str], None]
"""Hook for a warning: (kind, text); the node throttles per kind."""


class Viewer(Protocol):
    """The part of MuJoCo's passive viewer the stepper uses."""

    def sync(self) -> None:
        """Copy the physics state to the viewer."""

    def close(self) -> None:
        """Close the viewer's window."""


@dataclass(frozen=True)
class Timing:
    """How the stepper runs; the live fields may change while it runs (:meth:`Stepper.set`).

    Times in s; ``realtime_factor`` in sim s per wall s; rates in Hz of sim time;
    ``joint_state_noise`` in rad (m for the fingers); ``joint_effort_noise`` in N*m (N for
    the fingers).
    """

    sync_mode: str
    realtime_factor: float
    control_period: float
    lockstep_timeout: float
    command_timeout: float
    joint_state_rate: float
    joint_state_noise: float
    joint_effort_noise: float
    robot_state_rate: float


@dataclass
class Counters:
    """Statistics of the current diagnostics window (cumulative where noted)."""

    steps: int = 0
    step_wall: float = 0.0           # s of wall time spent stepping
    step_wall_max: float = 0.0
    joint_states: int = 0
    lag_max: float = 0.0             # s, worst lateness of a step against its deadline
    divergences: int = 0             # in this window
    dropped_commands: int = 0        # cumulative, like the three below
    command_timeouts: int = 0
    overruns: int = 0
    divergences_total: int = 0
    last_divergence: str = ''
    protective_stops: int = 0        # cumulative
    window_wall: float = field(default_factory=time.monotonic)
    window_sim: float = 0.0


@dataclass(frozen=True)
class Report:
    """One diagnostics window: level ``ok``, ``warn`` or ``error``, a message, the values."""

    level: str
    message: str
    values: dict[str, float | int | str | bool]


class Stepper:
    """Steps ``physics`` under ``timing``; see the module docstring.

    ``system_ns`` reads the system clock (ns) for stamps without ``/clock``; None stamps
    with sim time. ``rng`` draws the randomisation (around ``base``, from ``sample``),
    ``noise_rng`` the joint-state noise.
    """

    def __init__(self, physics: Physics, timing: Timing, keyframe: str,
                 sample: Callable[[SimParams, np.random.Generator], SimParams] | None,
                 seed: int, system_ns: Callable[[], int] | None, warn: Warn,
                 viewer: Viewer | None = None) -> None:
        self.physics = physics
        self.timing = timing
        self.keyframe = keyframe
        self.lock = threading.Lock()
        self._wakeup = threading.Condition(self.lock)
        self._sample = sample
        self._base = physics.params
        self.rng = np.random.default_rng(seed)
        self.noise_rng = np.random.default_rng([seed, 1])  # never shifts the randomisation
        self._system_ns = system_ns
        self._warn = warn
        self.viewer = viewer
        dt = physics.timestep
        self._state_every = max(1, round(1.0 / (timing.joint_state_rate * dt)))
        self._pose_every = max(1, round(1.0 / (POSE_RATE * dt)))
        self._robot_every = max(1, round(1.0 / (timing.robot_state_rate * dt)))
        self._period_steps = max(1, round(timing.control_period / dt))
        # (time.monotonic() at arrival, sequence number, command): applied at the first step
        # due after it arrived. Numbers count submissions; ``_applied`` is the number of the
        # command the arm follows (a hold or reset moves it past every earlier one), and
        # ``_rejected`` the last rejected one with the reason.
        self._inbox: deque[tuple[float, int, ArmCommand | TrajectoryGoal]] = deque()
        self._submitted = 0
        self._applied = 0
        self._rejected: tuple[int, str] = (0, '')
        self._last_stop: ProtectiveStop | None = None
        self._streaming = False
        # time.monotonic() at the arrival of the last applied streamed target, None after a
        # trajectory, a cancel, a reset or a stop (see _apply)
        self._streamed_at: float | None = None
        self._streamed = np.zeros(0)   # (7,) rad, the last applied streamed target
        self._last_command = 0.0
        self._step_index = 0
        self._anchor: tuple[float, int] | None = None   # (wall time, step index)
        self._stamp_offset = 0
        self.paused = False
        self.counters = Counters()
        self.reset()

    def summary(self) -> str:
        """One line for the log: joints, rates, pacing and command delay."""
        t, dt = self.timing, self.physics.timestep
        mode = t.sync_mode if t.sync_mode == 'lockstep' else (
            f'realtime x{t.realtime_factor:g}' if t.realtime_factor else 'free-running')
        return (f'{len(self.physics.spec.joint_names)} joints, {1 / dt:.0f} Hz physics, {mode}, '
                f'joint_states at {1 / (self._state_every * dt):.0f} Hz, command delay '
                f'{self.physics.delay_steps} steps')

    # --- from the executor thread ----------------------------------------------------------

    def submit(self, command: ArmCommand | TrajectoryGoal) -> int:
        """Queue a checked command; realtime applies it at the next step, lockstep per period.

        Returns its sequence number (see :meth:`follow_state`).
        """
        with self.lock:
            self._submitted += 1
            self._inbox.append((time.monotonic(), self._submitted, command))
            self._wakeup.notify()
            return self._submitted

    def follow_state(self) -> FollowState:
        """What an action server needs to judge its goal, read at one instant."""
        with self.lock:
            return self._follow_state()

    def _follow_state(self) -> FollowState:
        physics, arm = self.physics, self.physics.index.arm_dof
        desired_q, desired_qd = physics.arm_desired()
        joints = np.empty((3, len(physics.spec.joint_names)))
        physics.read_joints(joints)
        contact = np.empty(arm)
        physics.contact_torque(contact)
        return FollowState(physics.time, round(physics.time * 1e9) + self._stamp_offset,
                           self._applied, self._rejected, physics.stop, self._last_stop,
                           desired_q, desired_qd, *joints[:, :arm].copy(), contact)

    def stopped(self) -> ProtectiveStop | None:
        """The protective stop in force, or None."""
        with self.lock:
            return self.physics.stop

    def recover(self) -> ProtectiveStop | None:
        """End the protective stop (ErrorRecovery); the arm holds where it stopped.

        Returns the stop that ended, or None when none was in force.
        """
        with self.lock:
            return self.physics.clear_stop()

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

    def hold(self) -> None:
        """Hold the arm where it is now, dropping queued commands (a cancel)."""
        with self.lock:
            self.physics.hold()
            self._inbox.clear()
            self._streaming, self._streamed_at = False, None
            self._pass_queued()

    def _pass_queued(self) -> None:
        """Mark every command submitted so far as replaced (a hold or a reset).

        The replacement takes a number of its own, so the next submitted command does not
        count as applied already.
        """
        self._submitted += 1
        self._applied = self._submitted

    def on_sim_clock(self, goal: TrajectoryGoal) -> TrajectoryGoal:
        """``goal`` with its ``header.stamp`` start moved onto sim time.

        Raises :class:`TrajectoryError` when the stamp is on another clock (it starts more
        than :data:`MAX_STAMP_OFFSET` s ahead, or ends that far behind).
        """
        if goal.start is None:
            return goal
        with self.lock:
            start = goal.start - 1e-9 * self._stamp_offset
            lead = start - self.physics.time
        lag = -lead - float(goal.times[-1])
        if max(lead, lag) > MAX_STAMP_OFFSET:
            clock = 'system time' if self._system_ns else 'sim time (use_sim_time)'
            where = f'lies {lead:.0f} s ahead of' if lead > 0 else f'ends {lag:.0f} s behind'
            raise TrajectoryError(f'header.stamp {goal.start:.3f} s {where} this node\'s '
                                  f'clock; stamp with {clock} or leave it zero to start now',
                                  'clock')
        return replace(goal, start=start)

    def count_rejected(self) -> int:
        """Count a rejected command; return the running total."""
        with self.lock:
            self.counters.dropped_commands += 1
            return self.counters.dropped_commands

    def set_goal_pose(self, position: np.ndarray, quaternion: np.ndarray) -> None:
        """Move the goal marker: ``position`` (3,) m, unit ``quaternion`` (4,) w-x-y-z."""
        with self.lock:
            self.physics.set_goal_pose(position, quaternion)

    def reset(self) -> Frame:
        """Back to the keyframe at sim time 0 (re-randomised when sampling); the full frame."""
        with self.lock:
            if self._sample is not None:
                self.physics.apply_params(self._sample(self._base, self.rng))
            self.physics.reset_keyframe(self.keyframe)
            self._streaming, self._streamed_at = False, None
            self._inbox.clear()
            self._pass_queued()
            self._step_index = 0
            self._anchor = None
            self._anchor_stamps()
            return self._frame(force=True)

    def pause(self, paused: bool) -> None:
        """Stop or resume stepping; resuming re-anchors the realtime schedule."""
        with self.lock:
            self.paused = paused
            self._anchor = None
            self._wakeup.notify()

    def set(self, name: str, value: float) -> None:
        """Change a live :class:`Timing` field (the realtime schedule re-anchors)."""
        with self.lock:
            self.timing = replace(self.timing, **{name: float(value)})
            self._anchor = None
            self._wakeup.notify()

    def wake(self) -> None:
        """Wake a waiting physics thread (to notice a stop)."""
        with self.lock:
            self._wakeup.notify()

    def stamp_ns(self) -> int:
        """The stamp (ns) of the current state."""
        with self.lock:
            return round(self.physics.time * 1e9) + self._stamp_offset

    # --- the physics thread ----------------------------------------------------------------

    def run(self, running: threading.Event, publish: Publish) -> None:
        """Step until ``running`` clears, handing each step's frame to ``publish``."""
        publish(self.reset_frame())
        if self.timing.sync_mode == 'lockstep':
            self._run_lockstep(running, publish)
        else:
            self._run_realtime(running, publish)

    def reset_frame(self) -> Frame:
        """The full frame of the current state."""
        with self.lock:
            return self._frame(force=True)

    def _run_realtime(self, running: threading.Event, publish: Publish) -> None:
        next_viewer = 0.0
        while running.is_set():
            if self.paused:
                with self.lock:
                    self._wakeup.wait(PAUSE_POLL)
                continue
            late, due = self._wait_for_deadline()
            with self.lock:
                if late:
                    self.counters.lag_max = max(self.counters.lag_max, late)
                    if late > MAX_CATCH_UP:
                        self.counters.overruns += 1
                        self._anchor = None
                # Catching up, a step applies only what had arrived when it was due, so a
                # hiccup does not squeeze several streamed targets into one step.
                while self._inbox and (late > MAX_CATCH_UP or self._inbox[0][0] <= due):
                    self._apply(*self._inbox.popleft())
                frame = self._timed_step()
            publish(frame)
            if self.viewer is not None and time.monotonic() >= next_viewer:
                next_viewer = time.monotonic() + 1.0 / VIEWER_RATE
                with self.lock:
                    self.viewer.sync()

    def _wait_for_deadline(self) -> tuple[float, float]:
        """Sleep until the next step is due; return how late (s) it already was, and when.

        The second value is the step's due time (``time.monotonic()`` s; now when running
        free).
        """
        factor = self.timing.realtime_factor
        if factor <= 0:
            return 0.0, time.monotonic()
        with self.lock:
            if self._anchor is None:
                self._anchor = (time.monotonic(), self._step_index)
                self._anchor_stamps()
            wall0, step0 = self._anchor
            due = wall0 + (self._step_index + 1 - step0) * self.physics.timestep / factor
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
            return 0.0, due
        return -delay, due

    def _run_lockstep(self, running: threading.Event, publish: Publish) -> None:
        while running.is_set():
            frames = []
            with self.lock:
                self._wakeup.wait_for(
                    lambda: (self._inbox and not self.paused) or not running.is_set(),
                    self.timing.lockstep_timeout)
                if self.paused or not running.is_set():
                    continue
                if self._inbox:
                    self._apply(*self._inbox.popleft())
                for _ in range(self._period_steps):
                    frames.append(self._timed_step())
                if self.viewer is not None:
                    self.viewer.sync()
            for frame in frames:
                publish(frame)

    def _apply(self, arrival: float, number: int, command: ArmCommand | TrajectoryGoal) -> None:
        physics = self.physics
        now, current, before = physics.time, physics.arm_target, physics.stop
        streamed = isinstance(command, ArmCommand)
        if streamed:
            # Within a realtime stream, a target is reached over the time since the previous
            # one arrived (at least a period, at most the command timeout; a gap longer than
            # MAX_CATCH_UP ends the stream): the stream's own pace, so
            # targets this node dropped or held through while it stalled (depth-1 command
            # QoS, command timeout) do not make the next one a jump.
            span, reference = self.timing.control_period, current
            if self._streamed_at is not None and self.timing.sync_mode == 'realtime':
                gap = arrival - self._streamed_at   # also across a command-timeout hold
                if gap <= MAX_CATCH_UP:   # reached before the command timeout holds it
                    span = min(max(span, gap), max(span, self.timing.command_timeout))
                    reference = self._streamed   # judged by the step as sent (see below)
            # The speed the stream asks for: its step from the previous target over the span,
            # whatever arrived in between (targets bunched by a stall of this node).
            speed = np.abs(command.arm - reference) / span
            # Where a stall left the arm target behind, it catches up no faster than that
            # or CATCH_UP_SPEED of the limits: the arm pays for this node's stall with lag,
            # never with a stop the stream did not ask for.
            ceiling = np.maximum(speed, CATCH_UP_SPEED * physics.spec.velocity)
            goal = stream_goal(command.arm, current, span, ceiling)
        else:
            goal, speed = command, None
        start = now if goal.start is None else goal.start
        plan = TrajectoryPlan(goal, start, current, now)
        stop = physics.follow(plan, speed)
        if stop is not None:
            self.counters.dropped_commands += 1
            self._rejected = (number, stop.message())
            self._streamed_at = None
            self._streaming = False
            if stop is not before:
                self._stopped(stop)
            else:
                self._warn('stopped', f'ignored a command: the arm is in a {stop.message()}; '
                                      'call ErrorRecovery first '
                                      f'({self.counters.dropped_commands} refused so far)')
            return
        self._applied = number
        self._last_command = now
        self._streaming = streamed
        self._streamed_at = arrival if streamed else None
        self._streamed = plan.positions[-1].copy()
        if isinstance(command, ArmCommand) and command.gripper_width is not None:
            physics.set_gripper_width(command.gripper_width)

    def _stopped(self, stop: ProtectiveStop) -> None:
        """Count and report a stop that just latched."""
        self._last_stop = stop
        self.counters.protective_stops += 1
        self._streaming = False
        self._warn('protective_stop', f'{stop.message()}; the arm holds and ignores commands '
                                      'until ErrorRecovery')

    def _timed_step(self) -> Frame:
        started = time.perf_counter()
        self._control_and_step()
        frame = self._frame(force=False)
        spent = time.perf_counter() - started
        counters = self.counters
        counters.steps += 1
        counters.step_wall += spent
        counters.step_wall_max = max(counters.step_wall_max, spent)
        return frame

    def _control_and_step(self) -> None:
        """The streamed-target timeout hold, one physics step, divergence recovery.

        The physics samples any trajectory plan itself, at every step.
        """
        physics = self.physics
        if (self._streaming and physics.time - self._last_command > self.timing.command_timeout):
            physics.hold()
            self._streaming = False
            self.counters.command_timeouts += 1
        before, stop = physics.time, physics.stop
        physics.step()
        if physics.stop is not stop and physics.stop is not None:
            self._stopped(physics.stop)
        problem = physics.diverged()
        if problem is not None:  # never publish a diverged state: back to the keyframe
            physics.recover(self.keyframe, before + physics.timestep)
            self._streaming = False
            counters = self.counters
            counters.divergences += 1
            counters.divergences_total += 1
            counters.last_divergence = problem
            self._warn('diverged', f'physics diverged ({problem}); reset to keyframe '
                                   f'{self.keyframe!r}, holding it '
                                   f'({counters.divergences_total} so far)')
        self._step_index += 1

    def _frame(self, force: bool) -> Frame:
        """Copies of what is due at the current step (everything when ``force``)."""
        index = self._step_index
        frame = Frame(round(self.physics.time * 1e9) + self._stamp_offset)
        if force or index % self._state_every == 0:
            joints = np.empty((3, len(self.physics.spec.joint_names)))
            self.physics.read_joints(joints)
            if self.timing.joint_state_noise:
                joints[0] += self.noise_rng.normal(0.0, self.timing.joint_state_noise,
                                                   joints.shape[1])
            if self.timing.joint_effort_noise:
                joints[2] += self.noise_rng.normal(0.0, self.timing.joint_effort_noise,
                                                   joints.shape[1])
            frame.joints = joints
            self.counters.joint_states += 1
        if force or index % self._robot_every == 0:
            frame.robot = self._follow_state()
        if force or index % self._pose_every == 0:
            bodies = self.physics.index
            frame.flange = self.physics.body_pose(bodies.flange_body)
            if bodies.object_body >= 0:
                frame.object = self.physics.body_pose(bodies.object_body)
        return frame

    def _anchor_stamps(self) -> None:
        """Without /clock, map the current sim time onto the system clock's now."""
        if self._system_ns is not None:
            self._stamp_offset = self._system_ns() - round(self.physics.time * 1e9)

    # --- diagnostics -------------------------------------------------------------------------

    def report(self) -> Report:
        """The values of the window since the last report, then start a new window."""
        with self.lock:
            c = self.counters
            now, sim = time.monotonic(), self.physics.time
            wall = max(now - c.window_wall, 1e-9)
            rtf = (sim - c.window_sim) / wall if sim >= c.window_sim else 0.0
            timing, paused = self.timing, self.paused
            self.counters = Counters(dropped_commands=c.dropped_commands,
                                     command_timeouts=c.command_timeouts, overruns=c.overruns,
                                     divergences_total=c.divergences_total,
                                     last_divergence=c.last_divergence,
                                     protective_stops=c.protective_stops,
                                     window_wall=now, window_sim=sim)
            stop = self.physics.stop
        values: dict[str, float | int | str | bool] = {
            'realtime_factor': rtf,
            'target_realtime_factor': timing.realtime_factor,
            'step_time_mean_us': 1e6 * c.step_wall / max(c.steps, 1),
            'step_time_max_us': 1e6 * c.step_wall_max,
            'lag_max_ms': 1e3 * c.lag_max,
            'joint_state_rate_hz': c.joint_states / wall,
            'sim_time_s': sim,
            'dropped_commands': c.dropped_commands,
            'command_timeouts': c.command_timeouts,
            'overruns': c.overruns,
            'divergences': c.divergences_total,
            'last_divergence': c.last_divergence,
            'paused': paused,
            'protective_stops': c.protective_stops,
            'protective_stop': '' if stop is None else stop.error,
        }
        if c.divergences:
            return Report('error', f'physics diverged ({c.last_divergence}); reset to '
                                   f'keyframe {self.keyframe!r}', values)
        if stop is not None:
            return Report('error', f'{stop.message()}; call ErrorRecovery', values)
        if (timing.sync_mode == 'realtime' and timing.realtime_factor > 0 and not paused
                and rtf < 0.95 * timing.realtime_factor):
            return Report('warn', 'behind real time', values)
        return Report('ok', 'ok', values)
