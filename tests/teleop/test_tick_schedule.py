"""The teleop node's tick schedule: once a period, in step with a steady input stream."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simops_teleop.tick_schedule import WINDOW, TickLoop, TickSchedule

PERIOD = 0.01                 # s: the node's default 100 Hz
STALE = 0.1                   # s: the node's default input_timeout


def run(arrivals: np.ndarray, until: float, period: float = PERIOD,
        window: float = WINDOW * PERIOD) -> tuple[np.ndarray, np.ndarray]:
    """Tick times (s) and each input's wait for the tick that took it (s), in virtual time."""
    schedule = TickSchedule(period, window, STALE)
    ticks: list[float] = []
    waits = np.full(arrivals.size, np.nan)
    waiting: list[int] = []
    k, now = 0, 0.0
    while now < until:
        due = schedule.next_tick()
        if k < arrivals.size and arrivals[k] < due:
            now = float(arrivals[k])
            schedule.input(now)
            waiting.append(k)
            k += 1
            if not schedule.due(now):
                continue
        else:
            now = max(due, now)
        schedule.ticked(now)
        ticks.append(now)
        for i in waiting:
            waits[i] = now - arrivals[i]
        waiting.clear()
    return np.array(ticks), waits


def test_without_input_it_ticks_once_a_period() -> None:
    ticks, _ = run(np.empty(0), 1.0)
    assert np.allclose(np.diff(ticks), PERIOD)


def test_a_steady_50_hz_device_is_taken_as_each_input_arrives() -> None:
    """One tick as each input arrives, one halfway between: 100 Hz, with no wait at all."""
    arrivals = 0.0037 + 0.02 * np.arange(250)
    ticks, waits = run(arrivals, 5.0)
    assert np.all(waits[10:] < 1e-9)   # from the tenth on: the prediction needs eight
    gaps = np.diff(ticks[(ticks > 0.2) & (ticks <= arrivals[-1])])
    assert np.allclose(gaps, PERIOD)


def test_a_jittered_device_waits_at_most_its_jitter() -> None:
    """Inputs up to 1 ms early or late at random: each waits at most the 2 ms between two of
    them (a free-running 100 Hz timer keeps them up to 10 ms: moveit_servo's servoLoop)."""
    rng = np.random.default_rng(4)
    arrivals = 0.02 * np.arange(500) + rng.uniform(-0.001, 0.001, 500) + 0.005
    _, waits = run(arrivals, 10.0)
    assert np.nanmax(waits[10:]) <= 0.002 + 1e-12
    assert np.mean(waits[10:]) < 0.001


def test_a_stream_that_stops_lets_the_ticks_run_once_a_period_again() -> None:
    arrivals = 0.02 * np.arange(50) + 0.003
    ticks, _ = run(arrivals, 2.0)
    after = ticks[ticks > arrivals[-1] + 0.03]
    assert after.size > 50 and np.allclose(np.diff(after), PERIOD)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0005, 0.15), min_size=1, max_size=300),
       st.floats(0.002, 0.05), st.floats(0.0, 0.5))
def test_ticks_are_never_closer_than_a_period_nor_further_than_two_windows_more(
        gaps: list[float], period: float, window_share: float) -> None:
    """The safety pipeline's limits are per period: a target is never less than a period after
    the last; and the arm is never left more than ``period + 2 * window`` without one."""
    window = window_share * period
    arrivals = np.cumsum(gaps)
    ticks, waits = run(arrivals, float(arrivals[-1]) + 0.2, period, window)
    spacing = np.diff(ticks)
    assert spacing.min() >= period - 1e-12
    assert spacing.max() <= period + 2 * window + 1e-12
    assert np.nanmax(waits) <= period + 1e-12   # no input waits longer than a timer would


def test_each_tick_covers_the_time_since_the_last_within_its_bounds() -> None:
    schedule = TickSchedule(PERIOD, 0.25 * PERIOD, STALE)
    assert schedule.ticked(1.0) == PERIOD                        # the first
    assert schedule.ticked(1.012) == pytest.approx(0.012)        # a lengthened period
    assert schedule.ticked(1.05) == pytest.approx(0.015)         # at most period + 2 windows
    assert TickSchedule.for_commands(PERIOD, STALE, fixed_grid=True).window == 0.0
    assert TickSchedule.for_commands(PERIOD, STALE, fixed_grid=False).window == \
        WINDOW * PERIOD
    assert TickSchedule.for_commands(0.002, STALE, fixed_grid=False).window == 0.0   # 500 Hz


def test_a_late_wake_up_does_not_move_the_later_ticks() -> None:
    """Ticks are timed from when they fell due (a timer's rule): a thread 3 ms late keeps
    the next tick on the grid; a whole period late, and the first tick, start it anew."""
    schedule = TickSchedule(PERIOD, 0.25 * PERIOD, STALE)
    assert schedule.due_since(5.0) == 5.0                  # the first: now
    schedule.ticked(5.0)
    assert schedule.due_since(5.013) == pytest.approx(5.01)   # woke 3 ms late
    schedule.ticked(schedule.due_since(5.013))
    assert schedule.next_tick() == pytest.approx(5.02)
    schedule.input(5.0235)                                  # an input after the due time
    assert schedule.due_since(5.024) == pytest.approx(5.0235)
    schedule.ticked(schedule.due_since(5.024))
    assert schedule.due_since(5.05) == 5.05                 # 16.5 ms late: not made up
    grid = TickSchedule.for_commands(PERIOD, STALE, fixed_grid=True)
    grid.ticked(1.0)
    grid.input(1.0102)                                      # after its due time, woke late
    assert grid.due_since(1.0104) == pytest.approx(1.01)    # the grid's tick all the same


def test_the_loop_ticks_on_its_thread_and_reports_a_failing_tick() -> None:
    ticked, failed = threading.Event(), []
    count = 0

    def tick(covered: float) -> None:
        nonlocal count
        assert covered >= 0.001
        count += 1
        ticked.set()
        if count == 3:
            raise RuntimeError('boom')

    done = threading.Event()
    loop = TickLoop(TickSchedule(0.001, 0.0, STALE), tick,
                    lambda exc: (failed.append(exc), done.set()))
    loop.start()
    loop.input()
    assert done.wait(5.0) and count == 3 and isinstance(failed[0], RuntimeError)
    loop.stop()
    stopped = TickLoop(TickSchedule(10.0, 0.0, STALE), lambda _: None, failed.append)
    stopped.start()
    stopped.stop()   # wakes it from a 10 s wait
    assert not stopped._thread.is_alive()
