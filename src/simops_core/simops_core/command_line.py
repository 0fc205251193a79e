"""The one argument parser every SimOps executable uses (pure Python, no rclpy).

Every CLI and node parses its own arguments before it touches ROS, a bag or a file:
``--help`` prints usage and exits 0, and a bad command line exits :data:`EXIT_USAGE` with one
line on stderr (``prog: error: ...``), never a usage block or a traceback. Abbreviated
options are refused (argparse would otherwise take ``--mode`` for ``--model``).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn

# The exit codes every SimOps executable shares; each one's own codes (3 and up, with their
# meanings) are its module's EXIT_CODES, which its --help and docs/interfaces.md print.
EXIT_OK = 0
EXIT_FAILED = 1       # it ran and failed: a worker, a thread or an export (the line says)
EXIT_USAGE = 2        # a bad command line, as argparse and every SimOps tool use it
EXIT_CONFIG = EXIT_USAGE   # a bad parameter or file named on it: fix the invocation, rerun
EXIT_DATA = 3         # an input (a bag) cannot be used; the line names it
EXIT_OUTPUT = 5       # the output cannot be written; what was there is left unchanged
EXIT_INTERRUPTED = 130   # Ctrl-C, after every worker stopped (128 + SIGINT, as shells say)


class UsageError(ValueError):
    """A command-line value argparse cannot check by itself; the message says which and why.

    Every executable reports it as a bad command line (:data:`EXIT_USAGE`).
    """


class ConfigError(ValueError):
    """A bad parameter or configuration file; the message says what is wrong.

    Every error about a file or parameter a user gives derives from it (a robot spec, the
    topics file, a policy card, SimParams, a model, ...), so a node refuses to start in one
    place (:func:`simops_ros.scaffold.run_node`) with :func:`config_message`. ``hint``: how
    to fix it, when the message does not say.
    """

    hint = ''


def config_message(exc: ConfigError) -> str:
    """``exc``'s message, with its class's hint on how to fix it if the message has none."""
    message = str(exc)
    return f'{message}; {exc.hint}' if exc.hint and exc.hint not in message else message


class CommandLineParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` without abbreviations and with one-line errors."""

    def __init__(self, prog: str, description: str, epilog: str | None = None) -> None:
        super().__init__(prog=prog, description=description, epilog=epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         allow_abbrev=False)

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message`` with a hint to ``--help``, exit :data:`EXIT_USAGE`."""
        self.exit(EXIT_USAGE, f'{self.prog}: error: {message}; see {self.prog} --help\n')


def exit_codes(codes: dict[int | str, str]) -> str:
    """An ``exit codes:`` epilog listing ``codes`` (code -> meaning)."""
    return 'exit codes:\n' + '\n'.join(f'  {code}  {text}' for code, text in codes.items())


def fail(prog: str, code: int, message: str) -> int:
    """Print the one-line error ``prog: error: message`` to stderr and return ``code``."""
    print(f'{prog}: error: {" ".join(message.split())}', file=sys.stderr)
    return code


def run_executable(target: str) -> int | None:
    """Import ``target`` (``module:function``) and return what calling it returns.

    Each package's executables (its ``setup.py`` console scripts) start here, from the
    package's ``__init__``, which imports nothing heavy: a Ctrl-C during the seconds of
    imports (torch, MuJoCo, rclpy) then ends as one anywhere later does, one line and
    :data:`EXIT_INTERRUPTED`, never a traceback.
    """
    module, _, name = target.partition(':')
    try:
        function: Callable[[], int | None] = getattr(importlib.import_module(module), name)
    except KeyboardInterrupt:
        print(f'{Path(sys.argv[0]).name}: interrupted (Ctrl-C) while starting',
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return function()


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt, so a tool ends as on Ctrl-C.

    What stops a tool from outside (``simops-pipeline`` ending a stage, a scheduler) then
    takes the same path as Ctrl-C: its workers stopped, one line, exit 130, no half-written
    output and no leaked semaphores.
    """
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt
