"""When ``mode:=auto`` opens and closes episodes: the policy state, debounced (pure Python).

An episode opens when the policy reports RUNNING. It closes only once the policy has been
out of RUNNING for ``grace`` s without a break, and never before the episode is
``min_duration`` s long: a policy that flickers between HOLD and RUNNING (intermittently bad
joint states) keeps one episode open instead of opening one per flip. Times are seconds on
one monotonic clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Action(enum.Enum):
    """What the recorder should do now."""

    NONE = 'none'
    START = 'start'
    STOP = 'stop'


@dataclass
class AutoEpisodes:
    """The debounce; feed it :meth:`state` on each policy state and :meth:`poll` on a timer."""

    grace: float
    min_duration: float
    running: bool = False
    recording: bool = False
    _opened: float = 0.0
    _left: float | None = None   # when the policy last left RUNNING (None: it is RUNNING)

    def state(self, now: float, running: bool) -> Action:
        """The policy's state changed (or was repeated) at ``now``."""
        self.running = running
        if running:
            self._left = None
            if not self.recording:
                self.recording, self._opened = True, now
                return Action.START
            return Action.NONE
        if self._left is None:
            self._left = now
        return self.poll(now)

    def poll(self, now: float) -> Action:
        """Close the episode once the grace period and the minimum length have passed."""
        if not self.recording or self.running or self._left is None:
            return Action.NONE
        if now - self._left >= self.grace and now - self._opened >= self.min_duration:
            self.recording = False
            return Action.STOP
        return Action.NONE

    def closed(self) -> None:
        """The episode was closed by other means (``~/stop``, a write error)."""
        self.recording = False
