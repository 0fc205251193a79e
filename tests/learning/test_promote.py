"""simops-promote seals only a PASS of exactly this policy against exactly this calibration."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ros_helpers import REPO, installed_executable

from simops_core.promotion import check_deployable, read_records, record_path

SHIPPED = REPO / 'models/policy'


def promote(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(installed_executable('simops_learning', 'simops-promote')),
                           *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)


def test_a_pass_is_sealed_and_anything_else_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / 'reach.pt'
    shutil.copy(SHIPPED / 'fr3_reach.pt', policy)
    shutil.copy(SHIPPED / 'fr3_reach.yaml', tmp_path / 'reach.yaml')
    report = json.loads((SHIPPED / 'validation.json').read_text())
    failed = tmp_path / 'failed.json'
    failed.write_text(json.dumps({**report, 'verdict': 'fail'}))
    result = promote('--policy', policy, '--report', failed)
    assert result.returncode == 4 and 'the verdict is FAIL, not PASS' in result.stderr
    fit = tmp_path / 'fit.yaml'
    fit.write_text('version: 1\n')
    result = promote('--policy', policy, '--report', SHIPPED / 'validation.json',
                     '--sim-params', fit)
    assert result.returncode == 2 and 'was gated against the nominal model, not' in (
        result.stderr), result.stderr
    other = tmp_path / 'other.json'
    other.write_text(json.dumps({**report, 'sha256': '0' * 64}))
    result = promote('--policy', policy, '--report', other)
    assert result.returncode == 2 and 'gated another file than' in result.stderr
    assert not record_path(policy).exists()   # nothing written so far

    result = promote('--policy', policy, '--report', SHIPPED / 'validation.json',
                     '--pipeline', REPO / 'config/topics.yaml')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('promoted reach.pt (sha256 4e3e5ba88dae) against the '
                                    'nominal model')
    (record,) = read_records(record_path(policy))
    assert record.sha('pipeline') and record.sha('gate_report')
    assert len(record.entry['cells']) == len(report['configs'])
    assert check_deployable(policy, tmp_path / 'reach.yaml', None) == record
