"""``simops-teleop-keyboard``: drive the teleop node from a terminal, no ROS distro needed.

    simops-teleop-keyboard [--node /teleop] [--recorder /recorder] [--robot fr3] [--rate 20]

Reads keys from the terminal (:mod:`simops_teleop.keyboard_keys` says which), publishes the
twist they ask for on ``<node>/delta_twist_cmds`` (geometry_msgs/TwistStamped, in the
robot's base frame or its TCP frame) at ``--rate`` Hz, faster than the teleop node's input
timeout, and calls ``<node>/enable`` (std_srvs/SetBool) for ``e`` and ``x`` and
``<node>/gripper`` for ``g`` (close) and ``h`` (open), and the
recorder's ``~/start``, ``~/stop`` and ``~/discard`` (std_srvs/Trigger) and
``~/episode_info`` (``{"success": true|false}``) for the recording keys. The speed caps
are the teleop node's defaults (``config/parameters/teleop.yaml``). It needs a terminal on
stdin; it restores the terminal and sends a zero twist when it ends.
"""

from __future__ import annotations

import json
import os
import select
import sys
import termios
import time
import tty
from typing import Any

import numpy as np

from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_OK,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_core.robot_spec import SpecError, load_robot_spec
from simops_teleop.keyboard_keys import HELP, RECORDING, KeyboardTwist

PROG = 'simops-teleop-keyboard'
EXIT_CODES = {EXIT_OK: 'quit with q or Ctrl-C (a zero twist was sent)',
              EXIT_CONFIG: 'bad command line or robot spec, or stdin is not a terminal'}
ENABLE_TIMEOUT = 5.0   # s to wait for a service's answer
RECORDER_SERVICES = {'record': 'start', 'keep': 'stop', 'discard': 'discard'}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, then read keys and publish twists until ``q``."""
    teleop = defaults(load_parameter_schema('teleop'))
    parser = CommandLineParser(PROG, 'Drive the teleop node from the terminal\'s keys: '
                               + HELP + '.', exit_codes(EXIT_CODES))
    parser.add_argument('--node', default='/teleop', help='the teleop node (default /teleop)')
    parser.add_argument('--recorder', default='/recorder',
                        help='the recorder the recording keys drive (default /recorder)')
    parser.add_argument('--robot', default='fr3', help='robot spec name or YAML, for its frames')
    parser.add_argument('--rate', type=float, default=20.0,
                        help='twists per second (default 20; the teleop node brakes after '
                             f'{teleop["input_timeout"]:g} s without one)')
    args = parser.parse_args(argv)
    if not 1.0 <= args.rate <= 1000.0:
        return fail(PROG, EXIT_CONFIG, f'--rate {args.rate:g} must be within 1-1000 Hz')
    try:
        spec = load_robot_spec(args.robot)
    except SpecError as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    if not sys.stdin.isatty():
        return fail(PROG, EXIT_CONFIG, 'stdin is not a terminal; run it in one (the keys '
                                       'are read from it)')
    keys = KeyboardTwist((float(teleop['linear_speed']), float(teleop['rotational_speed'])))
    frames = (spec.base_frame, f'{spec.name}_hand_tcp')
    from simops_ros.background import BackgroundNode

    probe = BackgroundNode('simops_teleop_keyboard')
    try:
        return _run(probe, keys, frames, args.node.rstrip('/'), args.recorder.rstrip('/'),
                    1.0 / args.rate)
    finally:
        probe.close()


def _run(probe: Any, keys: KeyboardTwist, frames: tuple[str, str], node: str, recorder: str,
         period: float) -> int:
    """Publish the keys' twist every ``period`` s until ``q``; the terminal in raw mode."""
    from std_msgs.msg import String
    from std_srvs.srv import SetBool, Trigger

    from simops_teleop.stamped_twist import TwistPublisher

    publish = TwistPublisher(probe.node, f'{node}/delta_twist_cmds', 10, frames[0])
    enable = probe.node.create_client(SetBool, f'{node}/enable')
    hand = probe.node.create_client(SetBool, f'{node}/gripper')
    services = {command: probe.node.create_client(Trigger, f'{recorder}/{name}')
                for command, name in RECORDER_SERVICES.items()}
    info = probe.node.create_publisher(String, f'{recorder}/episode_info', 10)
    print(f'{PROG}: {HELP}', flush=True)
    stdin = sys.stdin.fileno()
    saved = termios.tcgetattr(stdin)
    tty.setraw(stdin)   # every key at once, Ctrl-C as a key: the terminal is restored below
    try:
        deadline = time.monotonic()
        while True:
            deadline += period
            ready, _, _ = select.select([stdin], [], [], max(0.0, deadline - time.monotonic()))
            now = time.monotonic()
            if ready:
                for key in _read(stdin):
                    command = keys.press(key, now)
                    if command == 'quit':
                        return EXIT_OK
                    if command in ('enable', 'disable'):
                        _say(_call(enable, SetBool.Request(data=command == 'enable'), command))
                    elif command in ('close', 'open'):
                        _say(_call(hand, SetBool.Request(data=command == 'close'), command))
                    elif command in RECORDER_SERVICES:
                        _say(_call(services[command], Trigger.Request(), command))
                    elif command in RECORDING:   # success, failure: the episode's outcome
                        info.publish(String(data=json.dumps({'success': command == 'success'})))
                        _say(f'marked the episode a {command}')
                    elif command is not None:
                        _say(f'speed {keys.speed:.2f} of the caps, frame '
                             f'{frames[keys.in_tcp]}')
            publish(keys.twist(now), frames[keys.in_tcp])
            deadline = max(deadline, now - period)
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        publish(np.zeros(6), frames[keys.in_tcp])


def _read(stdin: int) -> str:
    return os.read(stdin, 64).decode(errors='replace')


def _call(client: Any, request: Any, command: str) -> str:
    """Call ``client``'s service with ``request`` for ``command``; its answer, in words."""
    if not client.wait_for_service(timeout_sec=ENABLE_TIMEOUT):
        return f'{command}: no answer from {client.srv_name}; is its node running?'
    future = client.call_async(request)
    end = time.monotonic() + ENABLE_TIMEOUT
    while not future.done() and time.monotonic() < end:
        time.sleep(0.01)
    if not future.done():
        return f'{command}: {client.srv_name} did not answer within {ENABLE_TIMEOUT:g} s'
    result = future.result()
    return f'{command}: {result.message or result.success}'


def _say(text: str) -> None:
    """One status line, in raw mode (which needs the carriage return)."""
    sys.stdout.write(f'{PROG}: {text}\r\n')
    sys.stdout.flush()


if __name__ == '__main__':
    sys.exit(main())
