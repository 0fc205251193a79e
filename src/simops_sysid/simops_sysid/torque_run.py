"""``fit --mode torque``: friction and torque offsets from the efforts of recorded bags.

Reads the arm's joint states (no commands needed), regresses the efforts on the model's
rigid-body inverse dynamics (:mod:`simops_sysid.torque_fit`), prints per-joint torque RMS
before (the model's nominal friction) and after the fit, on training and held-out data (the last
:data:`HELD_FRACTION` of each training bag when no ``--holdout`` is given), and returns the
SimParams to write.
"""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import END_EFFECTORS, PayloadParams, SimParams, merge_sim_params
from simops_core.topics import TopicSpec
from simops_sim.model_index import ModelIndex, index_model
from simops_sim.model_params import apply_sim_params, nominal_sim_params
from simops_sysid.recording import States, load_states
from simops_sysid.torque_fit import (
    PAYLOAD_START,
    JointFriction,
    TorqueData,
    apply_friction,
    fit_friction,
    fit_payload,
    friction_params,
    inverse_dynamics,
    nominal_friction,
    rigid_body_model,
    torque_data,
)

HELD_FRACTION = 0.2   # of each training bag held out when no --holdout is given
PAYLOAD_ROUNDS = 2    # payload fits, each followed by a friction fit (new transitions)


def run_torque(bags: Sequence[Path], holdout: Sequence[Path], robot: RobotSpec,
               model_path: Path, topics: dict[str, TopicSpec], hashes: dict[Path, str],
               end_effector: str = END_EFFECTORS[0], payload: bool = False) -> SimParams:
    """Fit friction and offsets to ``bags``, evaluate on ``holdout``; the SimParams to write.

    ``end_effector`` (one of :data:`END_EFFECTORS`) is what the recorded arm carries;
    ``payload``: fit a load at the flange too (:func:`fit_payload`).
    """
    started = time.monotonic()
    model = mujoco.MjModel.from_xml_path(str(model_path))
    index = index_model(model, robot)
    carried = SimParams(end_effector=end_effector)
    apply_sim_params(model, carried, index)
    rigid = rigid_body_model(model, index)
    nominal = nominal_sim_params(model, index)
    friction = np.array([[nominal.joints[j].frictionloss or 0.0,
                          nominal.joints[j].friction_transition or 0.0]
                         for j in robot.arm_joints]).T   # (2, 7) the model's

    def data(states: States, part: slice) -> TorqueData:
        return torque_data(rigid, index, states.t[part], states.q[part], states.qd[part],
                           states.effort[part])

    train, held = [], []
    for bag in bags:
        states = load_states(bag, robot, topics)
        if holdout:
            train.append(data(states, slice(None)))
        else:
            cut = int(states.t.size * (1.0 - HELD_FRACTION))
            train.append(data(states, slice(None, cut)))
            held.append(data(states, slice(cut, None)))
        print(f'{bag}: {states.joint_states_topic}: {states.t.size} joint states, '
              f'{states.t[-1]:.1f} s', flush=True)
    held += [data(load_states(bag, robot, topics), slice(None)) for bag in holdout]
    training, checking = _join(train), _join(held)
    fits = fit_friction(training, friction)
    before = _rms(checking, friction)
    if payload:
        carried, fits, checking = _fit_payload(model, index, carried, training, checking, fits)
    after = apply_friction(checking, fits)
    wall = time.monotonic() - started
    print(f'{"joint":<14}{"coulomb":>9}{"viscous":>9}{"offset":>9}{"transition":>11}'
          f'{"train before":>14}{"after":>8}{"held before":>13}{"after":>8}  N*m, rad/s')
    for name, fit, b, a in zip(robot.arm_joints, fits, before, after, strict=True):
        print(f'{name:<14}{fit.coulomb:>9.3f}{fit.viscous:>9.3f}{fit.offset:>9.3f}'
              f'{fit.transition:>11.3f}{fit.rms_before:>14.3f}{fit.rms_after:>8.3f}'
              f'{b:>13.3f}{a:>8.3f}')
    print(f'torque RMS (all joints): training {_total([f.rms_before for f in fits]):.3f} -> '
          f'{_total([f.rms_after for f in fits]):.3f} N*m, held-out {_total(before):.3f} -> '
          f'{_total(after):.3f} N*m ({wall:.1f} s)', flush=True)
    provenance = {
        'fitted_by': 'simops_sysid fit --mode torque (least squares on mj_inverse)',
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'model': str(model_path), 'robot': robot.name,
        'bags': [{'path': str(b), 'sha256': hashes[b]} for b in bags],
        'holdout': [{'path': str(b), 'sha256': hashes[b]} for b in holdout],
        'fit_wall_s': round(wall, 2),
        'torque_rms_nm': {
            'training': {'nominal': _per_joint(robot, [f.rms_before for f in fits]),
                         'fitted': _per_joint(robot, [f.rms_after for f in fits])},
            'holdout': {'nominal': _per_joint(robot, before),
                        'fitted': _per_joint(robot, after)}}}
    fitted = merge_sim_params(carried, friction_params(robot.arm_joints, fits))
    return fitted.with_provenance(**provenance)


def _fit_payload(model: mujoco.MjModel, index: ModelIndex, carried: SimParams,
                 training: TorqueData, checking: TorqueData, fits: list[JointFriction]
                 ) -> tuple[SimParams, list[JointFriction], TorqueData]:
    """Fit a flange payload to ``training`` in :data:`PAYLOAD_ROUNDS` rounds of fit_payload.

    Returns ``carried`` with the payload, the friction fits made with it (their
    ``rms_before`` still those of ``fits``, without it) and ``checking`` recomputed with it.
    """
    def loaded(theta: np.ndarray) -> mujoco.MjModel:
        candidate = copy.copy(model)
        apply_sim_params(candidate, replace(carried, payload=PayloadParams(*theta)), index)
        return rigid_body_model(candidate, index)

    theta, refits = PAYLOAD_START, fits
    for _ in range(PAYLOAD_ROUNDS):   # the friction transitions move with the payload
        theta, training = fit_payload(loaded, index, training,
                                      np.array([f.transition for f in refits]), theta)
        refits = fit_friction(training)
    print(f'payload {theta[0]:.3f} kg at ({theta[1]:.4f}, {theta[2]:.4f}, {theta[3]:.4f}) m '
          'in the flange frame', flush=True)
    checking = replace(checking, rigid_body=inverse_dynamics(loaded(theta), index,
                                                             checking.motion))
    return (replace(carried, payload=PayloadParams(*map(float, theta))),
            [replace(refit, rms_before=fit.rms_before)
             for refit, fit in zip(refits, fits, strict=True)], checking)


def _join(parts: list[TorqueData]) -> TorqueData:
    return TorqueData(*(np.concatenate([getattr(p, f.name) for p in parts])
                        for f in fields(TorqueData)))


def _rms(data: TorqueData, friction: np.ndarray) -> np.ndarray:
    """Torque RMS (7,) N*m with the model's ``friction`` (2, 7) (see ``nominal_friction``)."""
    residual = data.effort - data.rigid_body - nominal_friction(data.qd, friction)
    return np.sqrt(np.mean(residual ** 2, axis=0))


def _total(values: Sequence[float]) -> float:
    return float(np.sqrt(np.mean(np.square(values))))


def _per_joint(robot: RobotSpec, values: Sequence[float]) -> dict[str, float]:
    return {name: round(float(v), 4) for name, v in zip(robot.arm_joints, values, strict=True)}
