"""``simops-launch``: run a bringup profile on machines without ``ros2 launch``.

``simops-launch sim|real_robot [name:=value ...]`` starts exactly the processes, with the same
``--ros-args``, that ``ros2 launch simops_bringup <profile>.launch.py`` would, from the same
node graph (:mod:`simops_bringup.graph`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence

from simops_bringup.command_lines import ExecutableNotFoundError, command_line
from simops_bringup.graph import PROFILES, GraphError, NodeSpec, build_graph, launch_arguments
from simops_bringup.process_supervisor import Command, Supervisor
from simops_core.command_line import EXIT_OK, EXIT_USAGE, CommandLineParser, UsageError, exit_codes
from simops_core.dds_isolation import NoFreeDomainError, claim_domain_id, isolated_env


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``['robot:=panda', ...]`` -> ``{'robot': 'panda', ...}``; a name may appear once."""
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition(':=')
        if not sep or not name:
            raise UsageError(f'bad launch argument {item!r}; write name:=value')
        if name in values:
            raise UsageError(f'launch argument {name} is given twice')
        values[name] = value
    return values

EXIT_CODES: dict[int | str, str] = {
    EXIT_OK: 'every node stopped cleanly (Ctrl-C)',
    EXIT_USAGE: 'bad command line, launch argument or graph',
    'N': 'a required node exited with code N; the others were stopped'}


def build_parser() -> argparse.ArgumentParser:
    """The command-line interface of ``simops-launch``."""
    parser = CommandLineParser(
        'simops-launch', 'Run a SimOps bringup profile without ros2 launch.',
        exit_codes(EXIT_CODES))
    parser.add_argument('profile', choices=PROFILES, help='the launch file to run, by name')
    parser.add_argument('arguments', nargs='*', metavar='name:=value',
                        help='launch arguments, as for ros2 launch (see --show-args)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the command line of every node and exit')
    parser.add_argument('--show-args', action='store_true',
                        help="print the profile's launch arguments and exit")
    parser.add_argument('--isolate', action='store_true',
                        help='claim a free ROS domain and keep DDS on loopback (shared '
                             'machines, tests, demos); default: keep your environment')
    parser.add_argument('--sigint-timeout', type=float, default=5.0, metavar='S',
                        help='seconds a node gets to exit after SIGINT before SIGTERM')
    parser.add_argument('--sigterm-timeout', type=float, default=5.0, metavar='S',
                        help='seconds a node gets to exit after SIGTERM before SIGKILL')
    return parser


def node_label(node: NodeSpec, graph: Sequence[NodeSpec]) -> str:
    """How the runner names ``node``: its name, or ``left/policy`` where two share a name."""
    if sum(other.name == node.name for other in graph) == 1:
        return node.name
    return f'{node.namespace.strip("/")}/{node.name}'


def main(argv: list[str] | None = None) -> int:
    """Run ``simops-launch``; return its exit code (2 for a usage or configuration error)."""
    options = build_parser().parse_args(argv)
    try:
        if options.show_args:
            for arg in launch_arguments(options.profile):
                choices = f' (one of {", ".join(arg.choices)})' if arg.choices else ''
                print(f"{arg.name}:\n    {arg.description}{choices}\n    default: '{arg.default}'")
            return 0
        values = parse_assignments(options.arguments)
        nodes = build_graph(options.profile, values)
        if options.isolate and options.profile == 'real_robot' and values.get('standin') != 'true':
            raise UsageError('--isolate would cut real_robot off from the arm; use it only '
                             'with standin:=true')
        commands = [Command(node_label(node, nodes), tuple(command_line(node)), node.required)
                    for node in nodes]
    except (UsageError, GraphError, ExecutableNotFoundError) as exc:
        print(f'simops-launch: error: {exc}', file=sys.stderr)
        return EXIT_USAGE
    if options.dry_run:
        for command in commands:
            print(shlex.join(command.argv))
        return 0
    return _run(commands, options)


def _run(commands: list[Command], options: argparse.Namespace) -> int:
    env = dict(os.environ)
    claim = None
    if options.isolate:
        try:
            claim = claim_domain_id()
        except NoFreeDomainError as exc:
            print(f'simops-launch: error: {exc}', file=sys.stderr)
            return EXIT_USAGE
        env = isolated_env(claim.domain_id)
    supervisor = Supervisor(commands, env, sigint_timeout=options.sigint_timeout,
                            sigterm_timeout=options.sigterm_timeout)
    if claim is not None:
        supervisor.say(f'isolated: ROS_DOMAIN_ID={claim.domain_id}, DDS on loopback only')
    try:
        return supervisor.run()
    finally:
        if claim is not None:
            claim.release()


if __name__ == '__main__':
    raise SystemExit(main())
