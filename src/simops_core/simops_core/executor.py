"""Run independent tasks in parallel: local worker processes, or a Ray cluster (no rclpy).

One small interface, :func:`run_tasks`, serves the validation grid, the rollouts and a
fleet of fits: ``fn`` is applied to every item, each result is handed to ``on_result`` as it
arrives (index, result), and the results come back in the items' order, each exactly once.

- :class:`LocalExecutor` (the default): ``workers`` spawned processes. A worker that dies
  (killed, out of memory) breaks the pool; the tasks not finished then run again on a new
  pool, at most ``retries`` times per run (``restarts`` counts them).
- :class:`RayExecutor`: ``address`` is an existing cluster (``HOST:PORT``) or ``local``, which
  starts one on this machine (no dashboard, no usage reporting) and stops it at the end.
  Ray retries a task whose worker died (``max_retries``). Ray has no bind address: on Linux
  it listens on every interface and advertises the routable one even when told 127.0.0.1.
  So a command given ``--ray local`` first runs itself again inside a private network
  namespace (:func:`isolate_for_local_ray`), where loopback is the only interface.

Ctrl-C (KeyboardInterrupt) cancels every pending task and stops every worker before it
propagates. Progress lines (tasks done, items per second, time left) go to ``progress``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import multiprocessing
import os
import shutil
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

OnResult = Callable[[int, Any], None]
"""Called in the parent with (item index, result) as each task finishes."""
DEFAULT_RETRIES = 3
ISOLATED = 'SIMOPS_PRIVATE_NETWORK'   # set in a command run again in its own network namespace


class ExecutorError(RuntimeError):
    """Tasks could not be run (a task raised, kept failing, or the cluster is unreachable)."""


class Executor(Protocol):
    """Applies a function to items in parallel; see the module docstring."""

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any],
            on_result: OnResult | None = None) -> list[Any]:
        """``[fn(item) for item in items]``, computed in parallel; results in item order."""
        ...


@dataclass
class Tally:
    """Progress of one run: ``done`` of ``total`` tasks, ``units`` of work (e.g. episodes)."""

    total: int
    started: float = field(default_factory=time.monotonic)
    done: int = 0
    units: float = 0.0

    def line(self, unit: str) -> str:
        """``12/40 tasks, 3.1 episodes/s, ~25 s left``."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        left = elapsed / self.done * (self.total - self.done) if self.done else float('nan')
        return (f'{self.done}/{self.total} tasks, {self.units / elapsed:.1f} {unit}/s, '
                f'{elapsed:.0f} s elapsed, ~{left:.0f} s left')


@dataclass
class LocalExecutor:
    """``workers`` spawned processes on this machine; see the module docstring."""

    workers: int = 2
    retries: int = DEFAULT_RETRIES
    restarts: int = 0

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any],
            on_result: OnResult | None = None) -> list[Any]:
        """Apply ``fn`` to ``items``; the unfinished tasks of a broken pool run again."""
        results: dict[int, Any] = {}
        context = multiprocessing.get_context('spawn')
        self.restarts = 0
        while len(results) < len(items):
            pending = [i for i in range(len(items)) if i not in results]
            if self.restarts > self.retries:
                raise ExecutorError(f'worker processes died {self.restarts} times; '
                                    f'{len(pending)} tasks left undone')
            pool = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=context)
            try:
                futures = {pool.submit(fn, items[i]): i for i in pending}
                for future in concurrent.futures.as_completed(futures):
                    index = futures[future]
                    try:
                        result = future.result()
                    except BrokenProcessPool:
                        self.restarts += 1   # a worker died: the rest runs on a new pool
                        break
                    results[index] = result
                    if on_result is not None:
                        on_result(index, result)
            except BaseException:
                _stop(pool)
                raise
            _stop(pool)
        return [results[i] for i in range(len(items))]


def _stop(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Cancel what has not started and end every worker process now."""
    processes = list((getattr(pool, '_processes', None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()


@dataclass
class RayExecutor:
    """Tasks on a Ray cluster at ``address`` (``HOST:PORT``, or ``local``); see the module."""

    address: str
    retries: int = DEFAULT_RETRIES
    workers: int | None = None   # CPUs of a ``local`` cluster (default: this machine's)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any],
            on_result: OnResult | None = None) -> list[Any]:
        """Apply ``fn`` to ``items`` on the cluster; Ray retries tasks whose worker died."""
        import ray

        started_here = not ray.is_initialized()
        if started_here:
            _connect(ray, self.address, self.workers)
        remote = ray.remote(max_retries=self.retries, retry_exceptions=False)(fn)
        refs = {remote.remote(item): i for i, item in enumerate(items)}
        results: dict[int, Any] = {}
        try:
            waiting = list(refs)
            while waiting:
                ready, waiting = ray.wait(waiting, num_returns=1)
                index = refs[ready[0]]
                try:
                    results[index] = ray.get(ready[0])
                except ray.exceptions.RayError as exc:
                    raise ExecutorError(f'task {index} failed on the Ray cluster: '
                                        f'{str(exc).splitlines()[0]}') from None
                if on_result is not None:
                    on_result(index, results[index])
        except BaseException:
            for ref in refs:
                ray.cancel(ref, force=True)
            raise
        finally:
            if started_here:
                ray.shutdown()
        return [results[i] for i in range(len(items))]


def _connect(ray: Any, address: str, workers: int | None) -> None:
    """Join the cluster at ``address``, or start a loopback-only one for ``local``."""
    env = {'env_vars': {'RAY_USAGE_STATS_ENABLED': '0'}}
    try:
        if address == 'local':
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False,
                     _node_ip_address='127.0.0.1', runtime_env=env,
                     log_to_driver=False, configure_logging=False)
        else:   # a driver joining a loopback cluster must not announce another interface
            loopback = address.split(':')[0] in ('127.0.0.1', 'localhost')
            ray.init(address=address, runtime_env=env, log_to_driver=False,
                     configure_logging=False,
                     **({'_node_ip_address': '127.0.0.1'} if loopback else {}))
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ExecutorError(f'cannot reach the Ray cluster at {address}: '
                            f'{str(exc).splitlines()[0]}; start one with `ray start --head '
                            '--node-ip-address 127.0.0.1`, or pass --ray local') from None


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ignore SIGINT inside (pool workers started here inherit it from their first instruction).

    The terminal sends Ctrl-C to the whole process group: a worker that took it would print
    its own traceback beside the parent's one line, even while it still imports. Started
    inside this block, the workers ignore it, and the parent, which handles it, ends them.
    """
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def make_executor(ray: str | None, workers: int) -> LocalExecutor | RayExecutor:
    """Ray at ``ray`` (``local`` or an address), or ``workers`` local processes."""
    if ray:
        return RayExecutor(ray, workers=workers if ray == 'local' else None)
    return LocalExecutor(workers)


def run_tasks(executor: Executor, fn: Callable[[Any], Any], items: Sequence[Any],
              units: Callable[[Any], float] = lambda _: 1.0, unit: str = 'tasks',
              progress: Callable[[str], None] | None = None,
              on_result: OnResult | None = None) -> list[Any]:
    """``executor.map`` with a progress line per finished task (``units`` of its result)."""
    tally = Tally(len(items))

    def done(index: int, result: Any) -> None:
        tally.done += 1
        tally.units += units(result)
        if progress is not None:
            progress(tally.line(unit))
        if on_result is not None:
            on_result(index, result)

    return executor.map(fn, items, done)


def private_network() -> bool:
    """Whether this process sees no network interface but loopback."""
    return [name for _, name in socket.if_nameindex()] == ['lo']


def isolate_for_local_ray(argv: list[str]) -> None:
    """Run this command again in a private network namespace, unless it already is in one.

    ``argv`` is the command line to run (``sys.argv``); it does not return when it re-runs.
    Raises :class:`ExecutorError` when no namespace can be made (no ``unshare``, or neither
    root nor unprivileged user namespaces): then pass the address of a cluster instead.
    """
    if private_network():
        _loopback_up()
        return
    unshare = shutil.which('unshare')
    flags = ['--net'] if os.geteuid() == 0 else ['--net', '--map-root-user']
    probe = unshare and os.spawnv(os.P_WAIT, unshare, ['unshare', *flags, 'true'])
    if not unshare or probe != 0:
        raise ExecutorError('--ray local runs Ray in a private network namespace (Ray listens '
                            'on every interface otherwise), and this machine cannot make one '
                            '(util-linux unshare, as root or with user namespaces); start a '
                            'cluster yourself and pass its address to --ray')
    os.environ[ISOLATED] = '1'
    _execv(unshare, ['unshare', *flags, sys.executable, *argv])


def _execv(path: str, argv: list[str]) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, argv)


def _loopback_up() -> None:
    """Bring ``lo`` up (a new network namespace starts with it down)."""
    iff_up, siocgifflags, siocsifflags = 0x1, 0x8913, 0x8914
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack('16sH14x', b'lo', 0)
        flags = struct.unpack('16sH14x', fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack('16sH14x', b'lo', flags | iff_up))
