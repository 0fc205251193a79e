"""Shared pieces of the simops_learning tests: the shipped policy and small env factories."""

from __future__ import annotations

from pathlib import Path

from ros_helpers import REPO

POLICY = REPO / 'models' / 'policy' / 'fr3_reach.pt'
CARD = POLICY.with_suffix('.yaml')
EXPORTED = POLICY.with_suffix('.pt2')
EXPORTED_CARD = POLICY.with_name('fr3_reach.pt2.yaml')


def shipped_paths() -> tuple[Path, Path]:
    """The shipped TorchScript policy and its card."""
    return POLICY, CARD
