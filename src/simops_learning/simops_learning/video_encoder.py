"""Camera streams into MP4 files as LeRobot writes them, through PyAV (no rclpy).

LeRobot's defaults (``lerobot.datasets.video_utils.encode_video_frames``): AV1 (libsvtav1),
yuv420p, a keyframe every 2 frames, CRF 30. Frame ``i`` is presented at
``timestamp[i]`` (the frame table's, s), so a dropped frame leaves the same gap in the video
as in the table and LeRobot's decoder finds every frame at its timestamp.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

CODEC = 'libsvtav1'
PIX_FMT = 'yuv420p'
OPTIONS = {'g': '2', 'crf': '30'}
STATS_EVERY = 10   # frames between the frames sampled for the image statistics


class VideoError(ValueError):
    """A stream cannot be encoded (size, frame count)."""


@dataclass
class ImageStats:
    """Per-channel statistics of sampled frames, pixel values scaled to [0, 1]."""

    count: int = 0
    total: np.ndarray = field(default_factory=lambda: np.zeros(3))
    squares: np.ndarray = field(default_factory=lambda: np.zeros(3))
    low: np.ndarray = field(default_factory=lambda: np.ones(3))
    high: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def add(self, image: np.ndarray) -> None:
        """Take one (H, W, 3) uint8 frame."""
        pixels = image.reshape(-1, 3) / 255.0
        self.count += pixels.shape[0]
        self.total += pixels.sum(axis=0)
        self.squares += (pixels ** 2).sum(axis=0)
        self.low = np.minimum(self.low, pixels.min(axis=0))
        self.high = np.maximum(self.high, pixels.max(axis=0))

    def merge(self, other: ImageStats) -> None:
        """Add ``other``'s samples to these."""
        self.count += other.count
        self.total += other.total
        self.squares += other.squares
        self.low = np.minimum(self.low, other.low)
        self.high = np.maximum(self.high, other.high)

    def as_lerobot(self) -> dict[str, list[list[list[float]]] | list[int]]:
        """LeRobot's stats.json entry of an image feature: (3, 1, 1) per statistic."""
        mean = self.total / max(self.count, 1)
        std = np.sqrt(np.maximum(self.squares / max(self.count, 1) - mean ** 2, 0.0))

        def shaped(values: np.ndarray) -> list[list[list[float]]]:
            return [[[float(v)]] for v in values]

        return {'min': shaped(self.low), 'max': shaped(self.high), 'mean': shaped(mean),
                'std': shaped(std), 'count': [self.count]}


def encode_video(path: Path, frames: Iterable[np.ndarray], timestamp: np.ndarray, fps: float,
                 width: int, height: int) -> ImageStats:
    """Write ``frames`` ((H, W, 3) uint8, one per ``timestamp`` (s)) to ``path``; stats.

    Raises :class:`VideoError` when the frames do not match the timestamps or the size.
    """
    if width % 2 or height % 2:
        raise VideoError(f'{width}x{height} cannot be encoded as {PIX_FMT}; use even sizes')
    path.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault('SVT_LOG', '1')   # SVT-AV1 prints its configuration at info level
    stats = ImageStats()
    rate = Fraction(fps).limit_denominator(1000)
    ticks = np.round(np.asarray(timestamp) * float(rate)).astype(int)
    written = 0
    with av.open(str(path), mode='w') as container:
        stream = container.add_stream(CODEC, rate=rate, options=OPTIONS)
        stream.width, stream.height, stream.pix_fmt = width, height, PIX_FMT
        stream.time_base = 1 / rate
        for i, image in enumerate(frames):
            if i >= len(ticks):
                raise VideoError(f'{path.name}: more images than the {len(ticks)} frames')
            if image.shape != (height, width, 3):
                raise VideoError(f'{path.name}: image {i} is {image.shape}, expected '
                                 f'({height}, {width}, 3)')
            if i % STATS_EVERY == 0:
                stats.add(image)
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format='rgb24')
            frame.pts = int(ticks[i])
            container.mux(stream.encode(frame))
            written += 1
        container.mux(stream.encode())
    if written != len(ticks):
        raise VideoError(f'{path.name}: {written} images for {len(ticks)} frames')
    return stats


def count_frames(path: Path) -> int:
    """The number of frames a decoder gets from ``path``."""
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))
