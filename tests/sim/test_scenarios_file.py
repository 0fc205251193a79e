"""The gate's adversarial scenarios: config/scenarios.yaml, checked field by field, and their
control ticks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simops_core.motion_supervisor import Mode, MotionSupervisor
from simops_sim.scenarios import (
    EVENTS,
    Scenario,
    ScenarioError,
    ScenarioRun,
    load_scenarios,
    scenario,
)


def test_the_shipped_scenarios_cover_every_event_for_a_task() -> None:
    shipped = load_scenarios()
    assert {s.event for s in shipped.values()} == set(EVENTS)
    assert {s.name for s in shipped.values() if 'pick_place' in s.tasks} == set(shipped)
    with pytest.raises(ScenarioError, match="'push_cube' is not for the reach task"):
        scenario('push_cube', 'reach')
    with pytest.raises(ScenarioError, match="has no scenario 'earthquake'"):
        scenario('earthquake')


@pytest.mark.parametrize(('text', 'field'), [
    ('version: 2\nscenarios: {}', 'version'),
    ('version: 1\nscenarios: {a: {event: flood, at: 1, tasks: [reach]}}', "'scenarios.a.event'"),
    ('version: 1\nscenarios: {a: {event: goal_moved, tasks: [reach]}}', "'scenarios.a.at'"),
    ('version: 1\nscenarios: {a: {event: goal_moved, at: -1, tasks: [reach]}}',
     "'scenarios.a.at'"),
    ('version: 1\nscenarios: {a: {event: goal_moved, at: 1, tasks: [fly]}}',
     "'scenarios.a.tasks'"),
    ('version: 1\nscenarios: {a: {event: goal_moved, at: 1}}', "'scenarios.a.tasks'"),
    ('version: 1\nscenarios: {a: {event: goal_moved, at: 1, duration: 2, tasks: [reach]}}',
     "'scenarios.a.duration' means nothing to a goal_moved event"),
    ('version: 1\nscenarios: {a: {event: push, at: 1, duration: 0.1, body: flange, '
     'tasks: [reach]}}', "'scenarios.a.force' is missing"),
    ('version: 1\nscenarios: {a: {event: push, at: 1, duration: 0.1, force: 2, body: hand, '
     'tasks: [reach]}}', "'scenarios.a.body'"),
    ('version: 1\nscenarios: {a: {event: push, at: 1, duration: 0.1, force: 2, body: object, '
     'tasks: [reach]}}', "'scenarios.a.tasks' lists reach, which has no object"),
    ('version: 1\nscenarios: {a: {event: stale_joint_states, at: 1, duration: 0, '
     'tasks: [reach]}}', "'scenarios.a.duration' must be > 0"),
    ('version: 1\nscenarios: {a: {event: estop, at: 1, duration: 1, tasks: [reach]}}',
     "'scenarios.a.enable_after' is missing"),
    ('version: 1\nscenarios: {a: {event: estop, at: 1, duration: 1, enable_after: 0, '
     'tasks: [reach], when: 2}}', "'scenarios.a.when' is not a known field"),
])
def test_a_bad_scenarios_file_gets_one_line(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / 'scenarios.yaml'
    path.write_text(text)
    with pytest.raises(ScenarioError, match=field) as caught:
        load_scenarios(path)
    assert '\n' not in str(caught.value)


def test_times_round_up_to_control_ticks() -> None:
    """Tick k is k periods after the start; an event lasts at least one tick."""
    ticks = Scenario('s', 'estop', at=1.0, tasks=('reach',), duration=0.52,
                     enable_after=0.0).ticks(0.05)
    assert (ticks.start, ticks.end, ticks.enable) == (20, 31, 31)
    assert Scenario('g', 'goal_moved', at=0.01, tasks=('reach',)).ticks(0.05).start == 1
    brief = Scenario('p', 'push', at=0.3, tasks=('reach',), duration=0.001, force=1.0)
    assert brief.ticks(0.05).start == 6 and brief.ticks(0.05).end == 7


def test_a_push_is_horizontal_drawn_per_episode_and_ends() -> None:
    push = scenario('push_arm')
    run = ScenarioRun(push, 0.05, np.random.default_rng(1))
    force = run.push_force(run.ticks.start)
    assert force[2] == 0.0 and np.linalg.norm(force) == pytest.approx(push.force)
    assert not np.allclose(ScenarioRun(push, 0.05, np.random.default_rng(2)).force, force)
    assert np.all(run.push_force(run.ticks.end) == 0.0)
    assert ScenarioRun(scenario('goal_moved'), 0.05).push_force(0) is None


def test_the_estop_drives_the_nodes_mode_machine() -> None:
    """Pressed: ESTOP; released: HOLD, latched; ~/enable: the ramp starts again."""
    run = ScenarioRun(scenario('estop'), 0.05)
    supervisor = MotionSupervisor(start_enabled=True, ramp_time=0.5)
    modes = []
    for tick in range(run.ticks.enable + 2):
        run.drive(supervisor, tick)
        decision = supervisor.tick(tick * 0.05, True, '', True)
        modes.append((supervisor.mode, decision.restart))
    start, end, enable = run.ticks.start, run.ticks.end, run.ticks.enable
    assert modes[start - 1][0] in (Mode.RAMPING, Mode.RUNNING)
    assert {m for m, _ in modes[start:end]} == {Mode.ESTOP}
    assert {m for m, _ in modes[end:enable]} == {Mode.HOLD}
    assert modes[enable] == (Mode.RAMPING, True)
