"""The simulator's clockwork, apart from ROS: commands in, paced steps, frames out (no rclpy).

:class:`Stepper` owns a :class:`~simops_sim.world.World` (one arm, or ``fr3_duo``'s two) and
everything around a step; what is an arm's own (its commands, stops and frames) is its
:class:`~simops_sim.arm_lane.ArmLane`:

- pacing: ``realtime`` steps on absolute wall-clock deadlines (``realtime_factor`` sim s per
  wall s, 0 runs free; a hiccup under :data:`MAX_CATCH_UP` s is caught up, a longer stall
  re-anchors the schedule and counts an overrun); ``lockstep`` advances one control period
  per command, or per ``lockstep_timeout`` wall seconds without one;
- stamps: sim time, or without ``/clock`` sim time plus an offset onto the system clock
  fixed whenever the schedule is (re)anchored, so a step's stamp is the system time it was
  scheduled for, as a real arm's driver stamps;
- followers (the camera loop): a catch-up runs at most :data:`FOLLOW_LEAD` s of sim time
  past the next look each follower needs, so a sensor thread paced by the wall misses no
  more sim time than that while the physics makes up lateness in a burst;
- divergence recovery (the whole world back to the keyframe), and the diagnostics values
  (counts summed over the arms).

After each step the physics thread copies what is due into a
:class:`~simops_sim.arm_lane.Frame` per arm under the lock and hands them to the
:data:`Publish` hook after releasing it, so publishing never blocks the executor's
callbacks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from simops_core.sim_params import SimParams
from simops_sim.arm_lane import ArmLane, Frame
from simops_sim.stream_rule import MAX_CATCH_UP
from simops_sim.world import World

POSE_RATE = 100.0          # Hz of sim time, flange and object poses
VIEWER_RATE = 60.0         # Hz of wall time
PAUSE_POLL = 0.05          # s between checks while paused
FOLLOW_LEAD = 0.1          # s of sim time a catch-up may run past a follower's next look
FOLLOW_POLL = 0.001        # s of wall time between looks at the followers while waiting


def open_viewer(world: World) -> Viewer | None:
    """MuJoCo's passive viewer on ``world``; None when no display is set."""
    if not (os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')):
        return None
    from mujoco import viewer

    return viewer.launch_passive(world.model, world.data)


Publish = Callable[[Frame], None]
"""Hook called by the physics thread, outside the lock, with each step's frame of each arm."""

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
    follower_wait: float = 0.0       # s of wall time a catch-up waited for its followers
    divergences: int = 0             # in this window
    overruns: int = 0                # cumulative, like the two below
    divergences_total: int = 0
    last_divergence: str = ''
    window_wall: float = field(default_factory=time.monotonic)
    window_sim: float = 0.0


@dataclass(frozen=True)
class Report:
    """One diagnostics window: level ``ok``, ``warn`` or ``error``, a message, the values."""

    level: str
    message: str
    values: dict[str, float | int | str | bool]


class Stepper:
    """Steps ``world`` under ``timing``; see the module docstring.

    ``system_ns`` reads the system clock (ns) for stamps without ``/clock``; None stamps
    with sim time. ``rng`` draws the randomisation (each arm's params around its ``base``,
    from ``sample``), ``noise_rng`` the joint-state noise.
    """

    def __init__(self, world: World, timing: Timing, keyframe: str,
                 sample: Callable[[SimParams, np.random.Generator], SimParams] | None,
                 seed: int, system_ns: Callable[[], int] | None, warn: Warn,
                 viewer: Viewer | None = None) -> None:
        self.world = world
        self.timing = timing
        self.keyframe = keyframe
        self.lock = threading.Lock()
        self._wakeup = threading.Condition(self.lock)
        self._sample = sample
        self._base = {prefix: arm.params for prefix, arm in world.arms.items()}
        self.rng = np.random.default_rng(seed)
        self.noise_rng = np.random.default_rng([seed, 1])  # never shifts the randomisation
        self._system_ns = system_ns
        self.warn = warn
        self.viewer = viewer
        dt = world.timestep
        self._period_steps = max(1, round(timing.control_period / dt))
        self.state_every = max(1, round(1.0 / (timing.joint_state_rate * dt)))
        if timing.sync_mode == 'lockstep':
            # Joint states at the ends of periods only: a period's states go out together
            # after it, and a controller ticking on its own clock could act on one from
            # inside the burst, which no env step shows it.
            self.state_every = self._period_steps * max(
                1, round(self.state_every / self._period_steps))
        self.pose_every = max(1, round(1.0 / (POSE_RATE * dt)))
        self.robot_every = max(1, round(1.0 / (timing.robot_state_rate * dt)))
        self.lanes = {prefix: ArmLane(self, prefix, arm) for prefix, arm in world.arms.items()}
        self._lanes = tuple(self.lanes.values())
        self._outside_reported = 0   # learned-sensor samples beyond its range, reported so far
        self._step_index = 0
        self._anchor: tuple[float, int] | None = None   # (wall time, step index)
        self.stamp_offset = 0   # ns from sim time to stamps (system time without /clock)
        self.paused = False
        self.counters = Counters()
        self._followers: list[Callable[[], float]] = []
        self.reset()

    @property
    def arm(self) -> ArmLane:
        """The lane of a world with one arm."""
        if len(self._lanes) != 1:
            raise ValueError(f'this world has {len(self._lanes)} arms; pick one of '
                             f'{list(self.lanes)} from lanes')
        return self._lanes[0]

    @property
    def system_stamps(self) -> bool:
        """Whether stamps are system time (no ``/clock``) rather than sim time."""
        return self._system_ns is not None

    def summary(self) -> str:
        """One line for the log: arms, joints, rates, pacing and command delay."""
        t, dt = self.timing, self.world.timestep
        mode = t.sync_mode if t.sync_mode == 'lockstep' else (
            f'realtime x{t.realtime_factor:g}' if t.realtime_factor else 'free-running')
        first = self._lanes[0].physics
        arms = '' if len(self._lanes) == 1 else (
            f'{len(self._lanes)} arms ({", ".join(self.lanes)}) of ')
        return (f'{arms}{len(first.spec.joint_names)} joints, {1 / dt:.0f} Hz physics, {mode}, '
                f'joint_states at {1 / (self.state_every * dt):.0f} Hz, command delay '
                f'{first.delay_steps} steps')

    @contextmanager
    def followed_by(self, needs: Callable[[], float]) -> Iterator[None]:
        """Within the block, a catch-up runs at most :data:`FOLLOW_LEAD` past ``needs()``.

        ``needs`` returns the sim time (s) of the follower's next look at the world (the
        camera loop's next due frame); the physics thread calls it with the lock held. Only
        a late schedule waits: a physics on time never waits for a follower.
        """
        with self.lock:
            self._followers.append(needs)
        try:
            yield
        finally:
            with self.lock:
                self._followers.remove(needs)

    # --- from the executor thread ----------------------------------------------------------

    def notify(self) -> None:
        """Wake the physics thread (a command arrived); call with the lock held."""
        self._wakeup.notify()

    def wake(self) -> None:
        """Wake a waiting physics thread (to notice a stop)."""
        with self.lock:
            self._wakeup.notify()

    def reset(self) -> list[Frame]:
        """Back to the keyframe at sim time 0 (re-randomised when sampling); full frames."""
        with self.lock:
            if self._sample is not None:
                self.world.apply_params({prefix: self._sample(base, self.rng)
                                         for prefix, base in self._base.items()})
            self.world.reset_keyframe(self.keyframe)
            for lane in self._lanes:
                lane.restart(clear=True)
            self._step_index = 0
            self._anchor = None
            self._anchor_stamps()
            return self._frames(force=True)

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

    def stamp_ns(self) -> int:
        """The stamp (ns) of the current state."""
        with self.lock:
            return self.stamp_at(self.world.time)

    def stamp_at(self, sim_time: float) -> int:
        """The stamp (ns) of sim time ``sim_time`` (s); call with the lock held."""
        return round(sim_time * 1e9) + self.stamp_offset

    # --- the physics thread ----------------------------------------------------------------

    def run(self, running: threading.Event, publish: Publish,
            intake: Callable[[], None] | None = None) -> None:
        """Step until ``running`` clears, handing each step's frames to ``publish``.

        ``intake``: called before each realtime step, outside the lock, to submit the commands
        that arrived since the last (a real arm's update loop reads its commands so; the
        executor's callbacks submit them otherwise, and in lockstep).
        """
        for frame in self.reset_frames():
            publish(frame)
        if self.timing.sync_mode == 'lockstep':
            self._run_lockstep(running, publish)
        else:
            self._run_realtime(running, publish, intake)

    def reset_frames(self) -> list[Frame]:
        """The full frames of the current state."""
        with self.lock:
            return self._frames(force=True)

    def _run_realtime(self, running: threading.Event, publish: Publish,
                      intake: Callable[[], None] | None) -> None:
        next_viewer = 0.0
        while running.is_set():
            if self.paused:
                if intake is not None:
                    intake()
                with self.lock:
                    self._wakeup.wait(PAUSE_POLL)
                continue
            late, due = self._wait_for_deadline()
            if intake is not None:
                intake()
            if late and self._followers:
                late = self._wait_for_followers(running, late, due)
            frames = self.advance(late, due)
            for frame in frames:
                publish(frame)
            if self.viewer is not None and time.monotonic() >= next_viewer:
                next_viewer = time.monotonic() + 1.0 / VIEWER_RATE
                with self.lock:
                    self.viewer.sync()

    def advance(self, late: float, due: float) -> list[Frame]:
        """One realtime step: apply what had arrived (see below), step, the frames.

        ``due``: the step's due time (``time.monotonic()`` s, the clock of the arrivals);
        ``late``: how late (s) it runs, so it runs at ``due + late``. The realtime loop calls
        it at every step. The commands it applies are those that arrived:

        - with ``/clock`` (sim time is the graph's clock), before it runs: a simulator behind
          real time would otherwise add its lag to every command, a delay in the loop of a
          node ticking on sim time that a real arm never adds (two arms on two cores ran
          up to 0.34 s behind, and a policy overshot its arm into the table);
        - with stamps on the system clock (no ``/clock``, as a real arm's driver stamps),
          before it was due, which is its stamp: a command takes effect at the stamp of its
          arrival, as on an arm that is never late, as the recording shows it and as
          ``fit``'s replay applies it (:func:`simops_sysid.replay.application_steps`);
          after a stall longer than :data:`MAX_CATCH_UP`, everything.

        The stream rule paces a stream on the clock its plans run on, the schedule's (sim
        time): with ``/clock`` a command taken at a step running ``late`` arrived ``late``
        earlier on that clock. A simulator catching up on a hiccup runs faster than the wall,
        so a node ticking on sim time sends its 50 ms of sim time in a few ms of wall time;
        paced on the wall, each target was reached over a few ms, a protective stop.
        """
        with self.lock:
            if late:
                self.counters.lag_max = max(self.counters.lag_max, late)
                if late > MAX_CATCH_UP:
                    self.counters.overruns += 1
                    self._anchor = None
            on_stamps = self._system_ns is not None
            arrived = due if on_stamps and late <= MAX_CATCH_UP else due + late
            for lane in self._lanes:
                lane.take_arrived(arrived, 0.0 if on_stamps else late)
            return self._timed_step()

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
            due = wall0 + (self._step_index + 1 - step0) * self.world.timestep / factor
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
            return 0.0, due
        return -delay, due

    def _wait_for_followers(self, running: threading.Event, late: float, due: float
                            ) -> float:
        """In a catch-up, wait until no follower's next look is :data:`FOLLOW_LEAD` behind.

        Returns the step's lateness (s) after the wait.
        """
        started = time.monotonic()
        while running.is_set():
            with self.lock:
                now = self.world.time
                if self.paused or all(now - needs() <= FOLLOW_LEAD
                                      for needs in self._followers):
                    self.counters.follower_wait += time.monotonic() - started
                    break
            time.sleep(FOLLOW_POLL)
        return max(late, time.monotonic() - due)

    def _run_lockstep(self, running: threading.Event, publish: Publish) -> None:
        lanes = self._lanes
        while running.is_set():
            frames = []
            with self.lock:
                self._wakeup.wait_for(
                    lambda: (any(lane.waiting() for lane in lanes) and not self.paused)
                    or not running.is_set(),
                    self.timing.lockstep_timeout)
                if self.paused or not running.is_set():
                    continue
                for lane in lanes:
                    lane.take_next()
                for _ in range(self._period_steps):
                    frames.extend(self._timed_step())
                if self.viewer is not None:
                    self.viewer.sync()
            for frame in frames:
                publish(frame)

    def _timed_step(self) -> list[Frame]:
        started = time.perf_counter()
        self._control_and_step()
        frames = self._frames(force=False)
        spent = time.perf_counter() - started
        counters = self.counters
        counters.steps += 1
        counters.step_wall += spent
        counters.step_wall_max = max(counters.step_wall_max, spent)
        return frames

    def _control_and_step(self) -> None:
        """Each arm's timeout hold, one physics step, each arm's new stop, divergence recovery.

        The physics samples any trajectory plan itself, at every step.
        """
        world, lanes = self.world, self._lanes
        stops = [lane.before_step() for lane in lanes]
        before = world.time
        world.step()
        for lane, stop in zip(lanes, stops, strict=True):
            lane.after_step(stop)
        problem = world.diverged()
        if problem is not None:  # never publish a diverged state: back to the keyframe
            world.recover(self.keyframe, before + world.timestep)
            for lane in lanes:
                lane.restart(clear=False)
            counters = self.counters
            counters.divergences += 1
            counters.divergences_total += 1
            counters.last_divergence = problem
            self.warn('diverged', f'physics diverged ({problem}); reset to keyframe '
                                  f'{self.keyframe!r}, holding it '
                                  f'({counters.divergences_total} so far)')
        self._step_index += 1

    def _frames(self, force: bool) -> list[Frame]:
        """Each arm's copies of what is due at the current step (everything when ``force``)."""
        return [self._frame(lane, self._step_index, force) for lane in self._lanes]

    def _frame(self, lane: ArmLane, index: int, force: bool) -> Frame:
        """Copies of what ``lane``'s arm publishes at step ``index`` (everything when ``force``).

        Joint states carry the configured noise; the lock is held.
        """
        physics, timing = lane.physics, self.timing
        frame = Frame(self.stamp_at(physics.time), arm=lane.prefix)
        if force or index % self.state_every == 0:
            joints = np.empty((3, len(physics.spec.joint_names)))
            physics.read_joints(joints)
            noise = self.noise_rng
            if timing.joint_state_noise:
                joints[0] += noise.normal(0.0, timing.joint_state_noise, joints.shape[1])
            if timing.joint_effort_noise:
                joints[2] += noise.normal(0.0, timing.joint_effort_noise, joints.shape[1])
            frame.joints = joints
            self.counters.joint_states += 1
        if force or index % self.robot_every == 0:
            frame.robot = lane.state_now()
        if force or index % self.pose_every == 0:
            bodies = physics.index
            frame.flange = physics.body_pose(bodies.flange_body)
            if bodies.object_body >= 0:
                frame.object = physics.body_pose(bodies.object_body)
        return frame

    def _anchor_stamps(self) -> None:
        """Without /clock, map the current sim time onto the system clock's now."""
        if self._system_ns is not None:
            self.stamp_offset = self._system_ns() - round(self.world.time * 1e9)

    # --- diagnostics -------------------------------------------------------------------------

    def report(self) -> Report:
        """The values of the window since the last report, then start a new window."""
        with self.lock:
            c = self.counters
            now, sim = time.monotonic(), self.world.time
            wall = max(now - c.window_wall, 1e-9)
            rtf = (sim - c.window_sim) / wall if sim >= c.window_sim else 0.0
            timing, paused = self.timing, self.paused
            self.counters = Counters(overruns=c.overruns,
                                     divergences_total=c.divergences_total,
                                     last_divergence=c.last_divergence,
                                     window_wall=now, window_sim=sim)
            counts = [lane.counts for lane in self._lanes]
            stopped = [lane for lane in self._lanes if lane.physics.stop is not None]
            stop = stopped[0].physics.stop if stopped else None
            arm = stopped[0].prefix.rstrip('_') + ': ' if stopped and stopped[0].prefix else ''
            outside = sum(lane.physics.sensor_outside for lane in self._lanes)
            extrapolated, self._outside_reported = (outside - self._outside_reported,
                                                    outside)
        values: dict[str, float | int | str | bool] = {
            'realtime_factor': rtf,
            'target_realtime_factor': timing.realtime_factor,
            'step_time_mean_us': 1e6 * c.step_wall / max(c.steps, 1),
            'step_time_max_us': 1e6 * c.step_wall_max,
            'lag_max_ms': 1e3 * c.lag_max,
            'follower_wait_ms': 1e3 * c.follower_wait,
            'joint_state_rate_hz': c.joint_states / wall,
            'sim_time_s': sim,
            'dropped_commands': sum(n.dropped_commands for n in counts),
            'command_timeouts': sum(n.command_timeouts for n in counts),
            'overruns': c.overruns,
            'divergences': c.divergences_total,
            'last_divergence': c.last_divergence,
            'paused': paused,
            'protective_stops': sum(n.protective_stops for n in counts),
            'protective_stop': '' if stop is None else stop.error,
            'sensor_model_outside': outside,
        }
        if c.divergences:
            return Report('error', f'physics diverged ({c.last_divergence}); reset to '
                                   f'keyframe {self.keyframe!r}', values)
        if stop is not None:
            return Report('error', f'{arm}{stop.message()}; call ErrorRecovery', values)
        if (timing.sync_mode == 'realtime' and timing.realtime_factor > 0 and not paused
                and rtf < 0.95 * timing.realtime_factor):
            return Report('warn', 'behind real time', values)
        if extrapolated:
            return Report('warn', f'the learned sensor model extrapolates: {extrapolated} '
                                  'samples beyond its training range since the last report',
                          values)
        return Report('ok', 'ok', values)
