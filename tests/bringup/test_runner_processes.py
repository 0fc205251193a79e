"""simops-launch with real processes: prefixed output, Ctrl-C, escalation, exit codes, orphans.

The nodes are tests/procs/runner_fake_node.py, installed under a temporary prefix as
``lib/<package>/<executable>`` and found through AMENT_PREFIX_PATH, exactly as the runner finds
the real nodes.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ros_helpers import REPO, NodeProcess, wait_until

FAKE_NODE = REPO / 'tests/procs/runner_fake_node.py'
EXECUTABLES = (('simops_sim', 'sim'), ('simops_policy', 'policy'),
               ('simops_recorder', 'record'), ('simops_sysid', 'excite'),
               ('simops_ros', 'arm_setup'))
STARTUP = 30.0  # s; two shared cores


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    root = tmp_path / 'prefix'
    for package, executable in EXECUTABLES:
        path = root / 'lib' / package / executable
        path.parent.mkdir(parents=True)
        path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_NODE}" "$@"\n')
        path.chmod(0o755)
    return root


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Path]:
    """Where fake nodes note their own children's pids; any survivor is killed afterwards."""
    folder = tmp_path / 'children'
    folder.mkdir()
    yield folder
    for note in folder.iterdir():
        pid = int(note.read_text())
        if alive(pid) and b'sleep' in Path(f'/proc/{pid}/cmdline').read_bytes():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launch(prefix: Path, children: Path, ros_env: dict[str, str],
           tmp_path: Path) -> Iterator[object]:
    started: list[NodeProcess] = []

    def start(*args: str, **behaviour: str) -> NodeProcess:
        env = {**ros_env, 'AMENT_PREFIX_PATH': str(prefix),
               'RUNNER_FAKE_CHILD_DIR': str(children),
               **{f'RUNNER_FAKE_{k.upper()}': v for k, v in behaviour.items()}}
        proc = NodeProcess([sys.executable, '-m', 'simops_bringup.runner', *args],
                           tmp_path / f'runner{len(started)}.log', env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count: it only waits to be reaped)."""
    try:
        stat = Path(f'/proc/{pid}/stat').read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(')', 1)[1].split()[0] != 'Z'


def node_pids(output: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r'\[(\w+)\] \w+ up pid=(\d+)', output)}


def wait_for_nodes(proc: NodeProcess, names: list[str]) -> dict[str, int]:
    assert wait_until(lambda: set(names) <= node_pids(proc.output).keys(), STARTUP), proc.output
    return node_pids(proc.output)


def test_ctrl_c_stops_every_node_cleanly_and_leaves_no_orphan(launch: object,
                                                              children: Path) -> None:
    proc = launch('sim', 'record:=true')
    pids = wait_for_nodes(proc, ['sim', 'policy', 'recorder'])
    assert wait_until(lambda: len(list(children.iterdir())) == 3, STARTUP)
    grandchildren = [int(p.read_text()) for p in children.iterdir()]
    assert all(alive(pid) for pid in [*pids.values(), *grandchildren])

    assert proc.stop() == 0  # SIGINT to the runner's group, as a terminal's Ctrl-C
    out = proc.log_path.read_text()
    assert '[simops-launch] SIGINT received; shutting down' in out
    assert '[simops-launch] sending SIGINT to sim, policy, recorder' in out
    for name in ('sim', 'policy', 'recorder'):
        assert f'[{name}] {name} stopped by SIGINT' in out
        assert f'[simops-launch] {name} exited with code 0' in out
    assert '[policy] policy args --ros-args -r __node:=policy -p model_path:=' in out
    assert '[simops-launch] sending SIGTERM' not in out
    assert wait_until(lambda: not any(alive(p) for p in [*pids.values(), *grandchildren]), 5)


def test_a_required_node_dying_stops_the_rest_and_sets_the_exit_code(launch: object) -> None:
    proc = launch('sim', policy='exit:3:1.0')
    pids = wait_for_nodes(proc, ['sim', 'policy'])
    assert proc.wait(STARTUP) == 3
    out = proc.output
    assert '[policy] policy failing with 3' in out  # stderr is relayed and prefixed too
    assert '[simops-launch] policy exited with code 3' in out
    assert '[simops-launch] policy is required; shutting down' in out
    assert '[sim] sim stopped by SIGINT' in out
    assert not any(alive(pid) for pid in pids.values())


def test_shutdown_escalates_to_sigterm_then_sigkill(launch: object) -> None:
    proc = launch('sim', '--sigint-timeout', '0.5', '--sigterm-timeout', '0.5',
                  sim='ignore_sigint', policy='stubborn')
    pids = wait_for_nodes(proc, ['sim', 'policy'])
    assert proc.stop() == 1  # a node that had to be killed is not a clean shutdown
    out = proc.log_path.read_text()
    assert '[simops-launch] sending SIGTERM to sim, policy' in out
    assert '[sim] sim stopped by SIGTERM' in out
    assert '[simops-launch] sending SIGKILL to policy' in out
    assert '[simops-launch] policy was killed by SIGKILL' in out
    assert not any(alive(pid) for pid in pids.values())


def test_a_second_ctrl_c_skips_the_wait(launch: object) -> None:
    proc = launch('sim', '--sigint-timeout', '60', sim='ignore_sigint')
    wait_for_nodes(proc, ['sim', 'policy'])
    os.killpg(proc.proc.pid, signal.SIGINT)
    assert wait_until(lambda: 'sending SIGINT to sim, policy' in proc.output, 10)
    assert wait_until(lambda: '[policy] policy stopped by SIGINT' in proc.output, 10)
    os.killpg(proc.proc.pid, signal.SIGINT)
    assert proc.wait(10) == 0
    assert '[sim] sim stopped by SIGTERM' in proc.output


def test_an_optional_node_may_finish_while_the_rest_runs(launch: object) -> None:
    proc = launch('real_robot', 'standin:=true', 'excite:=true', 'record:=false',
                  excite='exit:0:0.2')
    wait_for_nodes(proc, ['standin', 'arm_setup', 'policy', 'excite'])
    assert wait_until(lambda: 'excite exited with code 0' in proc.output, STARTUP)
    assert proc.proc.poll() is None
    assert proc.stop() == 0
    assert '[standin] standin stopped by SIGINT' in proc.log_path.read_text()


def test_isolate_claims_its_own_domain_on_loopback(launch: object) -> None:
    proc = launch('--isolate', 'real_robot', 'standin:=true', 'record:=false')
    # every node it starts, so Ctrl-C never lands in a Python still importing (exit 1)
    wait_for_nodes(proc, ['standin', 'arm_setup', 'policy'])
    match = re.search(r'\[policy\] policy env ROS_DOMAIN_ID=(\d+) '
                      r'ROS_AUTOMATIC_DISCOVERY_RANGE=(\w+)', proc.output)
    assert match, proc.output
    assert match[2] == 'LOCALHOST'
    assert match[1] != os.environ['ROS_DOMAIN_ID']  # the test session holds that one
    assert f'[simops-launch] isolated: ROS_DOMAIN_ID={match[1]}' in proc.output
    assert proc.stop() == 0


def test_nodes_stop_even_if_the_runner_is_killed(launch: object) -> None:
    proc = launch('sim')
    pids = wait_for_nodes(proc, ['sim', 'policy'])
    os.kill(proc.proc.pid, signal.SIGKILL)  # no chance to shut down: the kernel's death signal
    assert wait_until(lambda: not any(alive(pid) for pid in pids.values()), 10)
