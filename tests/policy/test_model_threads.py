"""A policy model infers on the calling thread alone, whichever thread calls it.

The policy node loads its model on the main thread and infers on its control thread, which
runs SCHED_FIFO where permitted. An OpenMP worker started by that thread inherits its
priority and spin-waits after every operator: it must never start.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from simops_core.policy_card import load_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_policy.model import load_policy

REPO = Path(__file__).resolve().parents[2]


def task_ids() -> set[int]:
    """The kernel's ids of this process's threads."""
    return {int(tid) for tid in os.listdir('/proc/self/task')}


def test_inference_on_a_new_thread_starts_no_other_thread() -> None:
    spec = load_robot_spec('fr3')
    policy = REPO / 'models/policy/fr3_reach.pt'
    card = load_policy_card(policy.with_suffix('.yaml'), spec.joint_names, spec.arm_joints)
    model = load_policy(policy, card)   # loads and dry-runs on this thread
    observation = np.zeros(card.observation_size, dtype=np.float32)
    seen: dict[str, set[int]] = {}

    def control() -> None:
        seen['before'] = task_ids()
        for _ in range(20):
            model.infer(observation)
        seen['after'] = task_ids()

    thread = threading.Thread(target=control)
    thread.start()
    thread.join()
    assert seen['after'] - seen['before'] == set()
