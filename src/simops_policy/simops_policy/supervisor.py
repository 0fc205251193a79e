"""The policy node's modes and their transitions (pure Python, no ROS here).

=========  ==========================================================  ===================
mode       meaning                                                     commands
=========  ==========================================================  ===================
DISABLED   not enabled (``start_enabled`` false, or ``~/enable`` off)  none
RAMPING    blending the policy in from the anchor over ``ramp_time``   policy, blended
RUNNING    the policy drives the arm                                   policy
HOLD       inputs not ready or stale, a non-finite action, or latched  last target again
           after an e-stop release until ``~/enable``
ESTOP      the e-stop is active                                        last target again
FAULT      latched: out-of-domain state, failed inference, start       last target again
           outside the limits; cleared by ``~/enable``
=========  ==========================================================  ===================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Mode(enum.Enum):
    """Node modes, published by name on ``~/state``."""

    DISABLED = 'DISABLED'
    RAMPING = 'RAMPING'
    RUNNING = 'RUNNING'
    HOLD = 'HOLD'
    ESTOP = 'ESTOP'
    FAULT = 'FAULT'


@dataclass(frozen=True)
class Decision:
    """What one control tick does.

    ``run``: run the policy (else publish the hold target, if any, or nothing when
    ``publish`` is false); ``restart``: re-anchor the ramp and reset the observation history
    first; ``blend`` in [0, 1]: how far the ramp has blended in.
    """

    run: bool
    publish: bool
    restart: bool = False
    blend: float = 1.0


class Supervisor:
    """Mode machine of the policy node. Times are seconds on one monotonic clock."""

    def __init__(self, start_enabled: bool, ramp_time: float) -> None:
        self.ramp_time = ramp_time
        self.mode = Mode.DISABLED
        self.reason = 'starting' if start_enabled else 'waiting for ~/enable'
        self._armed = start_enabled
        self._latched: Mode | None = None
        self._estop = False
        self._needs_ramp = True
        self._ramp_start = 0.0

    @property
    def estop(self) -> bool:
        """Whether the e-stop is active."""
        return self._estop

    def set_estop(self, active: bool) -> None:
        """Follow the e-stop input; its release latches HOLD until :meth:`enable`."""
        if self._estop and not active and self._armed:
            self._latch(Mode.HOLD, 'e-stop released; call ~/enable to resume')
        self._estop = active

    def enable(self, on: bool) -> tuple[bool, str]:
        """``~/enable``: arm or disarm; refused while the e-stop is active."""
        if on and self._estop:
            return False, 'e-stop is active; release it first'
        self._armed = on
        self._latched = None
        self._needs_ramp = True
        if not on:
            self.mode, self.reason = Mode.DISABLED, 'disabled by ~/enable'
            return True, 'disabled: no more commands'
        return True, f'enabled: ramping in over {self.ramp_time:g} s once inputs are ready'

    def fault(self, reason: str) -> None:
        """Latch FAULT (hold) until :meth:`enable`."""
        self._latch(Mode.FAULT, reason)

    def hold_once(self, reason: str) -> None:
        """This tick held (e.g. a non-finite action); the next tick may run again."""
        self.mode, self.reason = Mode.HOLD, reason

    def tick(self, now: float, ready: bool, not_ready: str, has_target: bool) -> Decision:
        """Decide this tick; ``ready``: fresh joint state and every input the card uses."""
        held = Decision(run=False, publish=has_target)
        if self._estop:
            self.mode, self.reason = Mode.ESTOP, 'e-stop active'
            self._needs_ramp = True
            return held
        if self._latched is not None:
            self.mode = self._latched
            return held
        if not self._armed:
            self.mode = Mode.DISABLED
            return Decision(run=False, publish=False)
        if not ready:
            self.mode, self.reason = Mode.HOLD, not_ready
            self._needs_ramp = True
            return held
        restart = self._needs_ramp
        if restart:
            self._needs_ramp = False
            self._ramp_start = now
        elapsed = now - self._ramp_start
        blend = 1.0 if self.ramp_time <= 0 else min(elapsed / self.ramp_time, 1.0)
        self.mode = Mode.RUNNING if blend >= 1.0 else Mode.RAMPING
        self.reason = 'policy running' if blend >= 1.0 else f'ramping in ({blend:.0%})'
        return Decision(run=True, publish=True, restart=restart, blend=blend)

    def _latch(self, mode: Mode, reason: str) -> None:
        self._latched = mode
        self.mode, self.reason = mode, reason
        self._needs_ramp = True
