"""LeRobot's own ``LeRobotDataset`` for the tests, beside the project's CPU torch.

lerobot 0.4.4 is installed with --no-deps (requirements-nodeps.txt): its pins would replace
torch 2.13.0+cpu with a CUDA build. Its loader imports torchvision, whose PyPI wheel (0.28.0,
built for torch 2.13.0) carries CUDA-linked compiled ops that cannot load here; torchvision
then fails at import while registering fake kernels for those missing ops. This helper
imports torchvision with that registration skipped, so its pure-Python parts (the
transforms LeRobot's loader uses) are real; datasets without images never call the ops.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch.library


def lerobot_dataset(root: Path, cache: Path) -> Any:
    """``LeRobotDataset`` loaded from the local ``root``, offline, caching under ``cache``."""
    os.environ['HF_HUB_OFFLINE'] = '1'
    os.environ['HF_HOME'] = str(cache)
    os.environ['HF_DATASETS_CACHE'] = str(cache / 'datasets')
    real = torch.library.register_fake
    torch.library.register_fake = lambda *args, **kwargs: (lambda fn: fn)
    try:
        import torchvision  # noqa: F401
    finally:
        torch.library.register_fake = real
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    return LeRobotDataset('simops/test', root=root)
