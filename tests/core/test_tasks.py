"""The task registry: one spelling per task, and every layer reads its meaning from it."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium
import pytest
import yaml

import simops_learning
from simops_bringup.arguments import declare_arguments
from simops_core.command_line import EXIT_CONFIG, UsageError
from simops_core.policy_card import CardError, parse_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_core.tasks import DEFAULT_TASK, TASK_NAMES, TASKS, resolve_task, task_named
from simops_core.topics import load_topics
from simops_learning import rollout_cli, validate
from simops_sim.randomization import default_randomization

REPO = Path(__file__).resolve().parents[2]
PICK = REPO / 'models/policy/fr3_pick_place.pt'
REACH = REPO / 'models/policy/fr3_reach.pt'


@pytest.mark.parametrize('name', TASK_NAMES)
def test_each_task_names_its_env_profile_pose_and_policy(name: str) -> None:
    task = TASKS[name]
    assert gymnasium.spec(task.env_id).entry_point.endswith(
        simops_learning.env_class(name).__name__)
    assert simops_learning.env_class(name).task == name
    default_randomization(task.randomization)   # the profile exists in randomization.yaml
    assert task.tracked in load_topics()
    assert (REPO / task.policy_path('fr3')).is_file()


def test_every_layer_offers_exactly_the_registered_tasks() -> None:
    schema = yaml.safe_load((REPO / 'config/parameters/recorder.yaml').read_text())
    assert tuple(schema['success_criterion']['choices']) == ('none', *TASK_NAMES)
    assert tuple(validate.GRIDS) == TASK_NAMES
    for profile in ('sim', 'real_robot'):
        task = next(a for a in declare_arguments(profile, 'joint_trajectory') if a.name == 'task')
        assert task.choices == TASK_NAMES and task.default == DEFAULT_TASK


def test_no_other_spelling_of_a_task_is_left() -> None:
    spellings = re.compile(r'pick-place|pick_and_place')
    files = [*REPO.glob('src/*/simops_*/**/*.py'), *REPO.glob('config/**/*.yaml'),
             *REPO.glob('bench/*.py'), REPO / 'README.md', *REPO.glob('docs/*.md')]
    assert [f.name for f in files if spellings.search(f.read_text())] == []


@pytest.mark.parametrize('card', sorted((REPO / 'models/policy').glob('*.yaml')),
                         ids=lambda p: p.name)
def test_each_shipped_card_names_its_task(card: Path) -> None:
    raw = yaml.safe_load(card.read_text())
    spec = load_robot_spec(raw['robot'])
    parsed = parse_policy_card(raw, card, spec.joint_names, spec.arm_joints)
    assert parsed.task == ('pick_place' if 'pick_place' in card.name else 'reach')


def test_a_card_with_an_unknown_task_is_refused() -> None:
    raw = yaml.safe_load((REPO / 'models/policy/fr3_reach.yaml').read_text())
    spec = load_robot_spec('fr3')
    with pytest.raises(CardError, match="field 'task' must be one of reach, pick_place"):
        parse_policy_card({**raw, 'task': 'pick-place'}, Path('c.yaml'), spec.joint_names,
                          spec.arm_joints)


def test_the_card_decides_and_a_contradicting_option_is_refused() -> None:
    assert resolve_task(None, 'pick_place').name == 'pick_place'
    assert resolve_task('pick_place', 'pick_place').name == 'pick_place'
    assert resolve_task('pick_place', None).name == 'pick_place'   # a card from before
    assert resolve_task(None, None).name == DEFAULT_TASK
    with pytest.raises(UsageError, match=r'c\.yaml is a pick_place policy, but --task says reach'):
        resolve_task('reach', 'pick_place', 'c.yaml')
    with pytest.raises(UsageError, match='unknown task'):
        task_named('stack')


def test_validate_and_rollout_refuse_a_task_the_card_contradicts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate.main(['--policy', str(PICK), '--task', 'reach']) == EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert err.startswith('simops-validate: error: ') and '\n' not in err
    assert 'is a pick_place policy, but --task says reach' in err
    assert rollout_cli.main(['--policy', str(REACH), '--task', 'pick_place',
                             '--out', str(tmp_path / 'd')]) == EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert 'is a reach policy, but --task says pick_place' in err and '\n' not in err
    assert not (tmp_path / 'd').exists()
