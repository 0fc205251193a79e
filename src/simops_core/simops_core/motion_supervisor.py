"""The modes of every node that can move an arm, and their transitions (pure Python, no ROS).

The policy node and ``excite`` share this machine, so both start, stop and latch the same way:

=========  ==========================================================  ===================
mode       meaning                                                     commands
=========  ==========================================================  ===================
DISABLED   not enabled (``start_enabled`` false, or ``~/enable`` off)  none
RAMPING    blending in from the anchor over ``ramp_time``              node's, blended
RUNNING    the node drives the arm                                     node's
STOPPING   ``~/enable`` off while moving: braking to rest within the   braking targets
           acceleration limit, then DISABLED
HOLD       inputs not ready or stale, a non-finite action, or latched  last target again
           after an e-stop release until ``~/enable``
ESTOP      the e-stop is active                                        last target again
FAULT      latched: out-of-domain state, failed inference, start       last target again
           outside the limits; cleared by ``~/enable``
=========  ==========================================================  ===================

DISABLED is reported only once no command will follow (a client waits for it before it
resets or moves the arm itself): ``~/enable`` off while a braking stop may still command
reads STOPPING from that moment. A node starts DISABLED and publishes nothing until
``~/enable`` is called (or, on a simulator only, ``start_enabled`` is true). The e-stop
holds at once, wins over every other input and latches HOLD on release; ``~/enable`` is
refused while it is active.
"""

from __future__ import annotations

import enum
from contextlib import AbstractContextManager
from dataclasses import dataclass

from simops_core.safety import SafetyLimits, SafetyState, brake, hold


class Mode(enum.Enum):
    """Node modes, published by name on ``~/state``."""

    DISABLED = 'DISABLED'
    RAMPING = 'RAMPING'
    RUNNING = 'RUNNING'
    STOPPING = 'STOPPING'
    HOLD = 'HOLD'
    ESTOP = 'ESTOP'
    FAULT = 'FAULT'


DISABLED_REASON = 'disabled by ~/enable'
STOPPING_REASON = f'{DISABLED_REASON}: braking to rest'


@dataclass(frozen=True)
class Decision:
    """What one control tick does.

    ``run``: compute and publish a new target (else publish the hold target, if any, or
    nothing when ``publish`` is false); ``brake``: publish the next braking target (see
    :func:`simops_core.safety.brake`) and call :meth:`MotionSupervisor.stopped` once at
    rest; ``restart``: re-anchor the ramp and reset the node's history first; ``blend`` in
    [0, 1]: how far the ramp has blended in.
    """

    run: bool
    publish: bool
    restart: bool = False
    blend: float = 1.0
    brake: bool = False


class MotionSupervisor:
    """Mode machine of a node that commands an arm. Times are seconds on one monotonic clock."""

    def __init__(self, start_enabled: bool, ramp_time: float) -> None:
        self.ramp_time = ramp_time
        self.mode = Mode.DISABLED
        self.reason = 'starting' if start_enabled else 'waiting for ~/enable'
        self._armed = start_enabled
        self._stopping = False
        self._latched: Mode | None = None
        self._estop = False
        self._needs_ramp = True
        self._ramp_start = 0.0

    @property
    def estop(self) -> bool:
        """Whether the e-stop is active."""
        return self._estop

    @property
    def armed(self) -> bool:
        """Whether ``~/enable`` (or ``start_enabled``) armed the node."""
        return self._armed

    def set_estop(self, active: bool) -> None:
        """Follow the e-stop input; its release latches HOLD until :meth:`enable`."""
        if self._estop and not active and (self._armed or self._stopping):
            self._armed, self._stopping = True, False
            self._latch(Mode.HOLD, 'e-stop released; call ~/enable to resume')
        self._estop = active

    def enable(self, on: bool) -> tuple[bool, str]:
        """``~/enable``: arm, or disarm with a braking stop; refused while the e-stop is on."""
        if on and self._estop:
            return False, 'e-stop is active; release it first'
        was_armed = self._armed
        self._armed = on
        self._latched = None
        self._needs_ramp = True
        if not on:   # a disable repeated while braking keeps braking
            self._stopping = self._stopping or was_armed
            # DISABLED says no command will follow: while a braking stop may, STOPPING
            self.mode, self.reason = ((Mode.STOPPING, STOPPING_REASON) if self._stopping
                                      else (Mode.DISABLED, DISABLED_REASON))
            return True, 'disabled: braking to rest, then no more commands'
        self._stopping = False
        return True, f'enabled: ramping in over {self.ramp_time:g} s once inputs are ready'

    def stopped(self) -> None:
        """The braking stop reached rest: no more commands until :meth:`enable`."""
        self._stopping = False
        self.mode, self.reason = Mode.DISABLED, DISABLED_REASON

    def fault(self, reason: str) -> None:
        """Latch FAULT (hold) until :meth:`enable`."""
        self._latch(Mode.FAULT, reason)

    def hold_once(self, reason: str) -> None:
        """This tick held (e.g. a non-finite action); the next tick may run again."""
        self.mode, self.reason = Mode.HOLD, reason

    def tick(self, now: float, ready: bool, not_ready: str, has_target: bool) -> Decision:
        """Decide this tick; ``ready``: fresh joint state and every input the node uses."""
        held = Decision(run=False, publish=has_target)
        if self._estop:
            self.mode, self.reason = Mode.ESTOP, 'e-stop active'
            self._needs_ramp = True
            return held
        if self._latched is not None:
            self.mode = self._latched
            return held
        if self._stopping and has_target:
            self.mode, self.reason = Mode.STOPPING, STOPPING_REASON
            return Decision(run=False, publish=True, brake=True)
        if not self._armed:
            self._stopping = False
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
        self.reason = 'running' if blend >= 1.0 else f'ramping in ({blend:.0%})'
        return Decision(run=True, publish=True, restart=restart, blend=blend)

    def _latch(self, mode: Mode, reason: str) -> None:
        self._latched = mode
        self.mode, self.reason = mode, reason
        self._needs_ramp = True


def stand_still(supervisor: MotionSupervisor, decision: Decision, state: SafetyState | None,
                limits: SafetyLimits, lock: AbstractContextManager[object]
                ) -> SafetyState | None:
    """Carry out a tick that does not run the node's own step (``decision.run`` false).

    Returns the state whose target to publish: the next braking target (calling
    :meth:`MotionSupervisor.stopped` under ``lock`` once at rest), the held target, or None
    (publish nothing) once DISABLED or before the first target.
    """
    if state is None:
        return None
    if decision.brake:
        state, rest = brake(state, limits)
        if rest:
            with lock:
                supervisor.stopped()
        return state
    if decision.publish:
        return hold(state)
    return None
