"""A real arm's policy node runs only a promoted policy (simops_policy.loading).

The installed ``policy`` executable with ``require_promotion:=true`` (what the real_robot
profile sets) refuses a tampered policy, a tampered record and a calibration mismatch, each
with exit code 2 and one line on stderr; with ``allow_unvalidated:=true`` it runs the
policy and its diagnostics warn.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from policy_helpers import TOPICS
from ros_helpers import REPO, NodeProcess, RosProbe, installed_executable, wait_until

from simops_core.promotion import append_record, gate_entry, record_path

SHIPPED = REPO / 'models/policy'


@pytest.fixture
def promoted(tmp_path: Path) -> Path:
    """A promoted copy of the shipped reach policy (its card, its record, nominal model)."""
    policy = tmp_path / 'reach.pt'
    shutil.copy(SHIPPED / 'fr3_reach.pt', policy)
    shutil.copy(SHIPPED / 'fr3_reach.yaml', policy.with_suffix('.yaml'))
    report = SHIPPED / 'validation.json'
    append_record(record_path(policy), gate_entry(json.loads(report.read_text()), report,
                                                  policy, policy.with_suffix('.yaml'), None))
    return policy


def refusal(policy: Path, *params: str) -> str:
    """Run the node on ``policy`` as on a real arm; return its one line (it must exit 2)."""
    argv = [str(installed_executable('simops_policy', 'policy')), '--ros-args',
            '-p', f'model_path:={policy}', '-p', 'require_promotion:=true']
    for param in params:
        argv += ['-p', param]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert result.returncode == 2, lines
    assert len(lines) == 1, lines
    return lines[0]


def test_a_tampered_policy_is_refused(promoted: Path) -> None:
    with promoted.open('ab') as stream:
        stream.write(b'\0')
    line = refusal(promoted)
    assert 'reach.pt is not the file that passed the gate' in line, line


def test_a_tampered_record_is_refused(promoted: Path) -> None:
    records = record_path(promoted)
    entry = json.loads(records.read_text())
    entry['verdict'] = 'pass'
    entry['cells'][0]['success'] = 1.0
    records.write_text(json.dumps(entry) + '\n')
    assert 'record 1 was edited' in refusal(promoted)


def test_a_calibration_mismatch_is_refused(promoted: Path, tmp_path: Path) -> None:
    fit = tmp_path / 'fit.yaml'
    fit.write_text('version: 1\ncommand_delay: 0.004\n')
    line = refusal(promoted, f'calibration:={fit}')
    assert 'passed the gate against the nominal model, but the arm is calibrated with' in line
    assert f'simops-promote --policy {promoted} --sim-params {fit}' in line


def test_allow_unvalidated_runs_it_and_diagnostics_warn(ros_probe: RosProbe, promoted: Path,
                                                        tmp_path: Path) -> None:
    record_path(promoted).unlink()
    ros_probe.subscribe(TOPICS['diagnostics'].name, DiagnosticArray, 50)
    with NodeProcess.ros2_run('simops_policy', 'policy', '--ros-args',
                              '-p', f'model_path:={promoted}', '-p', 'require_promotion:=true',
                              '-p', 'allow_unvalidated:=true',
                              log_path=tmp_path / 'policy.log') as node:
        def warned() -> bool:
            return any(status.level == DiagnosticStatus.WARN
                       and 'UNVALIDATED policy: no promotion record' in status.message
                       for array in ros_probe.messages(TOPICS['diagnostics'].name)
                       for status in array.status if status.name.startswith('policy'))

        assert wait_until(warned, 30), node.output
        assert node.stop() == 0, node.output
