"""The policy node's mode machine: e-stop latch, faults, readiness, ramp timing."""

from __future__ import annotations

import pytest

from simops_policy.supervisor import Mode, Supervisor


def test_starts_enabled_ramps_then_runs() -> None:
    sup = Supervisor(start_enabled=True, ramp_time=2.0)
    assert not sup.tick(0.0, False, 'waiting for /joint_states', has_target=False).publish
    assert sup.mode is Mode.HOLD and 'waiting' in sup.reason
    first = sup.tick(1.0, True, '', has_target=False)
    assert first.run and first.restart and first.blend == 0.0 and sup.mode is Mode.RAMPING
    half = sup.tick(2.0, True, '', has_target=True)
    assert not half.restart and half.blend == pytest.approx(0.5)
    assert sup.tick(3.0, True, '', has_target=True).blend == 1.0
    assert sup.mode is Mode.RUNNING


def test_disabled_until_enable() -> None:
    sup = Supervisor(start_enabled=False, ramp_time=0.0)
    decision = sup.tick(0.0, True, '', has_target=False)
    assert not decision.run and not decision.publish and sup.mode is Mode.DISABLED
    assert sup.enable(True)[0]
    assert sup.tick(0.1, True, '', has_target=False).run
    assert sup.mode is Mode.RUNNING                   # ramp_time 0: straight to RUNNING
    assert sup.enable(False)[0]
    assert not sup.tick(0.2, True, '', has_target=True).publish
    assert sup.mode is Mode.DISABLED


def test_estop_latches_until_enable_after_release() -> None:
    sup = Supervisor(start_enabled=True, ramp_time=0.0)
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
    sup = Supervisor(start_enabled=True, ramp_time=0.0)
    sup.tick(0.0, True, '', has_target=False)
    assert not sup.tick(0.1, False, 'stale', has_target=True).run and sup.mode is Mode.HOLD
    again = sup.tick(0.2, True, '', has_target=True)
    assert again.run and again.restart                # re-ramps after a hold
    sup.fault('inference failed')
    assert not sup.tick(0.3, True, '', has_target=True).run and sup.mode is Mode.FAULT
    assert sup.enable(True)[0]
    assert sup.tick(0.4, True, '', has_target=True).run
