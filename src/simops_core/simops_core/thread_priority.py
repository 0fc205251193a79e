"""A control loop's scheduling: SCHED_FIFO, as ros2_control_node schedules its loop (no rclpy).

ros2_control_node runs the controller manager's read / update / write loop, where a real
arm's controllers and mujoco_ros2_control's MuJoCo step run, on a thread it asks the kernel
to schedule SCHED_FIFO at its ``thread_priority`` parameter (default 50), and it warns and
runs on when the kernel refuses (controller_manager/src/ros2_control_node.cpp:31 and
:107-121 at ros2_control 4.46.0, Jazzy; :93-107 at 2.54.0, Humble). The simulator's physics
thread is that loop, so it asks the same: on a loaded machine a thread under the default
scheduler waits its turn behind every busy process, and the simulated arm runs late (its
joint states late, its commands taken late), which a real arm's controller never does.
The policy node's control thread asks too (:func:`simops_ros.control_thread.raise_thread_priority`).
"""

from __future__ import annotations

import os

THREAD_PRIORITY_MAX = 99   # the highest SCHED_FIFO priority Linux has (sched(7))


def schedule_fifo(priority: int, thread: str, setting: str) -> tuple[bool, str]:
    """Schedule the calling thread SCHED_FIFO at ``priority`` (1-99); 0 leaves it alone.

    Returns whether the thread now runs SCHED_FIFO, and one line for the log naming
    ``thread`` (``physics thread``) and the parameter that sets ``priority``
    (``thread_priority``). The kernel
    refuses a process without CAP_SYS_NICE whose RLIMIT_RTPRIO (``ulimit -r``; ``rtprio`` in
    /etc/security/limits.conf) is below ``priority``: the thread then stays under the default
    scheduler, as ros2_control_node's does, and the line says how to allow it.
    """
    if not 0 <= priority <= THREAD_PRIORITY_MAX:
        raise ValueError(f'thread_priority {priority} is outside 0-{THREAD_PRIORITY_MAX}')
    if priority == 0:
        return False, f'{thread} under the default scheduler ({setting} 0)'
    try:
        # pid 0 is the calling thread on Linux (sched_setscheduler(2))
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        reason = getattr(exc, 'strerror', None) or str(exc)
        return False, (f'could not schedule the {thread} SCHED_FIFO at priority '
                       f'{priority} ({reason}): it runs under the default scheduler and may '
                       f'run late on a loaded machine; allow real-time priorities up to '
                       f'{priority} (ulimit -r, rtprio in /etc/security/limits.conf) or set '
                       f'{setting}:=0 to silence this')
    return True, f'{thread} SCHED_FIFO at priority {priority}'
