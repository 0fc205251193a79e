"""Fitted quantities as a :class:`mujoco.sysid.ParameterDict`, and back to ``SimParams``.

Parameter names follow the SimParams schema: ``<joint>.<field>`` (``damping`` N*m*s/rad,
``armature`` kg*m^2, ``frictionloss`` N*m, ``friction_transition`` rad/s, ``kp`` N*m/rad,
``kv`` N*m*s/rad, ``encoder_offset`` rad, ``torque_offset`` N*m), ``command_delay`` (s),
``body_mass_scale.<body>`` (dimensionless) and ``payload.<field>`` (kind ``payload``: the
load at the flange, ``mass`` kg and ``com_x``/``com_y``/``com_z`` m in the flange frame).
Candidate models are copies of one indexed model with
:func:`simops_sim.model_params.apply_sim_params` applied, the code path the simulator node and
the env use, so a fitted number means the same everywhere; smooth friction, which the
simulator applies in Python, is carried by native actuators that approximate it
(:data:`FRICTION_TERMS`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco import sysid

from simops_core.sim_params import (
    PAYLOAD_FIELDS,
    JointParams,
    PayloadParams,
    SimParams,
    merge_sim_params,
)
from simops_sim.delay import delay_steps
from simops_sim.model_index import ModelIndex
from simops_sim.model_params import apply_sim_params

KINDS = ('damping', 'armature', 'frictionloss', 'friction_transition', 'kp', 'kv',
         'gain_scale', 'encoder_offset', 'torque_offset', 'delay', 'mass', 'payload')
JOINT_KINDS = ('damping', 'armature', 'frictionloss', 'friction_transition', 'kp', 'kv',
               'encoder_offset', 'torque_offset')
DELAY = 'command_delay'
# One factor on every fitted joint's kp and kv (kind ``gain_scale``): the arm's own impedance
# loop, whose stiffness is known up to how the firmware was set, keeps its shape per joint.
GAIN_SCALE = 'gain_scale'
MASS_PREFIX = 'body_mass_scale.'
PAYLOAD_PREFIX = 'payload.'
MAX_DELAY = 0.05            # s, upper bound of the fitted command delay
# (lower, upper) bounds per kind as factors of the nominal value, and absolute floors of the
# upper bound for nominal values near zero.
_BOUNDS = {'damping': (0.0, 10.0, 20.0), 'armature': (0.0, 10.0, 1.0),
           'frictionloss': (0.0, 10.0, 5.0), 'kp': (0.2, 5.0, 0.0), 'kv': (0.2, 5.0, 0.0)}
_MASS_BOUNDS = (0.5, 2.0)
# The payload at the flange: a start where the model carries none (a mass of zero leaves
# its centre of mass without effect), and bounds: up to the FR3's 3 kg rated payload, its
# centre of mass within 0.3 m of the flange.
PAYLOAD_START = (0.2, 0.0, 0.0, 0.05)          # kg, m, m, m
PAYLOAD_BOUNDS = ((0.0, 3.0), (-0.3, 0.3), (-0.3, 0.3), (-0.3, 0.3))
# Smooth friction's transition speed (rad/s): a start where the model has none (Gaz et al.'s
# sigmoids change sign over 0.1-0.4 rad/s) and absolute bounds.
TRANSITION_START = 0.2
# (weight, slope) of each saturating line in the four-line least-squares fit of tanh, the
# weights summing to 1 (the full level c at speed): tanh(x) ~ sum(w * clip(k * x, -1, 1)),
# RMS error 0.0052 over |x| <= 4 (two lines: 0.017, whose error in effort on the stand-in,
# 0.0085 N*m RMS at its true parameters, was 1.7 times its sensor noise; four: 0.0054).
FRICTION_TERMS = ((0.184, 1.957), (0.339, 0.991), (0.325, 0.614), (0.152, 0.367))
_TRANSITION_BOUNDS = (0.01, 2.0)
# Absolute bounds of the sensor biases, around the nominal value: a Franka's encoder
# calibration is good to a few mrad, its torque sensors to a few tenths of a N*m.
_BIAS_BOUNDS = {'encoder_offset': 0.01, 'torque_offset': 2.0}


class ParameterError(ValueError):
    """An unknown parameter kind or joint; the message names it."""


def parse_kinds(text: str) -> tuple[str, ...]:
    """``'damping,kp,delay'`` as a tuple of kinds; raise :class:`ParameterError`."""
    kinds = tuple(k.strip() for k in text.split(',') if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise ParameterError(f'unknown parameter kind {unknown[0] if unknown else text!r}; '
                             f'choose from {",".join(KINDS)}')
    if GAIN_SCALE in kinds and {'kp', 'kv'} & set(kinds):
        raise ParameterError('gain_scale scales kp and kv together; fit it or them, not both')
    return kinds


def build_parameters(nominal: SimParams, kinds: Sequence[str], joints: Sequence[str],
                     mass_bodies: Sequence[str]) -> sysid.ParameterDict:
    """A ParameterDict starting at ``nominal`` (fully set, see ``nominal_sim_params``)."""
    params = sysid.ParameterDict()
    for joint in joints:
        entry = nominal.joints[joint]
        for kind in JOINT_KINDS:
            if kind in kinds:
                value = float(getattr(entry, kind) or 0.0)
                if kind == 'friction_transition':
                    params.add(sysid.Parameter(f'{joint}.{kind}', value or TRANSITION_START,
                                               *_TRANSITION_BOUNDS))
                    continue
                if kind in _BIAS_BOUNDS:
                    span = _BIAS_BOUNDS[kind]
                    params.add(sysid.Parameter(f'{joint}.{kind}', value, value - span,
                                               value + span))
                    continue
                low, high, floor = _BOUNDS[kind]
                params.add(sysid.Parameter(f'{joint}.{kind}', value, low * value,
                                           max(high * value, floor)))
    if GAIN_SCALE in kinds:
        low, high, _ = _BOUNDS['kp']
        params.add(sysid.Parameter(GAIN_SCALE, 1.0, low, high))
    if 'delay' in kinds:
        params.add(sysid.Parameter(DELAY, float(nominal.command_delay or 0.0), 0.0, MAX_DELAY))
    if 'mass' in kinds:
        for body in mass_bodies:
            params.add(sysid.Parameter(f'{MASS_PREFIX}{body}', 1.0, *_MASS_BOUNDS))
    if 'payload' in kinds:
        load = nominal.payload
        carried = bool(load.mass)
        for name, start, bounds in zip(PAYLOAD_FIELDS, PAYLOAD_START, PAYLOAD_BOUNDS,
                                       strict=True):
            value = getattr(load, name)
            params.add(sysid.Parameter(f'{PAYLOAD_PREFIX}{name}',
                                       float(value or 0.0) if carried else start, *bounds))
    return params


def to_sim_params(params: sysid.ParameterDict, base: SimParams) -> SimParams:
    """``base`` with every parameter of ``params`` (current values) written in.

    ``gain_scale`` multiplies ``base``'s kp and kv of the joints ``params`` names (every arm
    joint when it names none).
    """
    joints: dict[str, dict[str, float]] = {}
    scales = {}
    load = {}
    delay = None
    for name, param in params.items():
        value = float(param.value[0])
        if name == GAIN_SCALE:
            for joint in _scaled_joints(params, base):
                entry = base.joints[joint]
                joints.setdefault(joint, {}).update(kp=float(entry.kp) * value,
                                                   kv=float(entry.kv) * value)
        elif name == DELAY:
            delay = value
        elif name.startswith(MASS_PREFIX):
            scales[name[len(MASS_PREFIX):]] = value
        elif name.startswith(PAYLOAD_PREFIX):
            load[name[len(PAYLOAD_PREFIX):]] = value
        else:
            joint, _, kind = name.rpartition('.')
            joints.setdefault(joint, {})[kind] = value
    override = SimParams(joints={j: JointParams(**v) for j, v in joints.items()},
                         command_delay=delay, body_mass_scale=scales,
                         payload=PayloadParams(**load))
    return merge_sim_params(base, override)


def _scaled_joints(params: sysid.ParameterDict, base: SimParams) -> list[str]:
    """The joints ``gain_scale`` acts on.

    The arm joints (those with kp and kv) that ``params`` names, or every arm joint when it
    names none.
    """
    named = {name.rpartition('.')[0] for name, _ in params.items() if '.' in name
             and not name.startswith((MASS_PREFIX, PAYLOAD_PREFIX))}
    return [j for j, entry in base.joints.items()
            if entry.kp and entry.kv and (j in named or not named)]


def set_from_sim_params(params: sysid.ParameterDict, values: SimParams,
                        reference: SimParams | None = None) -> np.ndarray:
    """Set ``params`` to the values in ``values`` (unset fields keep theirs); return the vector.

    ``gain_scale`` is read as ``values``' kp over ``reference``'s (the fit's base).
    """
    for name, param in params.items():
        if name == GAIN_SCALE:
            joint = next(iter(_scaled_joints(params, reference))) if reference else None
            have = values.joints.get(joint) if joint else None
            value = (None if have is None or have.kp is None
                     else float(have.kp) / float(reference.joints[joint].kp))
        elif name == DELAY:
            value = values.command_delay
        elif name.startswith(MASS_PREFIX):
            value = values.body_mass_scale.get(name[len(MASS_PREFIX):])
        elif name.startswith(PAYLOAD_PREFIX):
            value = getattr(values.payload, name[len(PAYLOAD_PREFIX):])
        else:
            joint, _, kind = name.rpartition('.')
            entry = values.joints.get(joint)
            value = None if entry is None else getattr(entry, kind)
        if value is not None:
            param.update_from_vector(np.array([float(value)]))
    return params.as_vector()


def whole_step_delay(params: SimParams, timestep: float) -> SimParams:
    """``params`` with the command delay rounded to whole physics steps, as the node runs it."""
    steps = delay_steps(params.command_delay or 0.0, timestep)
    return merge_sim_params(params, SimParams(command_delay=round(steps * timestep, 9)))


@dataclass(frozen=True)
class ModelFactory:
    """``mujoco.sysid`` BuildModelFn: a copy of ``model`` with candidate parameters applied.

    ``base`` holds the values of everything not fitted (the model's nominal values).
    ``friction`` (7, T) are the arm joints' smooth-friction actuators, whose terms
    ``terms`` ((weight, slope) each) approximate ``-c tanh(qd / v)``
    (:mod:`simops_sysid.optimize`).
    """

    model: mujoco.MjModel
    index: ModelIndex
    base: SimParams
    friction: np.ndarray
    terms: tuple[tuple[float, float], ...] = FRICTION_TERMS

    def __call__(self, params: sysid.ParameterDict, spec: mujoco.MjSpec | None = None
                 ) -> mujoco.MjModel:
        """Compile-free: copy the indexed model and apply the parameters to the copy."""
        model = copy.copy(self.model)
        values = to_sim_params(params, self.base)
        apply_sim_params(model, values, self.index)
        for row, name in zip(self.friction, self.index.joint_names, strict=False):
            joint = values.joints.get(name)
            transition = joint.friction_transition if joint is not None else None
            level = float(joint.frictionloss or 0.0) if joint is not None else 0.0
            for actuator, (weight, slope) in zip(row, self.terms, strict=True):
                smooth = bool(transition) and level > 0.0
                model.actuator_biasprm[actuator, 2] = (
                    -weight * level * slope / transition if smooth else 0.0)
                bound = weight * level if smooth else 1.0
                model.actuator_forcerange[actuator] = (-bound, bound)
        return model
