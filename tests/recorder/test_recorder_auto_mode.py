"""Auto mode's debounce: a flickering policy state keeps one episode; a real stop closes it."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from recorder_helpers import episodes, output, start_publisher, start_recorder
from ros_helpers import RosProbe, wait_until
from std_msgs.msg import String

from simops_recorder.auto_mode import Action, AutoEpisodes


def test_flicker_keeps_one_episode_and_a_real_stop_closes_it() -> None:
    gate = AutoEpisodes(grace=1.0, min_duration=2.0)
    assert gate.state(0.0, True) is Action.START
    actions = [gate.state(0.1 + 0.2 * k, k % 2 == 1) for k in range(40)]   # 8 s of flips
    assert Action.START not in actions and Action.STOP not in actions
    assert gate.state(8.2, False) is Action.NONE
    assert gate.poll(9.1) is Action.NONE                  # within the grace
    assert gate.poll(9.2) is Action.STOP


def test_minimum_length_holds_a_short_episode_open() -> None:
    gate = AutoEpisodes(grace=0.1, min_duration=2.0)
    assert gate.state(0.0, True) is Action.START
    assert gate.state(0.5, False) is Action.NONE
    assert gate.poll(1.9) is Action.NONE
    assert gate.poll(2.0) is Action.STOP
    assert gate.poll(3.0) is Action.NONE                  # stops once


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 0.5), st.booleans()), max_size=200),
       st.floats(0.0, 2.0), st.floats(0.0, 5.0))
def test_episodes_never_shorter_than_the_minimum_nor_closed_while_running(
        flips: list[tuple[float, bool]], grace: float, minimum: float) -> None:
    gate = AutoEpisodes(grace=grace, min_duration=minimum)
    now, opened, running = 0.0, None, False
    for gap, state in flips:
        for tick in (now + gap / 2, now + gap):
            if gate.poll(tick) is Action.STOP:
                assert opened is not None and not running and tick - opened >= minimum
                opened = None
        now += gap
        action = gate.state(now, state)
        running = state
        if action is Action.START:
            assert opened is None and state
            opened = now
        elif action is Action.STOP:
            assert opened is not None and not state and now - opened >= minimum
            opened = None
    assert (opened is not None) == gate.recording


def test_recorder_auto_mode_debounces_a_flickering_policy(ros_probe: RosProbe,
                                                          tmp_path: Path) -> None:
    """Issue #12: intermittently bad joint states flipped the policy between HOLD and
    RUNNING, and auto mode opened 40 episodes in 8 s."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    root = tmp_path / 'episodes'
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    state = ros_probe.publisher('/policy/state', String, latched)
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=auto') as rec, \
            start_publisher(tmp_path / 'pub.log', '--duration', '12',
                            '--joint-states-only') as pub:
        assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
        assert wait_until(lambda: state.get_subscription_count() > 0, 10)
        for k in range(40):
            state.publish(String(data='RUNNING' if k % 2 == 0 else 'HOLD'))
            time.sleep(0.2)
        state.publish(String(data='HOLD'))
        assert wait_until(lambda: 'episode stopped' in output(rec), 10), output(rec)
        assert rec.stop() == 0
    assert output(rec).count('episode started') == 1, output(rec)
    assert len(episodes(root)) == 1
