"""torch runs a thread's operators on that thread alone: no OpenMP worker starts.

The policy node infers on its control thread and the simulator runs a learned sensor model
on its physics thread, both SCHED_FIFO where permitted; a worker either starts inherits
that priority and spin-waits after every operator (simops_core.torch_threads).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from simops_core.policy_card import load_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_core.torch_threads import run_torch_ops_on_this_thread
from simops_policy.model import load_policy
from simops_sim.sensor_model import SensorModel

REPO = Path(__file__).resolve().parents[2]
WINDOW, JOINTS = 40, 7   # a 40 ms sensor model at 1 kHz on an arm's joints


def threads_started(work: Callable[[], None]) -> set[int]:
    """The kernel's ids of the threads that appeared while ``work`` ran on a new thread."""
    seen: dict[str, set[int]] = {}

    def run() -> None:
        seen['before'] = set(map(int, os.listdir('/proc/self/task')))
        for _ in range(20):
            work()
        seen['after'] = set(map(int, os.listdir('/proc/self/task')))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return seen['after'] - seen['before']


def test_a_thread_that_asks_runs_its_operators_alone() -> None:
    layer = torch.nn.Linear(256, 256)
    batch = torch.randn(64, 256)

    def work() -> None:
        run_torch_ops_on_this_thread()
        with torch.inference_mode():
            layer(batch).tanh().sum()

    assert threads_started(work) == set()


def test_a_policy_infers_on_the_calling_thread_alone() -> None:
    spec = load_robot_spec('fr3')
    policy = REPO / 'models/policy/fr3_reach.pt'
    card = load_policy_card(policy.with_suffix('.yaml'), spec.joint_names, spec.arm_joints)
    model = load_policy(policy, card)   # loads and dry-runs on this thread
    observation = np.zeros(card.observation_size, dtype=np.float32)
    assert threads_started(lambda: model.infer(observation)) == set()


def test_a_learned_sensor_model_runs_on_the_calling_thread_alone() -> None:
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * WINDOW * JOINTS, 64),
                              torch.nn.Tanh(), torch.nn.Linear(64, JOINTS)).double()
    model = SensorModel(Path('mlp.pt'), '0' * 64, WINDOW, 0.001, np.full((3, JOINTS), -1.0),
                        np.ones((3, JOINTS)), torch.jit.script(mlp).eval())
    history = np.zeros((2, 3, WINDOW, JOINTS))   # two arms in one physics (fr3_duo)
    assert model(history).shape == (2, JOINTS)
    assert threads_started(lambda: model(history)) == set()
