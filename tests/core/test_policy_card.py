"""Policy card schema: a valid card loads; every malformed field is named in the error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from policy_helpers import SPEC, card_dict, write_card

from simops_core.policy_card import CardError, file_sha256, load_policy_card


def load(path: Path) -> Any:
    return load_policy_card(path, SPEC.joint_names, SPEC.arm_joints)


def test_valid_card_loads(tmp_path: Path) -> None:
    card = load(write_card(tmp_path / 'p.yaml', card_dict('ab' * 32, history=3)))
    assert card.sha256 == 'ab' * 32
    assert card.frame_size == 7 + 7 + 1 + 3 + 4 + 3 + 8
    assert card.observation_size == 3 * card.frame_size
    assert card.action.fields == (*SPEC.arm_joints, 'gripper')
    assert card.terms[0].offset.tolist() == SPEC.home.tolist()
    assert card.terms[1].clip == (-5.0, 5.0)
    assert card.terms[2].clip[1] == float('inf')


def test_sha256_of_a_file(tmp_path: Path) -> None:
    (tmp_path / 'f').write_bytes(b'abc')
    assert file_sha256(tmp_path / 'f') == (
        'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')


def mutate(card: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    node = card
    keys = dotted.split('.')
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return card


@pytest.mark.parametrize(('field', 'value', 'named'), [
    ('version', 2, "'version'"),
    ('sha256', 'xyz', "'sha256'"),
    ('sha256', KeyError, "'sha256'"),
    ('control_rate', -1, "'control_rate'"),
    ('control_rate', 'fast', "'control_rate'"),
    ('observation.history', 0, "'observation.history'"),
    ('observation.history_order', 'sideways', "'observation.history_order'"),
    ('observation.terms', [], "'observation.terms'"),
    ('observation.terms.0.source', 'joint_torque', "'observation.terms[0].source'"),
    ('observation.terms.0.fields', ['fr3_joint9'], "'observation.terms[0].fields'"),
    ('observation.terms.0.fields', ['fr3_joint1', 'fr3_joint1'], "'observation.terms[0].fields'"),
    ('observation.terms.0.offset', [1.0, 2.0], "'observation.terms[0].offset'"),
    ('observation.terms.1.clip', [5.0, -5.0], "'observation.terms[1].clip'"),
    ('observation.terms.1.scale', 'big', "'observation.terms[1].scale'"),
    ('observation.terms.3.fields', ['q'], "'observation.terms[3].fields'"),
    ('action.joints', ['fr3_joint1'] * 7, "'action.joints'"),
    ('action.gripper', 'yes', "'action.gripper'"),
    ('action.scale', 0, "'action.scale'"),
    ('action.reference', 'desired', "'action.reference'"),
    ('training', KeyError, "'training'"),
])
def test_bad_field_is_named(tmp_path: Path, field: str, value: Any, named: str) -> None:
    path = write_card(tmp_path / 'p.yaml', mutate(card_dict('ab' * 32), field, value))
    with pytest.raises(CardError, match=named.replace('[', r'\[').replace(']', r'\]')) as info:
        load(path)
    assert str(path) in str(info.value)


def test_last_action_must_match_the_action_layout(tmp_path: Path) -> None:
    card = card_dict('ab' * 32, gripper=False)
    card['observation']['terms'][-1]['fields'].append('gripper')
    with pytest.raises(CardError, match='unknown last_action field'):
        load(write_card(tmp_path / 'p.yaml', card))


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(CardError, match='does not exist'):
        load(tmp_path / 'none.yaml')
    (tmp_path / 'bad.yaml').write_text('version: [1\n')
    with pytest.raises(CardError, match='cannot parse'):
        load(tmp_path / 'bad.yaml')
    (tmp_path / 'list.yaml').write_text('- 1\n')
    with pytest.raises(CardError, match='must be a mapping'):
        load(tmp_path / 'list.yaml')
