"""Physics conditions of an episode, their randomisation and the curriculum schedule.

:class:`Conditions` is one point of the domain: factors on the (calibrated) physics and the
action delay and observation noise. :meth:`Conditions.sim_params` turns it into a
:class:`~simops_core.sim_params.SimParams`, so randomised, validated and fitted physics all
reach MuJoCo through the one ``simops_sim.physics.apply_sim_params`` path, and the action
delay through the wrapper's command delay (``delay_steps`` control periods).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simops_core.sim_params import ObjectParams, SimParams

ARM_DOF = 7


@dataclass(frozen=True)
class Conditions:
    """One episode's physics, relative to the base (nominal or fitted) parameters.

    ``friction``: factor on joint frictionloss and the object's sliding friction; ``mass``:
    factor on every robot link mass and the object mass; ``damping``: factor on joint
    damping; ``servo_gain``: factor on the arm servos' kp and kv; ``delay``: control periods
    between a command and the actuators; ``obs_noise``: standard deviation of the noise on
    measured joint positions (rad; velocities get 10× that in rad/s).
    """

    friction: float = 1.0
    mass: float = 1.0
    damping: float = 1.0
    servo_gain: float = 1.0
    delay: int = 0
    obs_noise: float = 0.0

    def sim_params(self, base: SimParams, arm_joints: tuple[str, ...],
                   mass_bodies: tuple[str, ...], control_period: float) -> SimParams:
        """``base`` (fully set, e.g. ``Physics.nominal`` merged with a fit) under these factors.

        ``control_period`` (s) converts ``delay`` into the wrapper's command delay, which
        adds to the base's (fitted) command delay.
        """
        joints = {}
        for name, joint in base.joints.items():
            changed = {'damping': _times(joint.damping, self.damping),
                       'frictionloss': _times(joint.frictionloss, self.friction)}
            if name in arm_joints:
                changed |= {'kp': _times(joint.kp, self.servo_gain),
                            'kv': _times(joint.kv, self.servo_gain)}
            joints[name] = replace(joint, **changed)
        scales = {name: base.body_mass_scale.get(name, 1.0) * self.mass for name in mass_bodies}
        obj = ObjectParams(mass=_times(base.object.mass, self.mass),
                           friction=_times(base.object.friction, self.friction))
        delay = (base.command_delay or 0.0) + self.delay * control_period
        return SimParams(joints=joints, command_delay=delay,
                         body_mass_scale=scales, object=obj,
                         provenance={**base.provenance, 'conditions': self.as_dict()})

    def as_dict(self) -> dict[str, float]:
        """Field name → value."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _times(value: float | None, factor: float) -> float | None:
    return None if value is None else float(value) * factor


@dataclass(frozen=True)
class DomainRandomization:
    """Uniform ranges at full curriculum level; the level shrinks them toward nominal.

    Factor ranges are (low, high) around 1; ``delay`` is the largest delay in control
    periods (integers 0..max drawn uniformly); ``obs_noise`` the largest noise std (rad);
    ``ramp_times`` the policy-node ramp times (s) drawn uniformly per episode.
    """

    friction: tuple[float, float] = (0.2, 2.0)
    mass: tuple[float, float] = (0.4, 2.5)
    damping: tuple[float, float] = (0.5, 2.0)
    servo_gain: tuple[float, float] = (0.7, 1.3)
    delay: int = 3
    obs_noise: float = 0.002
    ramp_times: tuple[float, ...] = (0.0, 2.0)

    def sample(self, rng: np.random.Generator, level: float) -> tuple[Conditions, float]:
        """Draw conditions and a ramp time at curriculum ``level`` in [0, 1] (1 = full).

        Each factor range is interpolated (in log space) between 1 and its full range.
        """
        level = float(np.clip(level, 0.0, 1.0))

        def factor(bounds: tuple[float, float]) -> float:
            low, high = np.log(bounds[0]) * level, np.log(bounds[1]) * level
            return float(np.exp(rng.uniform(low, high)))

        conditions = Conditions(
            friction=factor(self.friction), mass=factor(self.mass),
            damping=factor(self.damping), servo_gain=factor(self.servo_gain),
            delay=int(rng.integers(0, round(self.delay * level) + 1)),
            obs_noise=float(rng.uniform(0.0, self.obs_noise * level)))
        ramp = float(self.ramp_times[int(rng.integers(len(self.ramp_times)))])
        return conditions, ramp


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


def load_randomization(path: Path) -> DomainRandomization:
    """The ``randomization`` mapping of a YAML file (e.g. ``dr_suggestion.yaml``).

    Missing fields keep their defaults; raises ValueError naming a bad field.
    """
    try:
        raw: Any = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f'{path}: cannot read randomisation: {exc}') from None
    table = raw.get('randomization') if isinstance(raw, dict) else None
    return parse_randomization(table, str(path))


def parse_randomization(table: Any, path: str) -> DomainRandomization:
    """Validate a randomisation mapping (field → range); ``path`` names it in errors."""
    if not isinstance(table, dict):
        raise ValueError(f'{path}: needs a mapping under "randomization"')
    known = {f.name: f for f in fields(DomainRandomization)}
    values: dict[str, Any] = {}
    for name, value in table.items():
        if name not in known:
            raise ValueError(f'{path}: randomization.{name} is not one of {", ".join(known)}')
        if name in ('delay',):
            ok = isinstance(value, int) and value >= 0
        elif name == 'obs_noise':
            ok = isinstance(value, (int, float)) and value >= 0
        elif name == 'ramp_times':
            ok = isinstance(value, list) and value and all(
                isinstance(v, (int, float)) and v >= 0 for v in value)
            value = tuple(float(v) for v in value) if ok else value
        else:
            ok = (isinstance(value, list) and len(value) == 2
                  and all(isinstance(v, (int, float)) for v in value) and 0 < value[0] <= value[1])
            value = (float(value[0]), float(value[1])) if ok else value
        if not ok:
            raise ValueError(f'{path}: randomization.{name} has a bad value {value!r}')
        values[name] = value
    return DomainRandomization(**values)
