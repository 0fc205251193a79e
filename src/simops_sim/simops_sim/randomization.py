"""Domain randomisation, one model for the simulator node and the Gym envs (no rclpy).

:class:`Conditions` is one point of the domain: factors on the (calibrated) physics and the
command delay and observation noise. :meth:`Conditions.sim_params` turns it into a
:class:`~simops_core.sim_params.SimParams`, so randomised, validated and fitted physics all
reach MuJoCo through the one ``simops_sim.model_params.apply_sim_params`` path, and the delay
through the wrapper's command delay. :class:`DomainRandomization` holds the ranges, whose
one source is ``config/randomization.yaml`` (:func:`default_randomization`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.command_line import ConfigError
from simops_core.sim_params import ObjectParams, SimParams, merge_sim_params
from simops_core.yaml_fields import Fields, is_number, read_yaml

RANDOMIZATION_FILE = 'config/randomization.yaml'


class RandomizationError(ConfigError):
    """A randomisation file is missing or has a bad field."""

    hint = 'fix config/randomization.yaml'

@dataclass(frozen=True)
class Conditions:
    """One episode's physics, relative to the base (nominal or fitted) parameters.

    ``friction``: factor on joint frictionloss and the object's sliding friction; ``mass``:
    factor on every robot link mass and the object mass; ``damping``: factor on joint
    damping; ``servo_gain``: factor on the arm servos' kp and kv; ``delay``: control periods
    between a command and the actuators; ``obs_noise``: standard deviation of the noise on
    measured joint positions (rad; velocities get 10× that in rad/s); ``object_mass``: factor
    on the object's mass alone (on top of ``mass``: what a pick-and-place gate varies, the
    arm's own masses being identified).
    """

    friction: float = 1.0
    mass: float = 1.0
    damping: float = 1.0
    servo_gain: float = 1.0
    delay: int = 0
    obs_noise: float = 0.0
    object_mass: float = 1.0

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
        obj = ObjectParams(mass=_times(base.object.mass, self.mass * self.object_mass),
                           friction=_times(base.object.friction, self.friction))
        delay = (base.command_delay or 0.0) + self.delay * control_period
        # everything else of the base (controller, payload, end effector, a learned sensor
        # model) holds as it is
        return replace(base, joints=joints, command_delay=delay, body_mass_scale=scales,
                       object=obj, provenance={**base.provenance, 'conditions': self.as_dict()})

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
    ``ramp_times`` the policy-node ramp times (s) drawn uniformly per episode;
    ``object_mass`` the factor range on the object's mass alone.
    """

    friction: tuple[float, float]
    mass: tuple[float, float]
    damping: tuple[float, float]
    servo_gain: tuple[float, float]
    delay: int
    obs_noise: float
    ramp_times: tuple[float, ...]
    object_mass: tuple[float, float]

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
        # drawn last, so the draws above do not change with it
        return replace(conditions, object_mass=factor(self.object_mass)), ramp

    def sampler(self, nominal: SimParams, arm_joints: tuple[str, ...],
                mass_bodies: tuple[str, ...], period: float) -> Sampler:
        """Full-range draws around a base SimParams, as the simulator node's ``randomize``.

        ``nominal``: the model's physics, which fills what the base leaves out; the other
        arguments as :meth:`Conditions.sim_params` takes them.
        """
        def sample(base: SimParams, rng: np.random.Generator) -> SimParams:
            conditions, _ = self.sample(rng, 1.0)
            return conditions.sim_params(merge_sim_params(nominal, base), arm_joints,
                                         mass_bodies, period)
        return sample


Sampler = Callable[[SimParams, np.random.Generator], SimParams]
"""Draws physics around a base SimParams: (base, rng) -> SimParams."""


@cache
def default_randomization(task: str = 'randomization') -> DomainRandomization:
    """The ranges of ``config/randomization.yaml`` under ``task``.

    ``randomization``: the simulator node's and the reach task's; ``pick_place``.
    """
    return load_randomization(RANDOMIZATION_FILE, complete=True, key=task)


def load_randomization(path: str | Path, complete: bool = False,
                       key: str = 'randomization',
                       base: DomainRandomization | None = None) -> DomainRandomization:
    """The ``key`` mapping of a YAML file (e.g. the gate's ``dr_suggestion.yaml``).

    Missing fields keep ``base``'s (default: the config's ``randomization`` ranges; all must
    be present when ``complete``); raises :class:`RandomizationError` naming a bad field.
    """
    file, raw = read_yaml(path, RandomizationError, 'randomisation')
    check = Fields(str(file), RandomizationError)
    table = check.mapping(check.mapping(raw, '').get(key), key)
    return parse_randomization(table, str(path), complete, base)


def parse_randomization(table: Any, path: str, complete: bool = False,
                        base: DomainRandomization | None = None) -> DomainRandomization:
    """Validate a randomisation mapping (field → range) over ``base``'s ranges.

    ``base`` defaults to the config's ``randomization`` section.
    """
    check = Fields(path, RandomizationError)
    names = tuple(f.name for f in fields(DomainRandomization))
    check.known(check.mapping(table, 'randomization'), names, 'randomization')
    if complete:
        for name in names:
            if name not in table:
                check.fail(f'randomization.{name}', 'is missing')
    values: dict[str, Any] = {}
    for name, value in table.items():
        field = f'randomization.{name}'
        if name == 'delay':
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        elif name == 'obs_noise':
            ok = is_number(value) and value >= 0
        elif name == 'ramp_times':
            ok = isinstance(value, list) and bool(value) and all(
                is_number(v) and v >= 0 for v in value)
            value = tuple(float(v) for v in value) if ok else value
        else:
            ok = (isinstance(value, list) and len(value) == 2
                  and all(is_number(v) for v in value) and 0 < value[0] <= value[1])
            value = (float(value[0]), float(value[1])) if ok else value
        if not ok:
            check.fail(field, f'has a bad value {value!r}')
        values[name] = value
    if complete:
        return DomainRandomization(**values)
    return replace(base or default_randomization(), **values)
