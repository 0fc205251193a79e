"""Keys of a terminal keyboard as a TCP twist, in the style of teleop_twist_keyboard (no rclpy).

One key per direction of the six degrees of freedom, held to move (a terminal repeats a
held key after about half a second, then some 30 times a second):

====  ==================  ====  ==================
key   twist               key   twist
====  ==================  ====  ==================
w s   linear +x / -x      u o   angular +x / -x (roll)
a d   linear +y / -y      i k   angular +y / -y (pitch)
r f   linear +z / -z      j l   angular +z / -z (yaw)
====  ==================  ====  ==================

``space`` stops; ``+`` and ``-`` scale the speed by 1.25 (within (0, 1] of the teleop
node's caps); ``t`` toggles the frame between the robot's base and the TCP; ``e`` enables
the teleop node, ``x`` disables it; ``g`` closes the hand, ``h`` opens it; ``q`` (or Ctrl-C)
quits. Recording demonstrations, as
lerobot-record's keys do through the recorder's services: ``[`` starts an episode, ``]``
stops (keeps) it, ``y`` and ``n`` mark it a success or a failure, backspace discards it.
A direction lasts :data:`KEY_TIMEOUT` after its key was last seen (teleop_twist_keyboard's
``key_timeout``), long enough to bridge the terminal's repeat delay, short enough that a
released key stops the arm within a blink; the teleop node then brakes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KEY_TIMEOUT = 0.6    # s a direction lasts after its key was last seen
SPEED_STEP = 1.25    # factor of + and -
DEFAULT_SPEED = 0.25   # fraction of the teleop node's speed caps
# key -> (twist component, sign): linear x, y, z then angular x, y, z
DIRECTIONS = {'w': (0, 1.0), 's': (0, -1.0), 'a': (1, 1.0), 'd': (1, -1.0),
              'r': (2, 1.0), 'f': (2, -1.0), 'u': (3, 1.0), 'o': (3, -1.0),
              'i': (4, 1.0), 'k': (4, -1.0), 'j': (5, 1.0), 'l': (5, -1.0)}
COMMANDS = {' ': 'stop', '+': 'faster', '-': 'slower', 't': 'frame', 'e': 'enable',
            'x': 'disable', 'q': 'quit', '\x03': 'quit', '[': 'record', ']': 'keep',
            'y': 'success', 'n': 'failure', '\x7f': 'discard', 'g': 'close', 'h': 'open'}
RECORDING = ('record', 'keep', 'success', 'failure', 'discard')   # the recorder's commands
HELP = ('keys: w/s a/d r/f move x y z, u/o i/k j/l turn about x y z, space stops, +/- speed, '
        't base/TCP frame, e enable, x disable, g close hand, h open hand, [ record, ] keep, '
        'y success, n failure, backspace discard, q quit')


@dataclass
class KeyboardTwist:
    """The twist the keys ask for; ``caps`` (linear m/s, angular rad/s) at full speed."""

    caps: tuple[float, float]
    speed: float = DEFAULT_SPEED
    in_tcp: bool = False
    _direction: tuple[int, float] | None = None
    _seen: float = -np.inf

    def press(self, key: str, now: float) -> str | None:
        """Take ``key`` pressed at ``now`` (s); return its command (``COMMANDS``), if any."""
        if key in DIRECTIONS:
            self._direction, self._seen = DIRECTIONS[key], now
            return None
        command = COMMANDS.get(key)
        if command == 'stop':
            self._direction = None
        elif command == 'faster':
            self.speed = min(1.0, self.speed * SPEED_STEP)
        elif command == 'slower':
            self.speed = max(1e-3, self.speed / SPEED_STEP)
        elif command == 'frame':
            self.in_tcp = not self.in_tcp
        return command

    def twist(self, now: float) -> np.ndarray:
        """The twist (6,) m/s and rad/s at ``now`` (s): the held direction, else zeros."""
        out = np.zeros(6)
        if self._direction is not None and now - self._seen <= KEY_TIMEOUT:
            component, sign = self._direction
            out[component] = sign * self.speed * self.caps[component >= 3]
        return out
