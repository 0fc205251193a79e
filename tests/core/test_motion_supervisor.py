"""The mode machine of the policy node and excite: e-stop latch, faults, readiness, ramp, stop."""

from __future__ import annotations

import pytest

from simops_core.motion_supervisor import Mode, MotionSupervisor


def test_starts_enabled_ramps_then_runs() -> None:
    sup = MotionSupervisor(start_enabled=True, ramp_time=2.0)
    assert not sup.tick(0.0, False, 'waiting for /joint_states', has_target=False).publish
    assert sup.mode is Mode.HOLD and 'waiting' in sup.reason
    first = sup.tick(1.0, True, '', has_target=False)
    assert first.run and first.restart and first.blend == 0.0 and sup.mode is Mode.RAMPING
    half = sup.tick(2.0, True, '', has_target=True)
    assert not half.restart and half.blend == pytest.approx(0.5)
    assert sup.tick(3.0, True, '', has_target=True).blend == 1.0
    assert sup.mode is Mode.RUNNING


def test_disabled_until_enable() -> None:
    sup = MotionSupervisor(start_enabled=False, ramp_time=0.0)
    decision = sup.tick(0.0, True, '', has_target=False)
    assert not decision.run and not decision.publish and sup.mode is Mode.DISABLED
    assert sup.enable(True)[0]
    assert sup.tick(0.1, True, '', has_target=False).run
    assert sup.mode is Mode.RUNNING                   # ramp_time 0: straight to RUNNING
    assert sup.enable(False)[0]
    braking = sup.tick(0.2, True, '', has_target=True)
    assert braking.brake and braking.publish and not braking.run
    assert sup.mode is Mode.STOPPING
    sup.stopped()
    assert not sup.tick(0.3, True, '', has_target=True).publish
    assert sup.mode is Mode.DISABLED


def test_disabled_is_never_reported_while_a_braking_stop_may_still_command() -> None:
    """DISABLED means no command follows: a client waits for it, then resets the arm (the
    reach gate's stand-in episodes did so on the DISABLED that enable(False) set before
    the next tick braked, and a braking target after the reset tripped a protective stop)."""
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    assert sup.tick(0.0, True, '', has_target=False).run
    assert sup.enable(False)[0]
    assert sup.mode is Mode.STOPPING                  # read between the call and a tick
    tick, published = 0.1, []
    for _ in range(3):
        decision = sup.tick(tick, True, '', has_target=True)
        published.append((sup.mode, decision.publish))
        tick += 0.05
    assert published == [(Mode.STOPPING, True)] * 3
    sup.stopped()                                     # at rest: from here no command
    assert sup.mode is Mode.DISABLED
    assert not sup.tick(tick, True, '', has_target=True).publish


def test_disable_without_a_target_stops_at_once() -> None:
    sup = MotionSupervisor(start_enabled=False, ramp_time=0.0)
    assert sup.enable(False)[0]                       # never armed: nothing to brake
    assert sup.mode is Mode.DISABLED
    decision = sup.tick(0.0, True, '', has_target=True)
    assert not decision.publish and not decision.brake and sup.mode is Mode.DISABLED
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    assert sup.enable(False)[0]
    decision = sup.tick(0.0, True, '', has_target=False)   # armed, never commanded
    assert not decision.publish and sup.mode is Mode.DISABLED


def test_a_second_disable_while_braking_keeps_braking() -> None:
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    sup.tick(0.0, True, '', has_target=False)
    assert sup.enable(False)[0]
    assert sup.tick(0.1, True, '', has_target=True).brake
    assert sup.enable(False)[0]                       # e.g. a resent request: still moving
    braking = sup.tick(0.2, True, '', has_target=True)
    assert braking.brake and braking.publish and sup.mode is Mode.STOPPING
    sup.stopped()
    assert sup.enable(False)[0]                       # at rest: nothing left to brake
    assert not sup.tick(0.3, True, '', has_target=True).publish
    assert sup.mode is Mode.DISABLED


def test_estop_during_a_braking_stop_holds_and_latches() -> None:
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    sup.tick(0.0, True, '', has_target=False)
    sup.enable(False)
    assert sup.tick(0.1, True, '', has_target=True).brake
    sup.set_estop(True)
    held = sup.tick(0.2, True, '', has_target=True)
    assert not held.brake and not held.run and held.publish and sup.mode is Mode.ESTOP
    sup.set_estop(False)
    assert not sup.tick(0.3, True, '', has_target=True).run and sup.mode is Mode.HOLD
    assert sup.enable(False)[0]                       # the latched hold brakes out too
    assert sup.tick(0.4, True, '', has_target=True).brake


def test_estop_latches_until_enable_after_release() -> None:
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    sup.tick(0.0, True, '', has_target=False)
    sup.set_estop(True)
    held = sup.tick(0.1, True, '', has_target=True)
    assert not held.run and held.publish and sup.mode is Mode.ESTOP
    assert sup.enable(True) == (False, 'e-stop is active; release it first')
    sup.set_estop(False)
    assert not sup.tick(0.2, True, '', has_target=True).run
    assert sup.mode is Mode.HOLD and '~/enable' in sup.reason
    assert sup.enable(True)[0]
    resumed = sup.tick(0.3, True, '', has_target=True)
    assert resumed.run and resumed.restart


def test_fault_latches_and_stale_hold_does_not() -> None:
    sup = MotionSupervisor(start_enabled=True, ramp_time=0.0)
    sup.tick(0.0, True, '', has_target=False)
    assert not sup.tick(0.1, False, 'stale', has_target=True).run and sup.mode is Mode.HOLD
    again = sup.tick(0.2, True, '', has_target=True)
    assert again.run and again.restart                # re-ramps after a hold
    sup.fault('inference failed')
    assert not sup.tick(0.3, True, '', has_target=True).run and sup.mode is Mode.FAULT
    assert sup.enable(True)[0]
    assert sup.tick(0.4, True, '', has_target=True).run
