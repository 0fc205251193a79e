"""``simops-recover``: bring the arm back after a reflex, as its franka_ros2 release documents.

Runs the release's recovery steps (:mod:`simops_ros.franka_recovery`) against the arm's
``controller_manager`` and ``action_server``, on a real arm and on the simulator alike::

    simops-recover                      # franka_ros2 v3 (Jazzy): recovery action,
                                        # hardware component active, controllers active
    simops-recover --franka-ros2 v2     # Humble: deactivate the controllers first
    simops-recover --namespace left     # an arm of a namespaced (fr3_duo-style) bringup

Then ``~/enable`` the node that drives the arm again. Exit codes: :data:`EXIT_CODES`.
"""

from __future__ import annotations

import sys

from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandLineParser,
    ConfigError,
    exit_codes,
    fail,
)
from simops_core.franka_ros2 import ARM_CONTROLLER, franka_release, release_names

PROG = 'simops-recover'
EXIT_REFUSED, EXIT_NO_ANSWER = 3, 4
EXIT_CODES = {EXIT_OK: 'recovered: the arm takes commands again',
              EXIT_USAGE: 'bad command line or franka_ros2 release file',
              EXIT_REFUSED: 'a step was refused (the line names it and why)',
              EXIT_NO_ANSWER: 'a server did not answer in time (is the arm\'s bringup running?)',
              EXIT_INTERRUPTED: 'interrupted (Ctrl-C) between two steps'}


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the steps, print one line per step."""
    try:
        releases = release_names()
    except ConfigError as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    parser = CommandLineParser(PROG, 'Bring the arm back after a reflex, with the steps its '
                               'franka_ros2 release documents.', exit_codes(EXIT_CODES))
    parser.add_argument('--franka-ros2', choices=releases, default=releases[0],
                        help='the arm\'s franka_ros2 release (default: %(default)s)')
    parser.add_argument('--namespace', default='', help='the arm\'s ROS namespace')
    parser.add_argument('--controller', action='append', default=None,
                        help=f'a controller to re-activate (repeatable; default: '
                             f'{ARM_CONTROLLER})')
    parser.add_argument('--timeout', type=float, default=10.0,
                        help='s to wait for each answer (default: %(default)s)')
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error('--timeout must be > 0')
    release = franka_release(args.franka_ros2)
    from simops_ros.background import BackgroundNode
    from simops_ros.franka_recovery import FrankaRecovery, NoAnswerError, RecoveryError

    probe = BackgroundNode('simops_recover')
    try:
        recovery = FrankaRecovery(probe, release, args.namespace,
                                  args.controller or [ARM_CONTROLLER])
        recovery(args.timeout, lambda step: print(f'{PROG}: {step}', flush=True))
    except RecoveryError as exc:
        return fail(PROG, EXIT_NO_ANSWER if isinstance(exc, NoAnswerError) else EXIT_REFUSED,
                    str(exc))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        probe.close()
    print(f'{PROG}: recovered ({release.describes})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
