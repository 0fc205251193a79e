"""Process plumbing of ``simops-demo``: steps with progress, child processes with log files.

Every child runs in its own session with the demo's isolated DDS environment, writes its
output to a log file under ``demo_out/logs`` and is stopped (SIGINT, SIGTERM, SIGKILL) when
the demo leaves the step, whatever happened. A failed step raises :class:`StepError`, which
names the step and its log file.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

STOP_TIMEOUT = 10.0  # s per signal when stopping a child


class StepError(RuntimeError):
    """A demo step failed; ``str()`` is the one-line reason, ``log`` the file to read."""

    def __init__(self, step: str, reason: str, log: Path | None = None) -> None:
        self.step, self.reason, self.log = step, reason, log
        where = f'; see {log}' if log is not None else ''
        super().__init__(f'{step} failed: {reason}{where}')


class Progress:
    """Numbered step headers and indented progress lines with the elapsed time."""

    def __init__(self, total: int, out: TextIO | None = None) -> None:
        self.total = total
        self.out = out or sys.stdout
        self.started = time.monotonic()
        self.step_started = self.started
        self.durations: dict[str, float] = {}
        self._current = ''

    @contextlib.contextmanager
    def step(self, number: int, title: str) -> Iterator[None]:
        """Announce step ``number``, time it, and report how it ended."""
        self._current, self.step_started = title, time.monotonic()
        self._print(f'[{number}/{self.total}] {title}')
        try:
            yield
        finally:
            self.durations[title] = time.monotonic() - self.step_started
        self.note(f'done in {self.durations[title]:.0f} s')

    def note(self, message: str) -> None:
        """One indented progress line, stamped with the time since the demo started."""
        self._print(f'    {time.monotonic() - self.started:6.0f} s  {message}')

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)


class Child:
    """A child process in its own session whose output goes to ``log`` (line by line).

    ``echo`` receives each output line (without the newline) as it arrives, e.g. to relay
    progress; the full output is always in the log file.
    """

    def __init__(self, argv: Sequence[str], log: Path, env: Mapping[str, str],
                 cwd: Path | None = None, echo: Callable[[str], None] | None = None) -> None:
        self.argv = [str(a) for a in argv]
        self.log = log
        self.lines: list[str] = []
        self._echo = echo
        log.parent.mkdir(parents=True, exist_ok=True)
        self._file = log.open('w', encoding='utf-8', errors='replace')
        self._file.write(f'$ {" ".join(self.argv)}\n')
        self._file.flush()
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=dict(env), cwd=cwd, start_new_session=True)
        self._reader = threading.Thread(target=self._relay, daemon=True)
        self._reader.start()

    def _relay(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b''):
            text = raw.decode('utf-8', 'replace')
            self._file.write(text)
            self._file.flush()
            for line in re.split(r'[\r\n]+', text):
                if line:
                    self.lines.append(line)
                    if self._echo is not None:
                        self._echo(line)
        self.proc.stdout.close()

    def running(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def output_has(self, text: str) -> bool:
        """Whether any output line so far contains ``text``."""
        return any(text in line for line in list(self.lines))

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the exit; return the code, or None if still running."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(STOP_TIMEOUT)
        return code

    def stop(self) -> int:
        """Stop the whole session: SIGINT, then SIGTERM, then SIGKILL; return the exit code."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(STOP_TIMEOUT)
        code = self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # nothing of the session may outlive it
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(STOP_TIMEOUT)
        self._file.close()
        return code

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_tool(step: str, argv: Sequence[str], log: Path, env: Mapping[str, str], timeout: float,
             ok: Sequence[int] = (0,), echo: Callable[[str], None] | None = None,
             cwd: Path | None = None) -> int:
    """Run a command-line tool to completion; return its exit code if it is one of ``ok``.

    Raises :class:`StepError` (with the tool's last error line) for any other exit code or
    when ``timeout`` s pass.
    """
    with Child(argv, log, env, cwd, echo) as child:
        code = child.wait(timeout)
        if code is None:
            raise StepError(step, f'{Path(argv[0]).name} did not finish within {timeout:.0f} s',
                            log)
    if code not in ok:
        errors = [line for line in child.lines if 'error' in line.lower()]
        last = (errors or child.lines or ['no output'])[-1].strip()
        raise StepError(step, f'{Path(argv[0]).name} exited with code {code}: {last}', log)
    return code
