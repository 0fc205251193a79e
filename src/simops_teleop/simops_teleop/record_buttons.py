"""Joystick buttons that drive the recorder, as lerobot-record's keys do (no rclpy).

``record_buttons`` pairs an action with a ``/joy`` button index, e.g. ``record=7``:

- ``record``: start an episode (the recorder's ``~/start``);
- ``keep``: stop it and keep it (``~/stop``);
- ``discard``: stop it and move it aside (``~/discard``);
- ``success`` / ``failure``: label it (``~/episode_info``, ``{"success": true|false}``).

An action fires once per press (on the button's rising edge), as the keyboard front end's
keys do.
"""

from __future__ import annotations

from collections.abc import Sequence

from simops_core.command_line import ConfigError

SERVICES = {'record': 'start', 'keep': 'stop', 'discard': 'discard'}   # action -> service
LABELS = {'success': True, 'failure': False}                           # action -> success
ACTIONS = (*SERVICES, *LABELS)


def parse_record_buttons(pairs: Sequence[str], reserved: dict[str, int]) -> dict[int, str]:
    """``['record=7', ...]`` as button -> action; raise :class:`ConfigError` if malformed.

    ``reserved``: the other parameters' buttons (name -> index, -1 for none), which an
    action may not share.
    """
    out: dict[int, str] = {}
    for pair in pairs:
        action, sep, button = pair.partition('=')
        if not sep or action not in ACTIONS or not button.strip().isdigit():
            raise ConfigError(f'parameter record_buttons: {pair!r} must be ACTION=BUTTON with '
                              f'ACTION one of {", ".join(ACTIONS)} and BUTTON a /joy index')
        index = int(button)
        if action in out.values():
            raise ConfigError(f'parameter record_buttons: {action} is given twice')
        taken = [name for name, used in reserved.items() if used == index]
        if index in out or taken:
            other = out.get(index) or taken[0]
            raise ConfigError(f'parameter record_buttons: button {index} of {action} is '
                              f'{other}\'s already')
        out[index] = action
    return out


def presses(mapping: dict[int, str], before: Sequence[int], now: Sequence[int]) -> list[str]:
    """The actions whose button is pressed in ``now`` and was not in ``before``."""
    return [action for index, action in mapping.items()
            if index < len(now) and now[index] and not (index < len(before) and before[index])]
