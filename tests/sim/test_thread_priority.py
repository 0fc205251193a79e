"""The physics thread's SCHED_FIFO request, as ros2_control_node makes it (no ROS)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from sim_helpers import may_use_fifo

from simops_core.thread_priority import schedule_fifo


def in_thread(priority: int) -> tuple[tuple[bool, str], int, int]:
    """schedule_fifo(priority) on a new thread: its result, the thread's policy and priority."""
    seen: list = []

    def run() -> None:
        result = schedule_fifo(priority, 'physics thread', 'thread_priority')
        seen.append((result, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return seen[0]


def test_the_thread_runs_fifo_at_the_priority_and_no_other_thread_does() -> None:
    (fifo, line), policy, priority = in_thread(50)
    if may_use_fifo(50):
        assert fifo and (policy, priority) == (os.SCHED_FIFO, 50), line
        assert line == 'physics thread SCHED_FIFO at priority 50'
    else:
        assert not fifo and policy == os.SCHED_OTHER and 'ulimit -r' in line, line
    assert os.sched_getscheduler(0) == os.SCHED_OTHER   # the calling thread only


def test_priority_0_leaves_the_default_scheduler() -> None:
    (fifo, line), policy, _ = in_thread(0)
    assert not fifo and policy == os.SCHED_OTHER and 'thread_priority 0' in line


@pytest.mark.parametrize('priority', [-1, 100])
def test_a_priority_outside_linux_range_is_refused(priority: int) -> None:
    with pytest.raises(ValueError, match='outside 0-99'):
        schedule_fifo(priority, 'physics thread', 'thread_priority')


def test_a_refusal_is_one_line_and_the_thread_runs_on() -> None:
    """Without the right (no CAP_SYS_NICE, RLIMIT_RTPRIO 0) the kernel refuses: one line
    that says how to allow it, and the thread stays under the default scheduler."""
    # imported before the user changes: nobody may not read the checkout (a 0700 tmp dir)
    script = ('import os, resource\n'
              'from simops_core.thread_priority import schedule_fifo\n'
              'resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))\n'
              'if os.geteuid() == 0:\n'
              '    os.setuid(65534)   # drops every capability, CAP_SYS_NICE too\n'
              'fifo, line = schedule_fifo(50, "physics thread", "thread_priority")\n'
              'print(fifo, os.sched_getscheduler(0) == os.SCHED_OTHER)\n'
              'print(line)\n')
    result = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == 'False True', result.stdout
    assert second.startswith('could not schedule the physics thread SCHED_FIFO at priority 50')
    assert 'ulimit -r' in second and 'thread_priority' in second
