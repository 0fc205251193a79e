"""LeRobot's own ``LeRobotDataset`` for the tests (the project's reader, a test cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simops_learning.lerobot_reader import open_dataset


def lerobot_dataset(root: Path, cache: Path) -> Any:
    """``LeRobotDataset`` loaded from the local ``root``, offline, caching under ``cache``."""
    return open_dataset(root, cache)
