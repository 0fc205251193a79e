"""Turning a pick-and-place scene about the vertical: the network's inputs and the expert.

Behaviour cloning shows each demonstrated frame at random headings
(:func:`simops_learning.pick_network.turn_scene`). That is sound only if turning the cube
and the goal about the vertical through the grasp point turns the network's inputs as
``turn_scene`` does and the grasp expert's decision with them: both are checked here on
scenes of every phase, the turn written out independently as a rotation matrix.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from simops_core.robot_spec import load_robot_spec
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_expert import PHASES, PickExpert
from simops_learning.pick_network import PickPolicy, turn_scene
from simops_learning.pick_train import PickTrainConfig, new_policy

SCENES = 200


@pytest.fixture(scope='module')
def policy() -> PickPolicy:
    return new_policy(FR3PickPlaceEnv(), PickTrainConfig())


def scenes(policy: PickPolicy, rng: np.random.Generator) -> list[tuple[np.ndarray, ...]]:
    """(q, width, cube, goal) with the cube far from, near, under and in the hand."""
    home = np.array(load_robot_spec('fr3').home)
    out = []
    for k in range(SCENES):
        q = home + rng.uniform(-0.3, 0.3, 7)
        with torch.inference_mode():
            grasp = policy.law.grasp(torch.as_tensor(q, dtype=torch.float32)[None])[0][0]
        grasp = grasp.numpy().astype(float)
        reach = (0.3, 0.03, 0.012, 0.004)[k % 4]   # approach, descend, close and carry
        cube = grasp + rng.uniform(-reach, reach, 3) - np.array([0.0, 0.0, 0.02 * (k % 4 > 0)])
        width = rng.uniform(0.0, 0.08) if k % 4 < 3 else rng.uniform(0.03, 0.046)
        goal = np.array([*rng.uniform([0.3, -0.3], [0.7, 0.3]), rng.uniform(0.02, 0.25)])
        out.append((q, width, cube, goal))
    return out


def turned(point: np.ndarray, centre: np.ndarray, angle: float) -> np.ndarray:
    """``point`` turned by ``angle`` about the vertical through ``centre``."""
    c, s = np.cos(angle), np.sin(angle)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return centre + rotation @ (point - centre)


def test_turning_the_scene_turns_the_inputs_and_the_experts_step(policy: PickPolicy) -> None:
    rng = np.random.default_rng(7)
    expert = PickExpert(policy.law)
    quat = np.array([0.0, 0.0, 0.0, 1.0])
    phases = set()
    for q, width, cube, goal in scenes(policy, rng):
        angle = rng.uniform(0.0, 2 * np.pi)
        with torch.inference_mode():
            grasp = policy.law.grasp(torch.as_tensor(q, dtype=torch.float32)[None])[0][0]
        grasp = grasp.numpy().astype(float)
        cube2, goal2 = turned(cube, grasp, angle), turned(goal, grasp, angle)
        raw = torch.as_tensor(np.array([np.concatenate([q, cube, quat, goal, [width]]),
                                        np.concatenate([q, cube2, quat, goal2, [width]])]),
                              dtype=torch.float64)
        with torch.inference_mode():
            features = policy.features(raw.float())[0].double()
        step, gripper = expert.decide(q, width, cube, goal)
        phase = expert.phase
        step2, gripper2 = expert.decide(q, width, cube2, goal2)
        phases.add(phase)
        assert expert.phase == phase and gripper2 == gripper
        want_features, want_step = turn_scene(features[:1], torch.as_tensor(step)[None],
                                              torch.tensor([angle], dtype=torch.float64))
        assert torch.allclose(features[1:], want_features, atol=2e-6)
        np.testing.assert_allclose(step2, turned(step, np.zeros(3), angle), atol=1e-6)
        np.testing.assert_allclose(want_step[0].numpy(), step2, atol=1e-6)
    assert phases == set(PHASES)


def test_no_turn_is_the_identity() -> None:
    features, steps = torch.randn(5, 15), torch.randn(5, 3)
    same, same_steps = turn_scene(features, steps, torch.zeros(5))
    assert torch.equal(same, features) and torch.equal(same_steps, steps)
