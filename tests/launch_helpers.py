"""Helpers for tests that run ``simops-launch`` (the node graph) end to end over DDS."""

from __future__ import annotations

import os
import re

import numpy as np
from geometry_msgs.msg import PoseStamped
from policy_helpers import SPEC
from ros_helpers import NodeProcess, wait_until

STARTUP = 60.0             # s for every node to come up on two shared cores
REACH_TIMEOUT = 40.0       # s of wall time for the policy to reach the goal
GOAL = np.array([0.5, 0.15, 0.3])    # m in the base frame, inside the training workspace
FAR_GOAL = np.array([0.35, -0.25, 0.15])


def node_pids(output: str) -> dict[str, int]:
    """The node pids the runner reports (``[simops-launch] started sim (pid 123)``).

    Nodes that share a name are labelled with their namespace (``left/policy``).
    """
    started = r'\[simops-launch\] started ([\w/]+) \(pid (\d+)\)'
    return {m[1]: int(m[2]) for m in re.finditer(started, output)}


def group_alive(pgid: int) -> bool:
    """Whether any process is left in the process group (each node leads its own)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def goal_message(position: np.ndarray, frame: str = SPEC.base_frame) -> PoseStamped:
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
    msg.pose.orientation.w = 1.0
    return msg


def distance(pose: PoseStamped, goal: np.ndarray) -> float:
    p = pose.pose.position
    return float(np.linalg.norm([p.x - goal[0], p.y - goal[1], p.z - goal[2]]))


def stop_cleanly(proc: NodeProcess) -> str:
    """Ctrl-C the runner; check that every node exited 0 and no process is left."""
    pids = node_pids(proc.output)
    assert proc.stop(timeout=30) == 0, proc.output[-3000:]
    out = proc.log_path.read_text()
    assert '[simops-launch] SIGINT received; shutting down' in out
    assert 'sending SIGTERM' not in out and 'SIGKILL' not in out, out[-3000:]
    for name in pids:
        assert f'[simops-launch] {name} exited with code 0' in out, out[-3000:]
    assert wait_until(lambda: not any(group_alive(pid) for pid in pids.values()), 5), pids
    return out
