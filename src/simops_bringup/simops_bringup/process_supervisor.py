"""Run node processes the way ``ros2 launch`` does, without it.

Each child runs in its own process group, so a terminal's Ctrl-C reaches only the runner,
which then stops every group in order: SIGINT, SIGTERM after ``sigint_timeout``, SIGKILL
after ``sigterm_timeout``; another Ctrl-C cuts the current wait short. A group counts as
stopped once no process is left in it, so a node's own children are never orphaned. Output
lines carry the node's name (``[policy] ...``). When a required node exits, the others are
shut down and its exit code becomes the runner's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import BinaryIO

POLL = 0.05  # s between checks of the children
KILL_WAIT = 5.0  # s for the kernel to reap SIGKILLed groups
READER_JOIN = 2.0  # s to drain a child's output after it stopped
RUNNER = 'simops-launch'
_PR_SET_PDEATHSIG = 1
_PDEATHSIG = int(signal.SIGTERM)


@dataclass(frozen=True)
class Command:
    """A process to run: its output label, argv, and whether its exit ends the launch."""

    label: str
    argv: tuple[str, ...]
    required: bool = True


@dataclass
class _Child:
    command: Command
    proc: subprocess.Popen[bytes]
    reader: threading.Thread
    reported: bool = False


class Supervisor:
    """Starts the commands, relays their output and stops them all; see the module doc."""

    def __init__(self, commands: Sequence[Command], env: Mapping[str, str],
                 out: BinaryIO | None = None, sigint_timeout: float = 5.0,
                 sigterm_timeout: float = 5.0) -> None:
        self.commands = list(commands)
        self.env = {'PYTHONUNBUFFERED': '1', **env}
        self.out = out if out is not None else sys.stdout.buffer
        self.timeouts = {signal.SIGINT: sigint_timeout, signal.SIGTERM: sigterm_timeout,
                         signal.SIGKILL: KILL_WAIT}
        self._children: list[_Child] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._signal: int | None = None

    def run(self) -> int:
        """Run until Ctrl-C/SIGTERM or a required node's exit; return the exit code.

        0 when every node exited with 0; a required node's own code when it ended the
        launch (128 + N if signal N killed it); 1 for any other failure.
        """
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        ended_by: _Child | None = None
        try:
            started = self._start_all()
            if started:
                ended_by = self._monitor()
        finally:
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if not started:
            return 1
        if ended_by is not None:
            return _exit_status(ended_by.proc.returncode)
        return 0 if all(c.proc.returncode == 0 for c in self._children) else 1

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only set flags here: the main thread may hold the output lock.
        if self._stop.is_set():
            self._hurry.set()
        else:
            self._signal = signum
            self._stop.set()

    def _start_all(self) -> bool:
        for command in self.commands:
            try:
                proc = subprocess.Popen(
                    command.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
                    preexec_fn=_die_with_parent)
            except OSError as exc:
                self.say(f'cannot start {command.label}: {exc}')
                return False
            reader = threading.Thread(target=self._relay, args=(command.label, proc),
                                      daemon=True)
            reader.start()
            self._children.append(_Child(command, proc, reader))
            self.say(f'started {command.label} (pid {proc.pid})')
        return True

    def _monitor(self) -> _Child | None:
        """Wait for a stop signal or for a required child to exit; return that child."""
        while not self._stop.is_set():
            for child in self._children:
                if not child.reported and child.proc.poll() is not None:
                    self._report(child)
                    if child.command.required:
                        self.say(f'{child.command.label} is required; shutting down')
                        return child
            if all(child.reported for child in self._children):
                return None
            self._stop.wait(POLL)
        name = signal.Signals(self._signal).name if self._signal else 'a signal'
        self.say(f'{name} received; shutting down')
        return None

    def _shutdown(self) -> None:
        for sig, timeout in self.timeouts.items():
            alive = [c for c in self._children if _group_alive(c.proc)]
            if not alive:
                break
            self._hurry.clear()
            self.say(f'sending {sig.name} to {", ".join(c.command.label for c in alive)}')
            for child in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.proc.pid, sig)
            deadline = time.monotonic() + timeout
            while (any(_group_alive(c.proc) for c in alive) and time.monotonic() < deadline
                   and not self._hurry.is_set()):
                time.sleep(POLL)
        for child in self._children:
            child.proc.wait()
            child.reader.join(READER_JOIN)
            if not child.reported:
                self._report(child)

    def _relay(self, label: str, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        prefix = f'[{label}] '.encode()
        for line in iter(proc.stdout.readline, b''):
            self._write(prefix + (line if line.endswith(b'\n') else line + b'\n'))
        proc.stdout.close()

    def _report(self, child: _Child) -> None:
        child.reported = True
        self.say(f'{child.command.label} {_describe(child.proc.returncode)}')

    def say(self, message: str) -> None:
        """Print one line of the runner's own, prefixed like the nodes' lines."""
        self._write(f'[{RUNNER}] {message}\n'.encode())

    def _write(self, data: bytes) -> None:
        # A closed output (``simops-launch ... | head``) must not stop the draining of the
        # children's pipes, or they would block on a full pipe.
        with self._lock, contextlib.suppress(BrokenPipeError):
            self.out.write(data)
            self.out.flush()


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child or any process in its group still runs."""
    if proc.poll() is None:
        return True
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


def _describe(code: int) -> str:
    if code < 0:
        return f'was killed by {signal.Signals(-code).name}'
    return f'exited with code {code}'


if sys.platform == 'linux':
    _prctl = ctypes.CDLL(None, use_errno=True).prctl

    def _die_with_parent() -> None:
        """In the child: get SIGTERM if the runner dies without stopping it (even SIGKILL)."""
        _prctl(_PR_SET_PDEATHSIG, _PDEATHSIG)
else:
    def _die_with_parent() -> None:
        """No parent-death signal outside Linux; the runner's own shutdown still applies."""
