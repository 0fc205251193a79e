"""The pick-and-place gate on a policy that must fail it: the shipped one, its hand disabled.

Wraps ``models/policy/fr3_pick_place.pt`` so that its gripper command is always +1 (open),
writes the wrapped TorchScript file and its card (the shipped card with the new file's
sha256) to ``--out``, and runs ``simops-validate --task pick_place`` on it over the full
grid. The report (``validation.md`` with the heat map and the worst cells) lands in
``--out``; the verdict is printed. Exit code: simops-validate's.

    .venv/bin/python bench/pick_gate_ablation.py [--episodes 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import torch
import yaml

from simops_core.policy_card import file_sha256

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / 'models/policy/fr3_pick_place.pt'
OUT = REPO / 'models/policy/fr3_pick_place_validation/ablation_no_gripper'


class OpenHand(torch.nn.Module):
    """``inner``'s action with the gripper command (the last) held at +1, open."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Raw action (B, 8) for observations (B, observation size)."""
        action = self.inner(observation)
        return torch.cat([action[:, :-1], torch.ones_like(action[:, -1:])], dim=1)


def write_open_hand(out: Path) -> Path:
    """Write the wrapped policy and its card into ``out``; return the policy path."""
    out.mkdir(parents=True, exist_ok=True)
    policy = out / 'fr3_pick_place_open_hand.pt'
    torch.jit.script(OpenHand(torch.jit.load(str(SHIPPED)))).save(str(policy))
    card = yaml.safe_load(SHIPPED.with_suffix('.yaml').read_text())
    card['sha256'] = file_sha256(policy)
    card['training'] = {**card['training'], 'ablation': 'gripper held open (+1)'}
    policy.with_suffix('.yaml').write_text(yaml.safe_dump(card, sort_keys=False))
    return policy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--episodes', type=int, default=10, help='per configuration')
    parser.add_argument('--out', type=Path, default=OUT)
    args = parser.parse_args()
    out = args.out.resolve()
    policy = write_open_hand(out)
    # paths relative to the workspace, so the report reads the same on every clone
    return subprocess.run(
        [str(REPO / '.venv/bin/simops-validate'), '--task', 'pick_place', '--policy',
         os.path.relpath(policy, REPO), '--episodes', str(args.episodes), '--workers', '2',
         '--out', os.path.relpath(out, REPO)], check=False, cwd=REPO).returncode


if __name__ == '__main__':
    sys.exit(main())
