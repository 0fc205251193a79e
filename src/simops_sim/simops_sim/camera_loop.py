"""The simulator's camera thread, apart from ROS: paced on sim time, off the physics (no rclpy).

:class:`CameraLoop` renders the stepper's world at ``rate`` Hz of sim time. For each frame it
copies the positions under the physics lock (microseconds), then renders outside it, on its
own thread with its own OpenGL context and its own model copy: the physics thread never
waits for a frame. MuJoCo releases the GIL while it renders, so the 1 kHz physics keeps its
schedule (``bench/camera.py`` measures its lateness with the cameras on).

A frame is due every ``1 / rate`` s of sim time; when rendering falls behind, the loop skips
to the newest due frame instead of queueing old ones, and counts the skipped frames. The
loop follows the stepper (:meth:`~simops_sim.stepper.Stepper.followed_by`): a physics that
catches up a late schedule in a burst runs at most
:data:`~simops_sim.stepper.FOLLOW_LEAD` past the next due frame until it is taken, so the
sim time between two frames stays under a period plus that lead (a catch-up once ran 325 ms
of sim time between two frames, docs/cameras.md). After a world reset (sim time going back)
it starts again at the new time and, with appearance ranges, draws a new appearance, as
the physics draws new parameters.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simops_core.camera_rig import CameraSpec, Intrinsics
from simops_sim.appearance import AppearanceRanges
from simops_sim.rgbd import RgbdImage, RgbdRenderer, snapshot
from simops_sim.stepper import Stepper

POLL = 0.002   # s of wall time between looks at the sim clock while waiting

Deliver = Callable[[list[RgbdImage], int], None]
"""Hook called on the camera thread with each frame's images and their stamp (ns)."""


@dataclass
class RenderStats:
    """A diagnostics window: frames, render wall time (s), skipped frames."""

    frames: int = 0
    render_wall: float = 0.0
    render_wall_max: float = 0.0
    skipped: int = 0
    window_wall: float = 0.0


class CameraLoop:
    """Renders ``cameras`` of ``stepper``'s world every ``1 / rate`` s of sim time.

    ``appearance``: ranges drawn at start and after every reset, from ``seed``.
    :meth:`run` opens the renderer on the calling thread and hands frames to ``deliver``.
    """

    def __init__(self, stepper: Stepper, cameras: Sequence[CameraSpec], rate: float,
                 appearance: AppearanceRanges | None = None, seed: int = 0) -> None:
        if not cameras:
            raise ValueError('a camera loop needs at least one camera')
        self.stepper, self.cameras, self.rate = stepper, tuple(cameras), rate
        self.appearance = appearance
        self.rng = np.random.default_rng([seed, 2])   # never shifts the physics' draws
        self._stats = RenderStats(window_wall=time.monotonic())
        self._stats_lock = threading.Lock()
        self.ready = threading.Event()   # set once the renderer is open
        self.intrinsics: dict[str, Intrinsics] = {}
        self._due = math.inf   # sim s of the next frame; written with the stepper's lock

    def run(self, running: threading.Event, deliver: Deliver) -> None:
        """Render until ``running`` clears; raises :class:`~simops_sim.rgbd.RenderError`."""
        renderer = RgbdRenderer(self.stepper.world.model, self.cameras, self.appearance)
        try:
            self.intrinsics = dict(renderer.intrinsics)
            renderer.randomize(self.rng)
            self.ready.set()
            with self.stepper.followed_by(self._next_due):
                self._loop(renderer, running, deliver)
        finally:
            renderer.close()

    def _next_due(self) -> float:
        """Sim s of the next frame (inf before the first look); the stepper's lock is held."""
        return self._due

    def _loop(self, renderer: RgbdRenderer, running: threading.Event,
              deliver: Deliver) -> None:
        period = 1.0 / self.rate
        stepper = self.stepper
        last = -math.inf
        while running.is_set():
            with stepper.lock:
                now = stepper.world.time
                reset = now < last   # sim time went back: the world was reset
                if reset or last == -math.inf:
                    self._due = now
                last = now
                if now + 1e-9 < self._due:
                    state = None
                else:
                    state = snapshot(stepper.world.data)
                    stamp = stepper.stamp_at(state.time)
                    behind = math.floor((state.time - self._due) / period + 1e-9)
                    self._due += (behind + 1) * period
            if reset:   # outside the lock: uploading textures takes milliseconds
                renderer.randomize(self.rng)
            if state is None:
                time.sleep(POLL)
                continue
            started = time.perf_counter()
            images = renderer.render(state)
            spent = time.perf_counter() - started
            deliver(images, stamp)
            with self._stats_lock:
                s = self._stats
                s.frames += 1
                s.skipped += behind
                s.render_wall += spent
                s.render_wall_max = max(s.render_wall_max, spent)

    def report(self) -> dict[str, float | int]:
        """The window since the last report, then start a new window.

        Achieved rate (frames per wall s), render ms per frame of all cameras (mean, max),
        skipped frames.
        """
        with self._stats_lock:
            s, now = self._stats, time.monotonic()
            self._stats = RenderStats(window_wall=now)
        wall = max(now - s.window_wall, 1e-9)
        return {'camera_rate_hz': s.frames / wall,
                'render_ms_mean': 1e3 * s.render_wall / max(s.frames, 1),
                'render_ms_max': 1e3 * s.render_wall_max,
                'camera_frames_skipped': s.skipped,
                'cameras': len(self.cameras)}
