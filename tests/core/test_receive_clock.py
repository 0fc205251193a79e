"""When recorded commands took effect on the arm, from receive times and joint-state stamps."""

from __future__ import annotations

import numpy as np

from simops_core.receive_clock import SAME_CLOCK, DeliveryScan, ReceiveClock, delivery_times

OFFSET = 1_700_000_000.0   # s from the arm's stamp clock to the recorder's receive clock


def test_steady_state_commands_take_effect_when_received_less_the_clock_offset() -> None:
    rng = np.random.default_rng(0)
    stamps = 0.001 * np.arange(1, 10_001)
    # Joint states reach the recorder 0.2 ms after their stamp at best, 3.2 ms at worst.
    received = stamps + OFFSET + 2e-4 + rng.uniform(0.0, 3e-3, stamps.size)
    clock = ReceiveClock(received, stamps)
    truth = rng.uniform(1.0, 9.0, 500)   # when the arm received each command
    estimate = clock(truth + OFFSET + 2e-4)
    assert np.abs(estimate - truth).max() < 1e-6
    assert not clock.arm_late(truth + OFFSET + 2e-4).any()   # jitter is not a late arm


def test_commands_during_a_stall_take_effect_when_the_arm_catches_up() -> None:
    stamps = 0.001 * np.arange(1, 2001)
    received = stamps + OFFSET + 3e-4
    stalled = (stamps > 1.0) & (stamps <= 1.030)   # the arm published nothing for 30 ms,
    received[stalled] = 1.030 + OFFSET + 3e-4 + 1e-5 * np.arange(stalled.sum())  # then a burst
    clock = ReceiveClock(received, stamps)
    during = clock(np.array([1.010, 1.020, 1.029]) + OFFSET + 3e-4)
    # Taken into the first step after the last state it published (1.000 s), not 10-29 ms on.
    assert np.all(np.abs(during - 1.0005) < 2e-3), during
    after = clock(np.array([1.5]) + OFFSET + 3e-4)
    assert abs(after[0] - 1.5) < 1e-6
    # When the arm took those, the recording cannot tell (somewhere in its catch-up).
    late = clock.arm_late(np.array([0.5, 1.010, 1.020, 1.029, 1.5]) + OFFSET + 3e-4)
    assert late.tolist() == [False, True, True, True, False]


def test_commands_inside_a_gap_of_lost_joint_states_take_effect_as_received() -> None:
    # A real arm's log drops samples (Gaz et al.'s Panda recording: gaps of up to 8.8 ms), but
    # the state after the gap arrives on time: the arm did not run late, and a 1 kHz stream
    # received inside the gap took effect as received, in order.
    stamps = 0.001 * np.arange(1, 2001)
    kept = (stamps <= 1.0) | (stamps > 1.009)   # 9 ms of states never recorded
    stamps = stamps[kept]
    clock = ReceiveClock(stamps + OFFSET + 3e-4, stamps)
    commands = 0.9905 + 0.001 * np.arange(20)
    effect = clock(commands + OFFSET + 3e-4)
    assert np.abs(effect - commands).max() < 1e-6
    assert not clock.arm_late(commands + OFFSET + 3e-4).any()


def test_effect_times_never_run_backwards() -> None:
    stamps = 0.001 * np.arange(1, 2001)
    received = stamps + OFFSET + 3e-4
    stalled = (stamps > 1.0) & (stamps <= 1.030)
    received[stalled] = 1.030 + OFFSET + 3e-4 + 1e-5 * np.arange(stalled.sum())
    clock = ReceiveClock(received, stamps)
    commands = np.sort(np.random.default_rng(1).uniform(0.99, 1.04, 200)) + OFFSET + 3e-4
    assert np.all(np.diff(clock(commands)) >= 0.0)


def test_a_starved_recorder_is_taken_out_where_the_bag_holds_send_times() -> None:
    """Messages sent every 1 ms on the publisher's clock, delivered in 0.2-0.5 ms; the
    recorder stalls 40 ms and takes the backlog in a burst. With send times every message
    is back at its send time plus the fastest delivery, on the recorder's clock."""
    rng = np.random.default_rng(1)
    sent = 10**9 * 1000 + 10**6 * np.arange(2000, dtype=np.int64)   # the publisher's clock
    skew = 37_000_000_123                                           # ns, recorder - publisher
    received = sent + skew + rng.integers(200_000, 500_000, sent.size)
    stalled = (sent >= sent[500]) & (sent < sent[540])
    received[stalled] = received[540] + 1_000 * np.arange(stalled.sum()) - 40_000
    got = delivery_times(received, sent)
    fastest = (received - sent).min()
    assert np.array_equal(got, (sent + fastest) * 1e-9)
    assert np.abs(np.diff(got) - 1e-3).max() < 1e-9    # the burst is gone
    assert abs(got[0] - (sent[0] + skew + 200_000) * 1e-9) < 1e-6


def test_without_send_times_the_receive_times_are_all_there_is() -> None:
    received = 10**6 * np.arange(1, 101, dtype=np.int64) + 10**18
    assert np.array_equal(delivery_times(received, received), received * 1e-9)   # Humble
    assert np.array_equal(delivery_times(received, np.zeros_like(received)), received * 1e-9)
    assert delivery_times([], []).shape == (0,)
    # received on another clock (--use-sim-time): deliveries spread over more than a second
    drifting = received - 10**18 + np.round(np.linspace(0, (SAME_CLOCK + 0.5) * 1e9,
                                                         received.size)).astype(np.int64)
    assert np.array_equal(delivery_times(received, drifting), received * 1e-9)


def test_a_scan_a_message_at_a_time_gives_the_rule_of_the_whole_topic() -> None:
    """The dataset export scans a bag too long to hold one message at a time."""
    rng = np.random.default_rng(2)
    sent = 10**18 + 10**6 * np.arange(500, dtype=np.int64)
    cases = {'send times': (sent + rng.integers(200_000, 900_000, sent.size), sent),
             'Humble': (sent, sent),
             'one without': (sent + 300_000, np.where(np.arange(sent.size) == 7, 0, sent)),
             'two clocks': (sent, sent - np.arange(sent.size, dtype=np.int64) * 10**7)}
    for name, (received, sending) in cases.items():
        scan = DeliveryScan()
        for r, s in zip(received.tolist(), sending.tolist(), strict=True):
            scan.add(r, s)
        delivery = scan.delivery()
        got = np.array([delivery.time(r, s) for r, s in zip(received, sending, strict=True)])
        assert np.array_equal(got, delivery_times(received, sending)), name
        assert np.array_equal(delivery.times(received, sending), got), name
