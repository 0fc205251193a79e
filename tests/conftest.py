"""Test-session setup: every pytest process (and every xdist worker) gets its own ROS domain.

The domain is claimed before any test imports rclpy, and the isolated environment (loopback
discovery, loopback-only Fast DDS transports) goes into os.environ, so the in-test rclpy
context and every subprocess a test starts inherit it.
"""

from __future__ import annotations

import ast
import gc
import inspect
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from simops_core.dds_isolation import DomainClaim, claim_domain_id, isolated_env

_claim: DomainClaim | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _claim
    _claim = claim_domain_id()
    os.environ.update(isolated_env(_claim.domain_id))
    # a node that crashes (SIGSEGV) prints every thread's Python stack into its log, which
    # the failing assertion shows
    os.environ['PYTHONFAULTHANDLER'] = '1'
    # The tests press Ctrl-C as a terminal does, on processes they start. pytest started in
    # the background by a shell without job control (`nohup pytest &`, a script's `&`)
    # inherits SIGINT ignored, as does every process it starts (POSIX keeps an ignored signal
    # across exec, and Python then installs no KeyboardInterrupt handler): every Ctrl-C test
    # would see the signal dropped. A handled signal is reset to its default at exec, so the
    # processes the tests start take Ctrl-C as they do in a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# A test "touches ROS" when it takes a ROS fixture, or its own code or a fixture of the suite's
# it uses starts a node, a process or an rclpy context: the Jazzy leg of `make test` runs
# exactly these (`-m ros`).
ROS_FIXTURES = {'ros_probe', 'launch', 'ros_env'}
TESTS = Path(__file__).resolve().parent
GUARD = TESTS / 'rclpy_guard'   # its sitecustomize refuses rclpy in a ros_free test's commands


def ros_code() -> re.Pattern[str]:
    """Code that starts a node, a process or an rclpy context: by name, or a call of a
    ``tests/*_helpers.py`` function or class whose own code does (found to a fixed point)."""
    names = r'NodeProcess|rclpy|start_sim|ros2_run|BackgroundNode|run_graph|' \
        r'installed_executable|subprocess'
    definitions = []
    for path in sorted(TESTS.glob('*_helpers.py')):
        text = path.read_text()
        definitions += [(node.name, ast.get_source_segment(text, node) or '')
                        for node in ast.parse(text).body
                        if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    calls: list[str] = []
    while True:
        pattern = re.compile('|'.join([names, *(rf'(?<![.\w]){name}\(' for name in calls)]))
        found = [name for name, code in definitions
                 if name not in calls and not re.fullmatch(names, name) and pattern.search(code)]
        if not found:
            return pattern
        calls += found


ROS_CODE = ros_code()


def touches_ros(item: pytest.Item) -> bool:
    """Whether ``item`` or a fixture of the suite's it uses (directly or not) touches ROS.

    A test marked ``ros_free`` does not: it starts only commands that never touch ROS (fit,
    simops-train, simops-validate: see :func:`pytest_runtest_protocol`).
    """
    names = set(getattr(item, 'fixturenames', ()))
    if item.get_closest_marker('ros_free') is not None:
        if ROS_FIXTURES & names:
            raise pytest.UsageError(f'{item.nodeid} is marked ros_free but uses '
                                    f'{sorted(ROS_FIXTURES & names)[0]}: remove the marker')
        return False
    if ROS_FIXTURES & names:
        return True
    functions = [getattr(item, 'function', None)]
    definitions = getattr(getattr(item, '_fixtureinfo', None), 'name2fixturedefs', {})
    functions += [d.func for name in names for d in definitions.get(name, ())]
    for function in functions:
        if function is None or not str(inspect.getsourcefile(function)).startswith(str(TESTS)):
            continue
        if ROS_CODE.search(inspect.getsource(function)):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if touches_ros(item):
            item.add_marker(pytest.mark.ros)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _claim is not None:
        _claim.release()


@pytest.fixture(autouse=True)
def frozen_heap(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that times nodes (marked ``ros``) runs on a collected, then frozen, heap.

    By the middle of a run the pytest process holds ~500,000 long-lived objects (torch,
    MuJoCo, every earlier test's modules), and a full collection over them pauses every
    thread for 0.2-0.3 s, among them the spinner of a probe that times a node's messages (a
    simulator's real-time factor once read 0.80 after such a pause). The heap is collected
    first, so no earlier test's garbage waits out the test frozen, then ``gc.freeze`` parks
    it and ``gc.unfreeze`` hands it back afterwards. Nodes do the same (``run_node``).
    """
    if request.node.get_closest_marker('ros') is None:
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(autouse=True)
def signal_dispositions() -> Iterator[None]:
    """SIGINT and SIGTERM are handled after a test as before it; one left ignored fails it.

    An ignored signal survives exec: a SIGINT left ignored in the pytest process
    (``run_node``'s exit does that, by design, in a node's own process) made a later
    ``simops-validate`` deaf to the Ctrl-C its test sent, and the test hung. A handler a
    test installs (a command's ``main`` run in-process) is only put back.
    """
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    ignored = [sig.name for sig, handler in before.items()
               if signal.getsignal(sig) == signal.SIG_IGN != handler]
    for sig, handler in before.items():
        signal.signal(sig, handler)
    assert not ignored, f'the test left {", ".join(ignored)} ignored for every later command'


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked ``ros_free`` (its fixtures too) starts its commands with
    ``tests/rclpy_guard`` first on PYTHONPATH: a command that imports rclpy or a message
    package fails there, loudly, instead of running on the wrong leg unnoticed."""
    if item.get_closest_marker('ros_free') is None:
        return (yield)
    before = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join([str(GUARD), *filter(None, [before])])
    try:
        return (yield)
    finally:
        if before is None:
            del os.environ['PYTHONPATH']
        else:
            os.environ['PYTHONPATH'] = before


@pytest.fixture(scope='session')
def ros_env() -> dict[str, str]:
    """The isolated environment for processes a test starts."""
    return dict(os.environ)


@pytest.fixture
def ros_probe() -> Iterator[object]:
    """An rclpy node in the test process, spinning in a background thread."""
    from ros_helpers import RosProbe

    probe = RosProbe()
    try:
        yield probe
    finally:
        probe.close()


@pytest.fixture
def launch(ros_env: dict[str, str], tmp_path: Path) -> Iterator[object]:
    """Start ``simops-launch`` with arguments; every runner is stopped at the end."""
    from ros_helpers import NodeProcess, installed_executable

    started: list[NodeProcess] = []

    def start(*args: str) -> NodeProcess:
        argv = [str(installed_executable('simops_bringup', 'simops-launch')), *args]
        proc = NodeProcess(argv, tmp_path / f'launch{len(started)}.log', env=ros_env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
