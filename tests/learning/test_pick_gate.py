"""The pick-and-place gate, re-run on a reduced grid: the shipped policy passes, and the same
policy with its hand held open (bench/pick_gate_ablation.py's ablation) fails.

The grid keeps the full gate's corners (object friction 0.3 and 1.5, object mass 0.5x and
2x, command delay 0 and 3 periods), 8 configurations of 5 episodes each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ros_helpers import REPO

from simops_core.command_line import EXIT_OK
from simops_learning.validate import EXIT_FAIL

sys.path.insert(0, str(REPO / 'bench'))
from pick_gate_ablation import SHIPPED, write_open_hand

GRID = ('friction=0.3,1.5', 'object_mass=0.5,2', 'delay=0,3')


def gate(policy: Path, out: Path) -> tuple[int, dict]:
    """simops-validate on the reduced grid: (exit code, validation.json)."""
    run = subprocess.run(
        [str(REPO / '.venv/bin/simops-validate'), '--policy', str(policy), '--grid', *GRID,
         '--episodes', '5', '--workers', '2', '--out', str(out)],
        capture_output=True, text=True, timeout=900, check=False, cwd=REPO)
    assert run.returncode in (EXIT_OK, EXIT_FAIL), run.stderr[-3000:]
    return run.returncode, json.loads((out / 'validation.json').read_text())


@pytest.mark.slow
def test_the_shipped_pick_policy_passes_and_its_open_hand_ablation_fails(
        tmp_path: Path) -> None:
    code, report = gate(SHIPPED, tmp_path / 'shipped')
    assert code == EXIT_OK and report['verdict'] == 'pass', report['verdict']
    assert len(report['configs']) == 8
    code, report = gate(write_open_hand(tmp_path / 'open_hand'), tmp_path / 'ablation')
    assert code == EXIT_FAIL and report['verdict'] == 'fail', report['verdict']
    assert report['mean_success'] == 0.0
