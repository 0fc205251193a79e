"""Helpers for tests that start real ROS 2 processes and talk to them over DDS.

No ROS is mocked: nodes run as subprocesses in the session's isolated domain, and the test
talks to them through :class:`RosProbe`, a real rclpy node in the test process.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rclpy.qos import QoSProfile

from simops_core.waiting import wait_until
from simops_ros.background import BackgroundNode

REPO = Path(__file__).resolve().parents[1]


def installed_executable(package: str, executable: str) -> Path:
    """``<prefix>/lib/<package>/<executable>`` from AMENT_PREFIX_PATH or the local install."""
    prefixes = [Path(p) for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    prefixes += [REPO / 'install' / package]
    for prefix in prefixes:
        path = prefix / 'lib' / package / executable
        if path.is_file():
            return path
    raise FileNotFoundError(f'{package}/{executable} is not installed in '
                            f'{[str(p) for p in prefixes]}; run `make build`')


def check_parameters_once(args: Sequence[str]) -> None:
    """Raise ValueError when a ``-p name:=value`` after ``--ros-args`` names a parameter twice."""
    argv = list(args)
    ros = argv[argv.index('--ros-args') + 1:] if '--ros-args' in argv else []
    names = [value.partition(':=')[0] for flag, value in itertools.pairwise(ros)
             if flag in ('-p', '--param')]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f'parameters given twice (ROS takes the last silently): {twice}')


class NodeProcess:
    """A subprocess in its own process group, with output captured to a log file.

    Use as a context manager: leaving the block stops the whole group (SIGINT, then SIGTERM,
    then SIGKILL), so no test leaves an orphaned node behind.
    """

    def __init__(self, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path = REPO) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self._log = open(log_path, 'wb')  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env or dict(os.environ), cwd=cwd,
                                     start_new_session=True)

    @classmethod
    def ros2_run(cls, package: str, executable: str, *args: str, log_path: Path,
                 env: dict[str, str] | None = None) -> NodeProcess:
        """Start an installed executable the way ``ros2 run package executable`` does.

        The executable is looked up as ``<prefix>/lib/<package>/<executable>`` in the colcon
        install space, so tests exercise the installed entry points (``make build`` first).
        A parameter given twice (``-p name:=...``) is refused: ROS would take the last one
        silently, and a test's own value could be overridden by settings spliced after it
        (``StepSettings.ros_args()``).
        """
        check_parameters_once(args)
        return cls([str(installed_executable(package, executable)), *args], log_path, env)

    @classmethod
    def python(cls, script: str | Path, *args: str, log_path: Path,
               env: dict[str, str] | None = None) -> NodeProcess:
        """Start ``script`` with this interpreter."""
        return cls([sys.executable, str(script), *args], log_path, env)

    def __enter__(self) -> NodeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def output(self) -> str:
        """Everything the process has printed so far (also after :meth:`stop`)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def story(self, tail: int = 3000) -> str:
        """For a failed assertion: the output's first ERROR and FATAL lines (where a run went
        wrong, often long before the repeated warnings that end it), then its last ``tail``
        characters."""
        errors = [line for line in self.output.splitlines()
                  if '[ERROR]' in line or '[FATAL]' in line][:8]
        return '\n'.join(['first errors:', *errors, '... last output:', self.output[-tail:]])

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit by itself; return its exit code."""
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 10.0) -> int:
        """Stop the process group gracefully, escalating if needed; return the exit code."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                continue
        code = self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # children must not outlive the node
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        return code


class RosProbe(BackgroundNode):
    """A real rclpy node in the test process, with its own context and spinner thread."""

    def __init__(self, name: str = 'test_probe') -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, list[Any]] = {}
        super().__init__(name)

    def subscribe(self, topic: str, msg_type: type, qos: QoSProfile | int = 10) -> None:
        """Collect every message on ``topic``; read them with :meth:`messages`."""
        with self._lock:
            self._messages.setdefault(topic, [])

        def store(msg: Any) -> None:
            with self._lock:
                self._messages[topic].append(msg)

        self.node.create_subscription(msg_type, topic, store, qos)

    def topics(self) -> list[str]:
        """The topics :meth:`subscribe` collects."""
        with self._lock:
            return list(self._messages)

    def messages(self, topic: str) -> list[Any]:
        """A snapshot of the messages received on ``topic``."""
        with self._lock:
            return list(self._messages.get(topic, []))

    def wait_for_messages(self, topic: str, count: int = 1, timeout: float = 10.0) -> list[Any]:
        """Wait until ``count`` messages arrived on ``topic``; fail the test if they do not."""
        if not wait_until(lambda: len(self.messages(topic)) >= count, timeout):
            raise AssertionError(f'{len(self.messages(topic))} of {count} messages on {topic} '
                                 f'after {timeout} s')
        return self.messages(topic)

    def publisher(self, topic: str, msg_type: type, qos: QoSProfile | int = 10) -> Any:
        """Create a publisher on the probe's node."""
        return self.node.create_publisher(msg_type, topic, qos)
