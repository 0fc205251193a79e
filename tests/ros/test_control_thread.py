"""The control thread's deadlines on sim time: one tick per period of the simulator's clock,
read from the newest joint state's stamp."""

from __future__ import annotations

import itertools
import math
import threading
import time

import pytest
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from simops_ros.control_thread import SIM_CATCH_UP, SIM_FALLBACK, SimDeadlines, run_periodic
from simops_ros.polled import header_stamp


def test_deadlines_follow_a_clock_that_starts_stalls_jumps_and_goes_back() -> None:
    deadlines = SimDeadlines(0.05)
    assert deadlines.due(0.0) is None              # no /clock yet
    assert deadlines.due(3.000) == 0               # the first reading is due at once
    assert deadlines.due(3.049) is None
    assert deadlines.due(3.049) is None            # a stalled clock: nothing due
    assert deadlines.due(3.050) == 0
    # a simulator catching up: 3.10, 3.15 and 3.20 fall due, one per reading
    assert [deadlines.due(3.230) for _ in range(4)] == [0, 0, 0, None]
    assert deadlines.due(3.250) == 0
    assert deadlines.due(3.300 + (SIM_CATCH_UP + 1) * 0.05) == SIM_CATCH_UP + 1   # skipped
    assert deadlines.due(3.649) is None
    assert deadlines.due(3.650) == 0
    assert deadlines.due(0.5) == 0                 # a reset simulator: re-anchored there
    assert deadlines.due(0.549) is None
    assert deadlines.due(0.550) == 0


class SlowClock:
    """A sim clock at ``factor`` of the wall clock that stands still while ``paused``."""

    def __init__(self, factor: float) -> None:
        self.factor, self.paused = factor, False
        self.last, self._wall = 1.0, time.monotonic()   # s: the last reading

    def __call__(self) -> float:
        wall = time.monotonic()
        if not self.paused:
            self.last += self.factor * (wall - self._wall)
        self._wall = wall
        return self.last


@pytest.mark.parametrize('factor', [0.25, 4.0])
def test_ticks_come_per_period_of_sim_time(factor: float) -> None:
    """A simulator at a quarter of real time gets its 20 Hz in sim time, not the wall's; one
    four times faster, too, as far as the thread keeps up (whole missed periods are told)."""
    period, clock, running = 0.05, SlowClock(factor), threading.Event()
    ticks: list[tuple[float, bool]] = []
    missed: list[int] = []
    running.set()

    def tick(wake: float, paced: bool) -> None:
        ticks.append((clock.last, paced))   # the reading that made the tick due
        if sum(is_paced for _, is_paced in ticks) >= 8:
            running.clear()

    thread = threading.Thread(target=run_periodic, args=(
        period, running, tick, lambda: None, 1.0, missed.append, clock))
    thread.start()
    thread.join(timeout=20.0)
    assert not thread.is_alive()
    paced = [sim for sim, is_paced in ticks if is_paced]
    # the period of sim time each paced tick fell in, counted from the first
    windows = [math.floor((sim - paced[0]) / period + 1e-9) for sim in paced]
    steps = [b - a for a, b in itertools.pairwise(windows)]
    if factor < 1.0:   # every period of sim time, one paced tick (and unpaced ones between)
        assert steps == [1] * 7, (paced, windows)
    assert all(step >= 1 for step in steps), (paced, windows)
    assert sum(steps) == len(steps) + sum(missed), (windows, missed)


def test_a_paused_clock_gets_supervising_ticks_on_the_wall_clock() -> None:
    """A paused simulator: ticks keep coming, unpaced, every SIM_FALLBACK periods of wall
    time, so the node still notices stale inputs and reports; none is paced."""
    period, clock, running = 0.02, SlowClock(1.0), threading.Event()
    clock.paused = True
    ticks: list[tuple[float, bool]] = []
    running.set()
    thread = threading.Thread(target=run_periodic, args=(
        period, running, lambda wake, paced: ticks.append((wake, paced)), lambda: None, 1.0,
        lambda count: None, clock))
    thread.start()
    time.sleep(0.5)
    running.clear()
    thread.join(timeout=5.0)
    assert ticks[0][1], ticks                       # the first reading is due at once
    unpaced = [wake for wake, paced in ticks[1:] if not paced]
    assert len(unpaced) == len(ticks) - 1, ticks
    gaps = [b - a for a, b in itertools.pairwise(unpaced)]
    assert all(gap >= SIM_FALLBACK * period for gap in gaps), gaps
    assert len(unpaced) >= 5, ticks


@pytest.mark.parametrize('sec, nanosec', [(0, 0), (3, 50_000_000), (1_795_000_000, 999_999_999)])
def test_the_stamp_of_a_serialised_joint_state_is_read_without_decoding_it(
        sec: int, nanosec: int) -> None:
    """What paces the policy under use_sim_time: the newest joint state's header stamp."""
    msg = JointState(name=['a', 'b'], position=[1.0, 2.0])
    msg.header.stamp.sec, msg.header.stamp.nanosec = sec, nanosec
    msg.header.frame_id = 'base'
    assert header_stamp(serialize_message(msg)) == sec + 1e-9 * nanosec
    assert header_stamp(b'\x00\x01\x00\x00') == 0.0
