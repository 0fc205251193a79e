"""Excitation trajectories for identification: per-joint Fourier series around ``home``.

Each arm joint follows ``q_j(t) = home_j + s_j w(t) f_j(t)`` with ``f_j`` a finite Fourier
series (Swevers et al., "Optimal robot excitation and identification", IEEE T-RA 1997) of
fundamental period ``period`` s and ``harmonics`` harmonics with seeded random
coefficients, and ``w`` a quintic ramp from 0 to 1 over ``ramp`` s at the start and back at
the end, so the trajectory starts and ends at ``home`` at rest. ``s_j`` is the largest scale
for which the excursion, velocity and acceleration stay within ``fraction`` of the spec's
limits (excursion: of the room between ``home`` and the position limits minus ``margin``),
times :data:`HEADROOM` so that a safety layer configured with the same fraction never cuts.
Pure numpy; units rad, rad/s, rad/s^2; arrays (N, 7) in spec arm order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simops_core.command_line import ConfigError
from simops_core.policy_step import StepSettings
from simops_core.robot_spec import RobotSpec

HEADROOM = 0.9
# The k-th harmonic's coefficients are drawn with standard deviation k**-DECAY. The
# acceleration limit binds (at excite's 0.25 of the FR3's limits, for every joint but
# joint 4, whose home lies near a position limit) and the fast harmonics take most of it,
# so a steeper fall leaves the slow ones more amplitude: faster joints for the same bound.
# Friction's viscous and Coulomb parts part only at speeds beyond its transition
# (0.13-0.43 rad/s on the stand-in). On the stand-in (60 s, seed 0), against a DECAY of 1:
# RMS speed 0.16-0.21 rad/s (0.12-0.18), peaks 0.36-0.52 (0.30-0.43); fit's errors summed
# over the joints, damping 0.55 N*m*s/rad (0.87) and Coulomb level 0.30 N*m (0.45). A
# DECAY of 2 went further (0.36, 0.20) but left the learned actuator model's test data
# more torque steps than it can take (tests/sysid/test_actuator_model.py).
DECAY = 1.5


class ExcitationError(ConfigError):
    """Excitation settings that cannot be met; the message names the setting."""

    hint = 'change the parameter'


@dataclass(frozen=True)
class Excitation:
    """A sampled trajectory: ``t`` (N,) s from its start, ``q``/``qd``/``qdd`` (N, 7)."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    @property
    def duration(self) -> float:
        """S from the first to the last sample."""
        return float(self.t[-1])


def fourier_excitation(spec: RobotSpec, duration: float, seed: int, fraction: float,
                       rate: float, ramp: float = 3.0, period: float = 5.0,
                       harmonics: int = 8,
                       margin: float = StepSettings.joint_limit_margin) -> Excitation:
    """Sample the excitation at ``rate`` Hz for ``duration`` s (see the module docstring)."""
    if not 0 < fraction <= 1:
        raise ExcitationError(f'amplitude_fraction must be in (0, 1], got {fraction}')
    if not duration >= 2 * ramp:
        raise ExcitationError(f'duration {duration} s must be at least twice the ramp '
                              f'({2 * ramp:g} s)')
    if not rate > 0:
        raise ExcitationError(f'rate must be > 0 Hz, got {rate}')
    t = np.arange(round(duration * rate) + 1) / rate
    rng = np.random.default_rng(seed)
    joints = len(spec.arm_joints)
    order = np.arange(1, harmonics + 1)
    omega = 2 * np.pi * order / period                      # (L,) rad/s
    a = rng.standard_normal((joints, harmonics)) / order**DECAY   # sin coefficients
    b = rng.standard_normal((joints, harmonics)) / order**DECAY   # cos coefficients
    phase = np.outer(t, omega)                              # (N, L)
    sin, cos = np.sin(phase), np.cos(phase)
    f = sin @ a.T + cos @ b.T
    fd = (cos * omega) @ a.T - (sin * omega) @ b.T
    fdd = -(sin * omega**2) @ a.T - (cos * omega**2) @ b.T
    w, wd, wdd = _window(t, duration, ramp)
    shape = w[:, None] * f
    shape_d = wd[:, None] * f + w[:, None] * fd
    shape_dd = wdd[:, None] * f + 2 * wd[:, None] * fd + w[:, None] * fdd

    room = np.minimum(spec.home - spec.position_lower, spec.position_upper - spec.home) - margin
    if np.any(room <= 0):
        raise ExcitationError(f'home lies within {margin} rad of a position limit')
    scale = HEADROOM * fraction * np.min([
        room / np.abs(shape).max(axis=0),
        spec.velocity / np.abs(shape_d).max(axis=0),
        spec.acceleration / np.abs(shape_dd).max(axis=0)], axis=0)
    return Excitation(t, spec.home + scale * shape, scale * shape_d, scale * shape_dd)


def _window(t: np.ndarray, duration: float, ramp: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quintic ramp in over [0, ramp] and out over [duration - ramp, duration]; (N,) each."""
    rise = np.clip(t / ramp, 0, 1)
    fall = np.clip((duration - t) / ramp, 0, 1)
    r, rd, rdd = _quintic(rise)
    f, fd, fdd = _quintic(fall)
    rd, rdd = rd / ramp, rdd / ramp**2
    fd, fdd = -fd / ramp, fdd / ramp**2
    return r * f, rd * f + r * fd, rdd * f + 2 * rd * fd + r * fdd


def _quintic(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """10 s^3 - 15 s^4 + 6 s^5 and its first two derivatives in s."""
    return (s**3 * (10 - 15 * s + 6 * s**2), 30 * s**2 * (1 - s) ** 2,
            60 * s * (1 - s) * (1 - 2 * s))
