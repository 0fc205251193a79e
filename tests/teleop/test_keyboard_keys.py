"""The terminal keys' twist: one key per direction, held to move, released to stop."""

from __future__ import annotations

import numpy as np
import pytest

from simops_teleop.keyboard_keys import DEFAULT_SPEED, DIRECTIONS, KEY_TIMEOUT, KeyboardTwist

CAPS = (0.2, 0.8)   # m/s, rad/s


@pytest.mark.parametrize('key', sorted(DIRECTIONS))
def test_each_key_moves_one_degree_of_freedom_at_the_speed_times_its_cap(key: str) -> None:
    keys = KeyboardTwist(CAPS)
    assert keys.press(key, 10.0) is None
    twist = keys.twist(10.0)
    component, sign = DIRECTIONS[key]
    expected = np.zeros(6)
    expected[component] = sign * DEFAULT_SPEED * (CAPS[1] if component >= 3 else CAPS[0])
    np.testing.assert_array_equal(twist, expected)


def test_a_released_key_stops_after_the_timeout_and_space_at_once() -> None:
    keys = KeyboardTwist(CAPS)
    keys.press('w', 0.0)
    assert keys.twist(KEY_TIMEOUT)[0] > 0              # the terminal's repeat delay bridged
    assert not keys.twist(KEY_TIMEOUT + 1e-3).any()    # released: zero
    keys.press('w', 1.0)
    assert keys.press(' ', 1.1) == 'stop' and not keys.twist(1.1).any()
    assert keys.press('?', 1.2) is None and not keys.twist(1.2).any()   # other keys: nothing


def test_speed_and_frame_commands() -> None:
    keys = KeyboardTwist(CAPS)
    for _ in range(20):
        assert keys.press('+', 0.0) == 'faster'
    assert keys.speed == 1.0                           # never beyond the caps
    keys.press('w', 0.0)
    assert keys.twist(0.0)[0] == pytest.approx(CAPS[0])
    for _ in range(100):
        keys.press('-', 0.0)
    assert 0 < keys.speed < 0.01
    assert keys.press('t', 0.0) == 'frame' and keys.in_tcp
    assert keys.press('t', 0.0) == 'frame' and not keys.in_tcp
    assert [keys.press(k, 0.0) for k in 'exq\x03'] == ['enable', 'disable', 'quit', 'quit']
    assert [keys.press(k, 0.0) for k in '[]yn\x7f'] == ['record', 'keep', 'success', 'failure',
                                                        'discard']   # lerobot-record's keys
    assert [keys.press(k, 0.0) for k in 'gh'] == ['close', 'open']
