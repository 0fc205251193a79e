"""The curriculum: how fast the envs widen domain randomisation to its full ranges."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Curriculum:
    """Linear schedule of the randomisation level: 0 at ``start``, 1 at ``end`` (episodes)."""

    start: int = 0
    end: int = 1

    def level(self, episode: int) -> float:
        """The level for an episode index."""
        if self.end <= self.start:
            return 1.0
        return float(np.clip((episode - self.start) / (self.end - self.start), 0.0, 1.0))
