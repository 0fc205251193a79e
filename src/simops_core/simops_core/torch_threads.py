"""torch's operators on the thread that calls them, never on workers it starts (no rclpy).

torch's CPU build runs an operator's parallel regions on OpenMP threads, and OpenMP keeps
its thread count per thread: ``torch.set_num_threads(1)`` on one thread leaves a thread
started later at OpenMP's default, one per core. That thread's first operator then starts
a worker, which spin-waits after every parallel region, and which inherits the starting
thread's scheduling. The threads that run torch here are control loops at SCHED_FIFO
(:mod:`simops_core.thread_priority`): the policy node's control thread, the simulator's
physics thread through a learned sensor model. Their workers spun at real-time priority,
ahead of every ordinary thread, the DDS threads that deliver joint states among them: in
the two-arm launch a policy held on a 110 ms old joint state (CHANGELOG.md; the two-arm
row of docs/performance.md).
"""

from __future__ import annotations

import threading

_DONE = threading.local()   # ``done``: this thread's operators run on it alone


def run_torch_ops_on_this_thread() -> None:
    """Make torch run the calling thread's operators on that thread alone (once per thread)."""
    if getattr(_DONE, 'done', False):
        return
    import torch  # lazily: only threads that run torch need it

    torch.set_num_threads(1)
    _DONE.done = True
