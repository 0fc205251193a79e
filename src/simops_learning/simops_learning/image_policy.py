"""A policy that takes a camera image: the reach policy plus a small CNN on the wrist image.

``python -m simops_learning.image_policy [--out models/policy/fr3_reach_wrist_cnn.pt]``
writes the TorchScript model and its card (an ``observation.images`` term for the wrist
camera, 64 x 48, ImageNet normalisation, ``max_age`` 0.2 s).

:class:`ImagePolicy` is ``reach(observation) + head(cnn(image))``: the shipped reach policy,
and a CNN of two strided convolutions and a global average pool whose linear head starts at
zero. Untrained, it moves the arm exactly as the reach policy does, while the policy node
receives, resizes, normalises and infers on every image: what it shows is the image path's
plumbing and its cost (``bench/control_loop.py``), not visual skill. Training the CNN (from
``simops-dataset`` videos) changes the weights, never the interface.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import yaml
from torch import nn

from simops_core.camera_rig import load_cameras
from simops_core.policy_card import file_sha256

BASE = 'models/policy/fr3_reach.pt'
OUT = 'models/policy/fr3_reach_wrist_cnn.pt'
CAMERA = 'wrist'
WIDTH, HEIGHT = 64, 48
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]   # ImageNet's, per channel
MAX_AGE = 0.2   # s: four control periods, six frames at 30 Hz


class ImagePolicy(nn.Module):
    """``base(observation) + head(features(image))``; see the module docstring.

    ``observation`` (batch, card.observation_size) float32; ``image`` (batch, 3, 48, 64)
    float32, normalised; returns the raw action (batch, card.action.size).
    """

    def __init__(self, base: nn.Module, action_size: int) -> None:
        super().__init__()
        self.base = base
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(32, action_size)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, observation: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        """The raw action of one observation and one image per batch row."""
        return self.base(observation) + self.head(self.features(image))


def build(out: Path, base: Path, seed: int = 0) -> Path:
    """Write the image policy at ``out`` and its card beside it; return the card's path."""
    card = yaml.safe_load(base.with_suffix('.yaml').read_text())
    torch.manual_seed(seed)
    module = ImagePolicy(torch.jit.load(str(base)), len(card['action']['joints'])
                         + bool(card['action']['gripper']))
    torch.jit.script(module.eval()).save(str(out))
    card['observation']['images'] = [{
        'topic': load_cameras().topics(CAMERA).color, 'width': WIDTH, 'height': HEIGHT,
        'mean': MEAN, 'std': STD, 'max_age': MAX_AGE}]
    card['sha256'] = file_sha256(out)
    card['training'] = {
        'framework': f'torch {torch.__version__}',
        'algorithm': f'untrained CNN branch (zero head) over {base.name}',
        'base_sha256': file_sha256(base), 'seed': seed}
    path = out.with_suffix('.yaml')
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    """Write the model and card; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default=OUT, help='model path (.pt); the card goes beside it')
    parser.add_argument('--base', default=BASE, help='the reach policy the CNN is added to')
    args = parser.parse_args(argv)
    card = build(Path(args.out), Path(args.base))
    print(f'wrote {args.out} and {card}')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
