"""The shared executor (simops_core.executor): local processes and a real Ray cluster on
loopback, a worker killed mid-run retried without a missing or duplicated task, Ctrl-C
stopping every worker, and the fleet fit on top of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executor_tasks import die_once, square
from ros_helpers import REPO, installed_executable
from sysid_helpers import simulate, write_bag

from simops_core.executor import LocalExecutor, run_tasks

POLICY = REPO / 'models/policy/fr3_reach.pt'


def test_local_results_come_back_in_order_once_each() -> None:
    seen: list[int] = []
    items = [(i, 0.2 if i % 3 == 0 else 0.01) for i in range(12)]
    lines: list[str] = []
    results = run_tasks(LocalExecutor(2), square, items, progress=lines.append,
                        on_result=lambda index, _: seen.append(index))
    assert results == [(i, i * i) for i in range(12)]
    assert sorted(seen) == list(range(12))
    assert len(lines) == 12 and lines[-1].startswith('12/12 tasks')


def test_a_killed_local_worker_is_retried(tmp_path: Path) -> None:
    marker = tmp_path / 'killed'
    executor = LocalExecutor(2)
    results = executor.map(die_once, [(i, str(marker)) for i in range(8)])
    assert marker.exists()                    # the worker did die
    assert executor.restarts == 1
    assert [value for value, _ in results] == list(range(8))


def descendants(pid: int) -> set[int]:
    out = subprocess.run(['ps', '-e', '-o', 'pid=,ppid='], capture_output=True, text=True,
                         check=True).stdout.split()
    children: dict[int, list[int]] = {}
    for child, parent in zip(map(int, out[::2]), map(int, out[1::2]), strict=True):
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.ros_free
def test_ctrl_c_stops_every_worker(tmp_path: Path) -> None:
    exe = installed_executable('simops_learning', 'simops-validate')
    # 900 episodes: about a minute at the 15 episodes/s of an idle machine, so the Ctrl-C
    # lands mid-run (with 90 the run once ended, exit 0, before it)
    proc = subprocess.Popen([str(exe), '--policy', str(POLICY), '--grid', 'friction=0.5,1,1.5',
                             '--episodes', '300', '--workers', '2', '--out', str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.5)
        workers = descendants(proc.pid)
    assert len(workers) >= 2, 'the workers did not start'
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert 'every worker has been stopped' in err
    time.sleep(0.5)
    alive = [pid for pid in workers if os.path.exists(f'/proc/{pid}')
             and 'Z' not in Path(f'/proc/{pid}/stat').read_text().split()[2]]
    assert not alive


def unshare() -> list[str]:
    """A command prefix that runs a process in a private network namespace, or skip."""
    flags = ['--net'] if os.geteuid() == 0 else ['--net', '--map-root-user']
    probe = subprocess.run(['unshare', *flags, 'true'], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip('no private network namespace here (unshare); Ray must not listen on '
                    'other interfaces')
    return ['unshare', *flags]


@pytest.mark.slow
@pytest.mark.ros_free
def test_a_ray_cluster_runs_the_tasks_and_retries_a_killed_worker() -> None:
    """ray start --head, two worker CPUs, in a namespace whose only interface is loopback.

    Its own PID namespace too: ``ray stop`` ends every Ray process it sees in /proc, which
    on the host would include another test's ``--ray local`` cluster (it did, beside the
    Ray gate on the other xdist worker: "The task's local raylet died")."""
    result = subprocess.run([*unshare(), '--pid', '--fork', '--mount-proc', sys.executable,
                             str(REPO / 'tests/ray_cluster_check.py')],
                            capture_output=True, text=True, timeout=600, check=False,
                            cwd=REPO / 'tests')
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen['interfaces'] == ['lo'] and seen['started'] == 0
    assert seen['squares'] == [[i, i * i] for i in range(10)]
    assert seen['killed'] and seen['after_kill'] == list(range(8))


@pytest.mark.slow
@pytest.mark.ros_free
def test_the_gate_on_ray_local_gives_the_local_verdicts(tmp_path: Path) -> None:
    unshare()
    exe = installed_executable('simops_learning', 'simops-validate')
    common = [str(exe), '--policy', str(POLICY), '--grid', 'friction=0.5,1.5', 'delay=0,2',
              '--episodes', '4', '--seed', '1']
    reports = {}
    for name, extra in (('local', []), ('ray', ['--ray', 'local'])):
        run = subprocess.run([*common, '--out', str(tmp_path / name), *extra],
                             capture_output=True, text=True, timeout=600, check=False,
                             env=dict(os.environ, RAY_USAGE_STATS_ENABLED='0'))
        assert run.returncode in (0, 3, 4), run.stderr[-3000:]
        reports[name] = json.loads((tmp_path / name / 'validation.json').read_text())
    assert reports['ray']['verdict'] == reports['local']['verdict']
    assert reports['ray']['configs'] == reports['local']['configs']
    assert len(reports['ray']['configs']) == 4


@pytest.mark.slow
@pytest.mark.ros_free
def test_fit_fleet_fits_each_robot(tmp_path: Path) -> None:
    for robot, seed in (('arm_a', 0), ('arm_b', 1)):
        write_bag(tmp_path / 'fleet' / robot / 'excite', simulate(6.0, seed=seed))
    exe = installed_executable('simops_sysid', 'fit-fleet')
    result = subprocess.run([str(exe), str(tmp_path / 'fleet'), '--out', str(tmp_path / 'out'),
                             '--', '--skip-check', '--params', 'kp,kv'],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    for robot in ('arm_a', 'arm_b'):
        assert (tmp_path / 'out' / f'{robot}.yaml').is_file()
        assert f'{robot}' in result.stdout
    assert '2/2 tasks' in result.stderr
