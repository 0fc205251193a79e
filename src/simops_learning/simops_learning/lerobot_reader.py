"""LeRobot's own ``LeRobotDataset`` loader, beside the project's CPU torch (no rclpy).

lerobot 0.4.4 is installed with --no-deps (requirements-nodeps.txt): its pins would replace
torch 2.13.0+cpu with a CUDA build. Its loader imports torchvision, whose PyPI wheel (0.28.0,
built for torch 2.13.0) carries CUDA-linked compiled ops that cannot load here; torchvision
then fails at import while registering fake kernels for those missing ops. :func:`open_dataset`
imports torchvision with that registration skipped, so its pure-Python parts (the transforms
LeRobot's loader uses) are real; datasets without images never call the ops.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import torch.library


class DatasetError(Exception):
    """A dataset that cannot be read, or LeRobot's loader missing; one line."""


def open_dataset(root: Path, cache: Path | None = None) -> Any:
    """LeRobot's ``LeRobotDataset`` of the local dataset ``root``, offline.

    ``cache``: where Hugging Face ``datasets`` keeps its Arrow cache (default: its own,
    ``HF_HOME``). Raises :class:`DatasetError` when ``root`` is not a LeRobot dataset or
    LeRobot is not installed.
    """
    if not (root / 'meta' / 'info.json').is_file():
        raise DatasetError(f'{root}: not a LeRobot dataset (no meta/info.json); write one '
                           'with simops-dataset export or simops-rollout')
    os.environ.setdefault('HF_HUB_OFFLINE', '1')
    if cache is not None:
        os.environ['HF_HOME'] = str(cache)
        os.environ['HF_DATASETS_CACHE'] = str(cache / 'datasets')
    real = torch.library.register_fake
    torch.library.register_fake = lambda *args, **kwargs: (lambda fn: fn)
    try:
        import torchvision  # noqa: F401
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as exc:
        raise DatasetError(f'LeRobot\'s dataset loader is not installed ({exc}); `make build` '
                           'installs it (requirements-lerobot.txt, requirements-nodeps.txt)'
                           ) from None
    finally:
        torch.library.register_fake = real
    root_logger = logging.getLogger()
    level = root_logger.level
    root_logger.setLevel(logging.ERROR)   # its video-decoder notice: these frames are numbers
    try:
        return LeRobotDataset(f'local/{root.name}', root=root)
    except Exception as exc:  # LeRobot raises many kinds on a damaged dataset
        first = str(exc).splitlines()[0] if str(exc) else ''
        raise DatasetError(f'{root}: LeRobot cannot load it: {type(exc).__name__}: {first}'
                           ) from None
    finally:
        root_logger.setLevel(level)


def dataset_sha256(root: Path) -> str:
    """SHA-256 over a dataset's files: each relative path, then its bytes, in path order.

    Hidden files and folders (caches) are left out, so a copy hashes the same anywhere.
    """
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob('*') if p.is_file()
                   and not any(part.startswith('.') for part in p.relative_to(root).parts))
    for file in files:
        digest.update(file.relative_to(root).as_posix().encode() + b'\0')
        with file.open('rb') as stream:
            for block in iter(lambda: stream.read(1 << 20), b''):
                digest.update(block)
    return digest.hexdigest()
