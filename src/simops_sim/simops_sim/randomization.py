"""Domain randomisation as a SimParams sampler.

Randomised physics thus takes the one ``apply_sim_params`` code path that fitted physics takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simops_core.sim_params import JointParams, ObjectParams, SimParams


@dataclass(frozen=True)
class Randomization:
    """Uniform sampling ranges.

    Joint, mass and friction entries are (low, high) factors on the base value; the command
    delay range is in s and replaces the base delay.
    """

    damping: tuple[float, float] = (0.7, 1.3)
    armature: tuple[float, float] = (0.8, 1.2)
    frictionloss: tuple[float, float] = (0.5, 1.5)
    kp: tuple[float, float] = (0.9, 1.1)
    kv: tuple[float, float] = (0.9, 1.1)
    body_mass_scale: tuple[float, float] = (0.95, 1.05)
    object_mass: tuple[float, float] = (0.5, 2.0)
    object_friction: tuple[float, float] = (0.6, 1.4)
    command_delay: tuple[float, float] = (0.0, 0.004)


def randomize_sim_params(base: SimParams, rng: np.random.Generator,
                         ranges: Randomization | None = None) -> SimParams:
    """Sample physics around ``base``, which must be fully set (see ``nominal_sim_params``).

    Draws happen in a fixed order (joints in ``base.joints`` order, fields in declaration
    order, then bodies, object, delay), so one seed gives one sample.
    """
    ranges = ranges or Randomization()

    def scaled(value: float | None, bounds: tuple[float, float]) -> float | None:
        return None if value is None else float(value * rng.uniform(*bounds))

    joints = {name: JointParams(**{key: scaled(getattr(joint, key), getattr(ranges, key))
                                   for key in ('damping', 'armature', 'frictionloss', 'kp',
                                               'kv')})
              for name, joint in base.joints.items()}
    scales = {name: float(scale * rng.uniform(*ranges.body_mass_scale))
              for name, scale in base.body_mass_scale.items()}
    obj = ObjectParams(mass=scaled(base.object.mass, ranges.object_mass),
                       friction=scaled(base.object.friction, ranges.object_friction))
    return SimParams(joints=joints, command_delay=float(rng.uniform(*ranges.command_delay)),
                     body_mass_scale=scales, object=obj,
                     provenance={**base.provenance, 'randomized': True})
