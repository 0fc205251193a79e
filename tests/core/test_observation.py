"""Observation builder: term order, offset/scale/clip, history order, joints matched by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import SPEC, card_dict, write_card

from simops_core.observation import (
    JointIndex,
    MissingJointError,
    ObservationBuilder,
    RobotObservation,
)
from simops_core.policy_card import PolicyCard, load_policy_card, parse_policy_card

N = len(SPEC.joint_names)


def load(tmp_path: Path, **kwargs: object) -> PolicyCard:
    path = write_card(tmp_path / 'p.yaml', card_dict('ab' * 32, **kwargs))
    return load_policy_card(path, SPEC.joint_names, SPEC.arm_joints)


def builder(card: PolicyCard) -> ObservationBuilder:
    return ObservationBuilder(card, SPEC.joint_names, SPEC.gripper.joints)


def raw(seed: float) -> RobotObservation:
    return RobotObservation(
        joint_position=np.arange(N) * 0.1 + seed, joint_velocity=np.arange(N) * -1.0 - seed,
        object_position=np.array([0.5, 0.1, 0.02]) + seed,
        object_quaternion=np.array([0.0, 0.0, 0.6, 0.8]),
        goal_position=np.array([0.4, -0.2, 0.3]) - seed, last_action=np.linspace(-1, 1, 8))


def reference_frame(card: PolicyCard, obs: RobotObservation) -> np.ndarray:
    """Term by term, by name, the slow and obvious way."""
    joints = dict(zip(SPEC.joint_names, obs.joint_position, strict=True))
    velocities = dict(zip(SPEC.joint_names, obs.joint_velocity, strict=True))
    sources = {
        'joint_position': joints, 'joint_velocity': velocities,
        'gripper_width': {'width': sum(joints[j] for j in SPEC.gripper.joints)},
        'object_position': dict(zip('xyz', obs.object_position, strict=True)),
        'object_quaternion': dict(zip('xyzw', obs.object_quaternion, strict=True)),
        'goal_position': dict(zip('xyz', obs.goal_position, strict=True)),
        'last_action': dict(zip(card.action.fields, obs.last_action, strict=True)),
    }
    values = []
    for term in card.terms:
        for i, name in enumerate(term.fields):
            value = (sources[term.source][name] - term.offset[i]) * term.scale[i]
            values.append(min(max(value, term.clip[0]), term.clip[1]))
    return np.array(values, dtype=np.float32)


def test_frame_matches_the_card_term_by_term(tmp_path: Path) -> None:
    card = load(tmp_path, history=1)
    obs = builder(card).reset(raw(0.3))
    assert obs.dtype == np.float32 and obs.shape == (card.observation_size,)
    np.testing.assert_allclose(obs, reference_frame(card, raw(0.3)), rtol=1e-6)
    # joint velocity is scaled by 0.1 and clipped at ±5: -(0..8) - 0.3 → ≥ -5 after scaling
    assert obs[7:14].min() >= -5.0
    assert obs[14] == pytest.approx(10.0 * (raw(0.3).joint_position[7:9].sum()))


@pytest.mark.parametrize('order', ['oldest_first', 'newest_first'])
def test_history_order(tmp_path: Path, order: str) -> None:
    card = load(tmp_path, history=3)
    card = PolicyCard(**{**card.__dict__, 'history_order': order})
    build = builder(card)
    frames = [reference_frame(card, raw(s)) for s in (0.0, 1.0, 2.0, 3.0)]
    np.testing.assert_allclose(build.reset(raw(0.0)), np.concatenate([frames[0]] * 3),
                               rtol=1e-6)
    for k in (1, 2, 3):
        out = build.build(raw(float(k)))
    expected = frames[1:] if order == 'oldest_first' else frames[1:][::-1]
    np.testing.assert_allclose(out, np.concatenate(expected), rtol=1e-6)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=5, max_size=5),
       st.integers(1, 4), st.booleans())
def test_builder_equals_the_reference_for_random_states(seeds: list[float], history: int,
                                                        gripper: bool) -> None:
    card = parse_policy_card(card_dict('ab' * 32, history=history, gripper=gripper),
                             Path('card.yaml'), SPEC.joint_names, SPEC.arm_joints)
    build = builder(card)
    frames = []
    for k, seed in enumerate(seeds):
        obs = raw(seed)
        obs.last_action = obs.last_action[:card.action.size]
        frames.append(reference_frame(card, obs))
        out = build.reset(obs) if k == 0 else build.build(obs)
    window = ([frames[0]] * history + frames[1:])[-history:]
    np.testing.assert_allclose(out, np.concatenate(window), rtol=1e-5, atol=1e-6)


def test_joint_index_any_order_extra_joints_ignored() -> None:
    index = JointIndex(SPEC.arm_joints)
    names = ['extra', *reversed(SPEC.joint_names)]
    values = [99.0, *reversed(range(N))]
    out = index.select(names, values, np.zeros(7))
    np.testing.assert_array_equal(out, np.arange(7))
    np.testing.assert_array_equal(index.select(names, values, np.zeros(7)), np.arange(7))


def test_joint_index_missing_joint_or_value() -> None:
    index = JointIndex(SPEC.arm_joints)
    with pytest.raises(MissingJointError, match='fr3_joint4'):
        index.select([j for j in SPEC.arm_joints if j != 'fr3_joint4'], [0.0] * 6, np.zeros(7))
    with pytest.raises(MissingJointError, match='fr3_joint7'):
        index.select(list(SPEC.arm_joints), [0.0] * 6, np.zeros(7))
    with pytest.raises(MissingJointError):
        index.select([], [], np.zeros(7))
