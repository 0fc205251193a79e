"""What makes a training run reproducible: one torch thread and seeded random streams."""

from __future__ import annotations

import torch


def seeded_torch(seed: int) -> torch.Generator:
    """Use one torch thread, seed torch's global stream and return a generator seeded alike.

    Same seed and settings then give the same weights (multi-threaded reductions would not).
    """
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
