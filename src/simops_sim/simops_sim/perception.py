"""What a policy reads of the world, as an arm's driver and a perception stack deliver it.

The simulator knows the true joint state and object pose; a real arm's policy reads encoder
readings and an object pose that a perception stack estimated from images some time ago,
and that now and then never came. :class:`SensorNoise` says how much of each (the validation
profile's ``sensors`` in ``config/sim_profiles.yaml``); :class:`Perception` applies it once
per control period, from a generator of its own so the episode's other draws stay as they
were. No rclpy.

Frames and units: base frame, m, rad; quaternions as given (the caller's order).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass

import numpy as np

SENSOR_FIELDS = ('joint_noise', 'joint_latency', 'object_noise', 'object_latency',
                 'object_dropout')
VELOCITY_NOISE = 10.0   # velocity noise per unit of position noise (rad/s per rad), as obs_noise


@dataclass(frozen=True)
class SensorNoise:
    """The readings' errors.

    ``joint_noise`` rad: the std of each joint position's noise (velocities get
    :data:`VELOCITY_NOISE` times it, rad/s); ``joint_latency`` s: how long before the end of
    a control period the joint state the policy reads there was measured (the driver's
    publication and its transport; whole physics steps, less than a period: the env reads
    the state at that step); ``object_noise`` m: the std of the object
    position's noise on each axis; ``object_latency``: control periods the object pose
    arrives late; ``object_dropout``: the probability that a period's object pose never
    arrives, the last one that did being read again.
    """

    joint_noise: float = 0.0
    joint_latency: float = 0.0
    object_noise: float = 0.0
    object_latency: int = 0
    object_dropout: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        """The fields, as a card or a report records them."""
        return asdict(self)


class Perception:
    """One episode's readings under ``noise``, drawn from ``rng``."""

    def __init__(self, noise: SensorNoise, rng: np.random.Generator) -> None:
        self.noise = noise
        self._rng = rng
        self._poses: deque[tuple[np.ndarray, np.ndarray]] = deque(
            maxlen=noise.object_latency + 1)
        self._held: tuple[np.ndarray, np.ndarray] | None = None

    def joints(self, position: np.ndarray, velocity: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Read joint ``position`` (N,) rad and ``velocity`` (N,) rad/s: noisy copies."""
        std = self.noise.joint_noise
        if std <= 0.0:
            return position.copy(), velocity.copy()
        return (position + self._rng.normal(0.0, std, position.shape),
                velocity + self._rng.normal(0.0, VELOCITY_NOISE * std, velocity.shape))

    def object(self, position: np.ndarray, quaternion: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """This period's object pose as delivered.

        From the true ``position`` (3,) m and ``quaternion`` (4,): the pose of
        ``object_latency`` periods ago (the oldest there is early in an episode) with
        noise, or the last one delivered when this one dropped out.
        """
        self._poses.append((position.copy(), quaternion.copy()))
        dropped = (self._held is not None and self.noise.object_dropout > 0.0
                   and self._rng.random() < self.noise.object_dropout)
        if not dropped:
            seen, turned = self._poses[0]
            if self.noise.object_noise > 0.0:
                seen = seen + self._rng.normal(0.0, self.noise.object_noise, 3)
            self._held = (seen, turned.copy())
        return self._held[0].copy(), self._held[1].copy()
