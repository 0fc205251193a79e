"""``simops-teleop-spacemouse``: a 3Dconnexion SpaceMouse on ``/spacenav/joy``, no ROS distro.

    simops-teleop-spacemouse [--topic /spacenav/joy] [--rate 50] [--device NAME]

Opens the first SpaceMouse pyspacemouse finds over HID (or ``--device``, one of its device
names) and publishes its state at ``--rate`` Hz as spacenav_node publishes it
(sensor_msgs/Joy: :mod:`simops_teleop.spacemouse_axes`), so the teleop node started with
``teleop:=spacemouse`` drives the arm from it: hold the left button (the dead-man) and push
the cap; the right button toggles the hand. With a ROS distro, ``spacenav_node`` does the
same through spacenavd.

It publishes steadily, faster than the teleop node's input timeout, so a device that stops
answering (unplugged, or its HID read fails) stops the stream and the teleop node brakes
within that timeout; the front end then sends released axes once and exits 1 with one line.
Opening a device needs the system's hidapi (Debian: ``apt install libhidapi-hidraw0``) and
read access to the device (a udev rule for ``/dev/hidraw*``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_DATA,
    EXIT_FAILED,
    EXIT_OK,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_teleop.spacemouse_axes import BUTTONS, SpaceMouseState, joy_fields

PROG = 'simops-teleop-spacemouse'
EXIT_NO_DEVICE = EXIT_DATA
EXIT_CODES = {EXIT_OK: 'Ctrl-C (released axes were sent)',
              EXIT_FAILED: 'the device stopped answering while running (released axes were '
                           'sent; the teleop node brakes on the silence)',
              EXIT_CONFIG: 'bad command line, or pyspacemouse or the system\'s hidapi is '
                           'missing',
              EXIT_NO_DEVICE: 'no SpaceMouse is connected (or it cannot be opened)'}
HIDAPI_HINT = ('the system\'s hidapi library is missing; install it (Debian: apt install '
               'libhidapi-hidraw0)')
Publish = Callable[[list[float], list[int]], None]
"""(axes (6,), buttons) -> None: one Joy message out."""


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, open the device and publish its state until Ctrl-C."""
    teleop = defaults(load_parameter_schema('teleop'))
    parser = CommandLineParser(PROG, 'Publish a 3Dconnexion SpaceMouse as spacenav_node does '
                               '(sensor_msgs/Joy), for the teleop node\'s teleop:=spacemouse.',
                               exit_codes(EXIT_CODES))
    parser.add_argument('--topic', default='/spacenav/joy',
                        help='the Joy topic (default /spacenav/joy, spacenav_node\'s)')
    parser.add_argument('--rate', type=float, default=50.0,
                        help='messages per second (default 50; the teleop node brakes after '
                             f'{teleop["input_timeout"]:g} s without one)')
    parser.add_argument('--device', help='a pyspacemouse device name (default: the first '
                                         'SpaceMouse found)')
    args = parser.parse_args(argv)
    if not 1.0 / float(teleop['input_timeout']) < args.rate <= 1000.0:
        return fail(PROG, EXIT_CONFIG, f'--rate {args.rate:g} must be above '
                    f'{1.0 / float(teleop["input_timeout"]):g} Hz (the teleop node\'s input '
                    'timeout) and at most 1000 Hz')
    try:
        import pyspacemouse
    except ImportError:
        return fail(PROG, EXIT_CONFIG, 'pyspacemouse is not installed; make build installs it '
                                       '(requirements-python.txt)')
    try:
        device = pyspacemouse.open(device=args.device,
                                   axis_convention=pyspacemouse.AxisConvention.ROS)
    except RuntimeError as exc:
        if 'HID API' in str(exc):
            return fail(PROG, EXIT_CONFIG, HIDAPI_HINT)
        return fail(PROG, EXIT_NO_DEVICE, f'no SpaceMouse found ({exc}); plug one in, and '
                    'give your user read access to /dev/hidraw* (a udev rule)')
    except (ValueError, OSError) as exc:
        return fail(PROG, EXIT_NO_DEVICE, f'cannot open the SpaceMouse: {exc}')
    from simops_ros.background import BackgroundNode

    probe = BackgroundNode('simops_teleop_spacemouse')
    try:
        return _publish_joy(probe, device, args.topic, 1.0 / args.rate)
    finally:
        device.close()
        probe.close()


def _publish_joy(probe: Any, device: Any, topic: str, period: float) -> int:
    from easyhid import HIDException
    from sensor_msgs.msg import Joy

    publisher = probe.node.create_publisher(Joy, topic, 10)
    message = Joy()

    def publish(axes: list[float], buttons: list[int]) -> None:
        message.header.stamp = probe.node.get_clock().now().to_msg()
        message.axes, message.buttons = axes, buttons
        publisher.publish(message)

    print(f'{PROG}: {device.name} on {topic}; hold the left button to move, the right '
          'toggles the hand; Ctrl-C ends', flush=True)
    try:
        lost = stream(device.read, publish, period, (HIDException, OSError))
    except KeyboardInterrupt:
        publish([0.0] * 6, [0] * BUTTONS)
        return EXIT_OK
    if lost is not None:
        return fail(PROG, EXIT_FAILED, f'the SpaceMouse stopped answering ({lost}); released '
                                       'axes were sent')
    return EXIT_OK


def stream(read: Callable[[], SpaceMouseState], publish: Publish, period: float,
           lost: tuple[type[BaseException], ...], running: Callable[[], bool] = lambda: True
           ) -> str | None:
    """Publish what ``read`` returns every ``period`` s while ``running()``.

    When ``read`` raises one of ``lost`` (the device is gone), publish released axes and
    buttons once and return why; None when ``running()`` turned false.
    """
    deadline = time.monotonic()
    while running():
        try:
            state = read()
        except lost as exc:
            publish([0.0] * 6, [0] * BUTTONS)
            return str(exc) or type(exc).__name__
        publish(*joy_fields(state))
        deadline += period
        time.sleep(max(0.0, deadline - time.monotonic()))
        deadline = max(deadline, time.monotonic() - period)
    return None


if __name__ == '__main__':
    sys.exit(main())
