"""Promotion records: the hash chain, the Wilson interval and the deployment rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from ros_helpers import REPO

from simops_core.promotion import (
    PromotionError,
    append_record,
    check_deployable,
    gate_entry,
    read_records,
    record_path,
    wilson_interval,
)

SHIPPED = REPO / 'models/policy'


@pytest.fixture
def promoted(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A copy of the shipped reach policy, its card and report, promoted (nominal model)."""
    policy, card = tmp_path / 'reach.pt', tmp_path / 'reach.yaml'
    shutil.copy(SHIPPED / 'fr3_reach.pt', policy)
    shutil.copy(SHIPPED / 'fr3_reach.yaml', card)
    report = tmp_path / 'validation.json'
    shutil.copy(SHIPPED / 'validation.json', report)
    append_record(record_path(policy), gate_entry(json.loads(report.read_text()), report,
                                                  policy, card, None))
    return policy, card, report


@pytest.mark.parametrize(('successes', 'episodes'), [(29, 30), (0, 30), (30, 30), (7, 12),
                                                     (1, 1)])
def test_wilson_interval_solves_its_quadratic(successes: int, episodes: int) -> None:
    """The interval's ends are the proportions pi with |p - pi| = z sqrt(pi (1 - pi) / n),
    solved here as the quadratic's roots (independent of the closed form under test)."""
    z, n, p = 1.959963984540054, episodes, successes / episodes
    roots = np.roots([1 + z * z / n, -(2 * p + z * z / n), p * p])
    low, high = wilson_interval(successes, episodes)
    np.testing.assert_allclose([low, high], sorted(np.clip(roots.real, 0.0, 1.0)), atol=1e-9)
    assert low <= p <= high


def test_the_shipped_policies_may_run_on_the_nominal_calibration() -> None:
    for name in ('fr3_reach', 'fr3_pick_place', 'panda_reach'):
        record = check_deployable(SHIPPED / f'{name}.pt', SHIPPED / f'{name}.yaml', None)
        assert record.verdict == 'pass'
        assert all(len(cell['wilson_95']) == 2 for cell in record.entry['cells'])


def test_a_promoted_policy_runs_and_every_change_is_refused_in_one_line(
        promoted: tuple[Path, Path, Path], tmp_path: Path) -> None:
    policy, card, _ = promoted
    assert check_deployable(policy, card, None).verdict == 'pass'
    fit = tmp_path / 'fit.yaml'
    fit.write_text('version: 1\ncommand_delay: 0.004\n')
    with pytest.raises(PromotionError, match=r'passed the gate against the nominal model, but '
                       r'the arm is calibrated with .*fit\.yaml') as caught:
        check_deployable(policy, card, fit)
    assert '\n' not in str(caught.value) and 'simops-promote' in str(caught.value)
    card.write_text(card.read_text() + '\n# edited\n')
    with pytest.raises(PromotionError, match=r'the card reach\.yaml changed'):
        check_deployable(policy, card, None)
    with policy.open('ab') as stream:
        stream.write(b'\0')
    with pytest.raises(PromotionError, match=r'reach\.pt is not the file that passed the gate'):
        check_deployable(policy, card, None)


def test_an_edited_removed_or_missing_record_is_detected(
        promoted: tuple[Path, Path, Path]) -> None:
    policy, card, report = promoted
    records = record_path(policy)
    append_record(records, gate_entry(json.loads(report.read_text()), report, policy, card,
                                      None))
    assert len(read_records(records)) == 2
    first, second = records.read_text().splitlines()
    entry = json.loads(first)
    entry['cells'][0]['success'] = 1.0   # a better number, by hand
    records.write_text(json.dumps(entry) + '\n' + second + '\n')
    with pytest.raises(PromotionError, match='record 1 was edited'):
        check_deployable(policy, card, None)
    records.write_text(second + '\n')
    with pytest.raises(PromotionError, match='record 1 does not follow record 0'):
        check_deployable(policy, card, None)
    records.write_text('not json\n')
    with pytest.raises(PromotionError, match='record 1 was edited'):   # nothing appended to it
        append_record(records, {'verdict': 'pass'})
    assert records.read_text() == 'not json\n'
    records.unlink()
    with pytest.raises(PromotionError, match=r'no promotion record at .*simops-promote'):
        check_deployable(policy, card, None)
