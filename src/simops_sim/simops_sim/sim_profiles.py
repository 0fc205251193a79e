"""The training and the validation simulator: MuJoCo options per profile (no rclpy).

One model serves both; a :class:`SimProfile` sets :class:`mujoco.MjOption` fields
(timestep, solver iterations, friction cone), from ``config/sim_profiles.yaml``, their one
source. :func:`apply_profile` writes them into a compiled model before anything else
(:class:`~simops_sim.physics.Physics`, its command delay in steps) reads the model. A
profile may also name its sensors (:class:`~simops_sim.perception.SensorNoise`): what the
gate's envs read when asked to (``simops-validate --sensors``); and how often the envs
sample a task's safety figures (``safety_sample``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import mujoco

from simops_core.command_line import ConfigError
from simops_core.yaml_fields import Fields, named_tables
from simops_sim.perception import SENSOR_FIELDS, SensorNoise

SIM_PROFILES_FILE = 'config/sim_profiles.yaml'
TRAINING, VALIDATION = 'training', 'validation'
CONES = {'pyramidal': mujoco.mjtCone.mjCONE_PYRAMIDAL,
         'elliptic': mujoco.mjtCone.mjCONE_ELLIPTIC}
OPTION_FIELDS = ('timestep', 'iterations', 'ls_iterations', 'cone')
RECORDED_FIELDS = (*OPTION_FIELDS, 'safety_sample')


class SimProfileError(ConfigError):
    """A profile file is malformed, or a profile it lacks was asked for."""

    hint = 'fix config/sim_profiles.yaml'


@dataclass(frozen=True)
class SimProfile:
    """One simulator's MuJoCo options; ``None`` keeps the model's.

    ``timestep`` s; ``iterations`` and ``ls_iterations`` the solver's and its line search's;
    ``cone`` ``'pyramidal'`` or ``'elliptic'``; ``sensors``: the readings' errors when an env
    is asked for them (None: exact readings); ``safety_sample``: s between the envs' samples
    of a task's safety figures (peak joint speed, contact force), at most one a control
    period (None: the task's own rate).
    """

    name: str
    timestep: float | None = None
    iterations: int | None = None
    ls_iterations: int | None = None
    cone: str | None = None
    sensors: SensorNoise | None = None
    safety_sample: float | None = None

    def as_dict(self) -> dict[str, float | int | str]:
        """The options this profile sets (what a card or a report records)."""
        return {key: value for key in RECORDED_FIELDS
                if (value := getattr(self, key)) is not None}


def apply_profile(model: mujoco.MjModel, profile: SimProfile | str | None) -> mujoco.MjModel:
    """Write ``profile``'s options (a name: :func:`sim_profile`'s) into ``model``; return it.

    ``None`` leaves the model as its file wrote it.
    """
    if profile is None:
        return model
    if isinstance(profile, str):
        profile = sim_profile(profile)
    if profile.timestep is not None:
        model.opt.timestep = profile.timestep
    if profile.iterations is not None:
        model.opt.iterations = profile.iterations
    if profile.ls_iterations is not None:
        model.opt.ls_iterations = profile.ls_iterations
    if profile.cone is not None:
        model.opt.cone = CONES[profile.cone]
    return model


def steps_per_period(timestep: float, period: float, profile: str = '') -> int:
    """Physics steps in one control ``period`` (s); raise if they do not make it exactly."""
    steps = round(period / timestep)
    if steps < 1 or abs(steps * timestep - period) > 1e-9:
        raise SimProfileError(f'timestep {timestep:g} s{f" (profile {profile})" if profile else ""}'
                              f' does not divide the control period {period:g} s; choose one '
                              'that does')
    return steps


def profile_entry(name: str) -> dict[str, float | int | str]:
    """Profile ``name`` as a card or a report records it: its name and its options."""
    return {'name': name, **sim_profile(name).as_dict()}


def sim_profile(name: str) -> SimProfile:
    """Profile ``name`` of ``config/sim_profiles.yaml``; raise :class:`SimProfileError`."""
    profiles = load_sim_profiles()
    if name not in profiles:
        raise SimProfileError(f'{SIM_PROFILES_FILE} has no sim profile {name!r} (it has '
                              f'{", ".join(profiles)})')
    return profiles[name]


@cache
def load_sim_profiles(path: str | Path = SIM_PROFILES_FILE) -> dict[str, SimProfile]:
    """Every profile of the file at ``path``, by name; each field checked."""
    check, out = named_tables(path, SimProfileError, 'sim profiles', 'profiles',
                              (*RECORDED_FIELDS, 'sensors'), _profile)
    for name in (TRAINING, VALIDATION):
        if name not in out:
            check.fail(f'profiles.{name}', 'is missing')
    return out


def _profile(check: Fields, name: str, where: str, table: dict[str, Any]) -> SimProfile:
    """One table of the profiles file."""
    values: dict[str, Any] = {}
    if 'sensors' in table:
        values['sensors'] = _sensors(check, table['sensors'], f'{where}.sensors')
    for key in ('timestep', 'safety_sample'):
        if key in table:
            values[key] = check.number(table, key, f'{where}.{key}', 0.0, strict=True)
    for key in ('iterations', 'ls_iterations'):
        if key in table:
            value = table[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                check.fail(f'{where}.{key}', f'must be a whole number >= 1, got {value!r}')
            values[key] = value
    if 'cone' in table:
        values['cone'] = check.choice(table, 'cone', tuple(CONES), f'{where}.cone')
    return SimProfile(name, **values)


def _sensors(check: Fields, raw: object, where: str) -> SensorNoise:
    table = check.mapping(raw, where)
    check.known(table, SENSOR_FIELDS, where)
    values: dict[str, float | int] = {}
    for key in ('joint_noise', 'joint_latency', 'object_noise'):
        if key in table:
            values[key] = check.number(table, key, f'{where}.{key}', 0.0)
    if 'object_latency' in table:
        value = table['object_latency']
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            check.fail(f'{where}.object_latency', f'must be a whole number >= 0, got {value!r}')
        values['object_latency'] = value
    if 'object_dropout' in table:
        values['object_dropout'] = check.number(table, 'object_dropout',
                                                f'{where}.object_dropout', 0.0)
        if values['object_dropout'] >= 1.0:
            check.fail(f'{where}.object_dropout', 'is a probability below 1')
    return SensorNoise(**values)
