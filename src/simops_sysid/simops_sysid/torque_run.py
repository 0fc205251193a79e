"""``fit --mode torque``: friction and torque offsets from the efforts of recorded bags.

Reads the arm's joint states (no commands needed), regresses the efforts on the model's
rigid-body inverse dynamics (:mod:`simops_sysid.torque_fit`), prints per-joint torque RMS
before (the model's nominal friction) and after the fit, on training and held-out data (the
last :data:`HELD_FRACTION` of each training bag when no ``--holdout`` is given), and returns
the SimParams to write. Figures are on the raw efforts at the recorded rate, as published
identifications score; the friction is fitted to filtered ones, whose figures are labelled.
With ``--actuator-model linear`` it also learns what the torque sensors read beyond the
parametric model (:mod:`simops_sysid.actuator_fit`) and scores it the same way.
"""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import END_EFFECTORS, PayloadParams, SimParams, merge_sim_params
from simops_core.topics import TopicSpec
from simops_sim.model_index import ModelIndex, index_model
from simops_sim.model_params import apply_sim_params, nominal_sim_params
from simops_sysid import actuator_fit
from simops_sysid.actuator_fit import (
    ActuatorFitError,
    ActuatorPart,
    SensorPredictor,
    input_range,
)
from simops_sysid.recording import States, load_states
from simops_sysid.torque_figures import joint_total, residual_rms
from simops_sysid.torque_fit import (
    FILTER_WINDOW,
    PAYLOAD_START,
    JointFriction,
    TorqueData,
    apply_friction,
    fit_friction,
    fit_payload,
    friction_params,
    friction_torque,
    inverse_dynamics,
    nominal_friction,
    rigid_body_model,
    sample_period,
    torque_data,
)
from simops_sysid.torque_report import HeldOutTraces, beyond_shares

HELD_FRACTION = 0.2   # of each training bag held out when no --holdout is given
PAYLOAD_ROUNDS = 2    # payload fits, each followed by a friction fit (new transitions)
ACTUATOR_MODELS = ('none', 'linear', 'mlp')   # --actuator-model: none, or the kind learned


def run_torque(bags: Sequence[Path], holdout: Sequence[Path], robot: RobotSpec,
               model_path: Path, topics: dict[str, TopicSpec], hashes: dict[Path, str],
               end_effector: str = END_EFFECTORS[0], payload: bool = False,
               actuator_model: str = 'none'
               ) -> tuple[SimParams, LearnedSensor | None, HeldOutTraces]:
    """Fit friction and offsets to ``bags``, evaluate on ``holdout``.

    Returns the SimParams to write, with ``actuator_model`` the learned model to export
    (else None), and the held-out efforts as measured and modelled (for the report).

    ``end_effector`` (one of :data:`END_EFFECTORS`) is what the recorded arm carries;
    ``payload``: fit a load at the flange too (:func:`fit_payload`); ``actuator_model``
    (one of :data:`ACTUATOR_MODELS`): also learn what the torque sensors read beyond the
    parametric model (:mod:`simops_sysid.actuator_fit`). Figures are on the raw efforts at
    the recorded rate; the filtered ones (what the friction is fitted to) are labelled.
    Raises :class:`~simops_sysid.actuator_fit.ActuatorFitError` for a learned model that
    does worse held out than the parametric one.
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

    train, held, periods = [], [], []
    for bag in bags:
        states = load_states(bag, robot, topics)
        periods.append(sample_period(states.t))
        if holdout:
            train.append(data(states, slice(None)))
        else:
            cut = int(states.t.size * (1.0 - HELD_FRACTION))
            train.append(data(states, slice(None, cut)))
            held.append(data(states, slice(cut, None)))
        print(f'{bag}: {states.joint_states_topic}: {states.t.size} joint states, '
              f'{states.t[-1]:.1f} s', flush=True)
    held += [data(load_states(bag, robot, topics), slice(None)) for bag in holdout]
    fits = fit_friction(_join(train), friction)
    before = [_rms(_join(part), friction, raw) for part in (train, held)
              for raw in (False, True)]   # the model's: training, raw; held out, raw
    if payload:
        carried, fits, rigid = _fit_payload(model, index, carried, _join(train), fits)
        train, held = ([replace(d, rigid_body=inverse_dynamics(rigid, index, d.motion))
                        for d in part] for part in (train, held))
    after = [apply_friction(_join(part), fits, raw) for part in (train, held)
             for raw in (False, True)]
    rigid_only = [residual_rms(joined.raw, joined.rigid_body)
                  for joined in (_join(train), _join(held))]
    rms = {'training': {'rigid_body': rigid_only[0], 'nominal': before[1], 'fitted': after[1]},
           'holdout': {'rigid_body': rigid_only[1], 'nominal': before[3], 'fitted': after[3]}}
    learned = None
    if actuator_model != 'none':
        learned = _fit_actuator(train, held, fits, periods, actuator_model)
        rms['training']['actuator_model'], rms['holdout']['actuator_model'] = learned[1:3]
    wall = time.monotonic() - started
    _print(robot, fits, rms, before, after, 1.0 / float(np.median(periods)), wall)
    traces = _traces(held, friction, fits, None if learned is None else learned[0],
                     float(np.median(periods)))
    provenance = {
        'fitted_by': 'simops_sysid fit --mode torque (least squares on mj_inverse)',
        'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
        'model': str(model_path), 'robot': robot.name,
        'bags': [{'path': str(b), 'sha256': hashes[b]} for b in bags],
        'holdout': [{'path': str(b), 'sha256': hashes[b]} for b in holdout],
        'fit_wall_s': round(wall, 2),
        'torque_rms_nm': {part: {key: _per_joint(robot, values)
                                 for key, values in figures.items()}
                          for part, figures in rms.items()},
        'torque_rms_nm_filtered': {
            'training': {'nominal': _per_joint(robot, before[0]),
                         'fitted': _per_joint(robot, after[0])},
            'holdout': {'nominal': _per_joint(robot, before[2]),
                        'fitted': _per_joint(robot, after[2])}}}
    sensor = None
    if learned is not None:
        fitted_model, _, _, scores, seen, beyond = learned
        sensor = LearnedSensor(fitted_model, {
            'robot': robot.name, 'fitted_by': 'simops_sysid fit --mode torque --actuator-model',
            'date': provenance['date'], 'training_range': seen,
            'bags': provenance['bags'], 'holdout': provenance['holdout'],
            'torque_rms_nm': {part: {key: _per_joint(robot, figures[key])
                                     for key in ('fitted', 'actuator_model')}
                              for part, figures in rms.items()}})
        provenance['actuator_model'] = {
            'kind': actuator_model, 'inputs': list(actuator_fit.INPUTS),
            'window_s': round(fitted_model.window * fitted_model.period, 6),
            'period_s': round(fitted_model.period, 6),
            'validation_rms_nm': {key: round(value, 4) for key, value in scores.items()},
            'holdout_beyond_training_range': beyond}
    fitted = merge_sim_params(carried, friction_params(robot.arm_joints, fits))
    return fitted.with_provenance(**provenance), sensor, traces


def _traces(held: list[TorqueData], friction: np.ndarray, fits: list[JointFriction],
            learned: SensorPredictor | None, period: float) -> HeldOutTraces:
    """The held-out efforts, measured (raw) and as each model predicts them."""
    data = _join(held)
    models = {'rigid_body': data.rigid_body,
              'nominal': data.rigid_body + nominal_friction(data.qd, friction),
              'fitted': data.rigid_body + friction_torque(data.qd, fits)}
    if learned is not None:
        models['actuator_model'] = np.vstack([learned.predict(part)
                                              for part in actuator_parts(held, fits)])
    return HeldOutTraces(period, data.raw, models)


@dataclass(frozen=True)
class LearnedSensor:
    """A learned model to export: the fit and its card's record (:mod:`actuator_export`)."""

    model: SensorPredictor
    training: dict[str, Any]


def actuator_parts(data: list[TorqueData], fits: list[JointFriction]) -> list[ActuatorPart]:
    """The learned model's inputs and targets over ``data``, with the fitted friction.

    The measured positions too (an optional input, :data:`~simops_sysid.actuator_fit.
    OPTIONAL_INPUTS`); the tracking error is not known here.
    """
    return [ActuatorPart(d.rigid_body + friction_torque(d.qd, fits), d.qd,
                         d.motion[:, 2, :d.qd.shape[1]], d.raw,
                         position=d.motion[:, 0, :d.qd.shape[1]]) for d in data]


def _fit_actuator(train: list[TorqueData], held: list[TorqueData], fits: list[JointFriction],
                  periods: list[float], kind: str
                  ) -> tuple[SensorPredictor, np.ndarray, np.ndarray, dict[str, float],
                             dict[str, dict[str, list[float]]], dict[str, float]]:
    """The learned model of ``kind`` (``linear`` or ``mlp``) and what the fit knows of it.

    Returns the model, its raw RMS (7,) on training and held out, the validation scores
    (N*m, all joints) of each window of the linear filter and, for ``mlp``, of the network,
    the training range of its inputs (:func:`~simops_sysid.actuator_fit.input_range`) and
    the fraction of held-out samples beyond it, per input.
    """
    period = float(np.median(periods))
    if max(periods) > 1.05 * min(periods):
        raise ActuatorFitError('the bags\' joint states come at different rates '
                               f'({1 / max(periods):.0f}-{1 / min(periods):.0f} Hz): a learned '
                               'model is fitted at one rate; fit bags of one rate')
    fitting, checking = actuator_parts(train, fits), actuator_parts(held, fits)
    linear, windows = actuator_fit.choose_and_fit(fitting, period)
    scores = {f'{seconds:g}': value for seconds, value in windows.items()}
    learned: SensorPredictor = linear
    if kind == 'mlp':
        # torch only now: imported, it slows the trajectory fit's threaded rollouts
        from simops_sysid.actuator_mlp import fit_mlp

        learned = fit_mlp(fitting, linear)
        scores['mlp'] = learned.validation_rms
        print(f'MLP on the {linear.window * period * 1e3:.0f} ms filter: {learned.epochs} '
              f'epochs, validation {learned.validation_rms:.4f} N*m (the filter alone '
              f'{learned.filter_rms:.4f}; 0 epochs: the network adds nothing there)',
              flush=True)
    actuator_fit.check_held_out(checking, learned)
    seen = input_range(fitting)
    # rounded once, as the provenance keeps them: the printed line and the report agree
    beyond = {key: round(share, 4)
              for key, share in actuator_fit.beyond_range(checking, seen).items()}
    print('held-out samples beyond the learned model\'s training range (there it '
          f'extrapolates): {beyond_shares(beyond)}', flush=True)
    return (learned, actuator_fit.rms(fitting, learned), actuator_fit.rms(checking, learned),
            scores, seen, beyond)


def _print(robot: RobotSpec, fits: list[JointFriction], rms: dict[str, dict[str, np.ndarray]],
           before: list[np.ndarray], after: list[np.ndarray], rate: float, wall: float) -> None:
    """The per-joint table and the totals: raw efforts, then the filtered ones (labelled)."""
    learned = 'actuator_model' in rms['training']
    print(f'{"joint":<14}{"coulomb":>9}{"viscous":>9}{"offset":>9}{"transition":>11}'
          f'{"train before":>14}{"after":>8}{"held before":>13}{"after":>8}'
          + (f'{"learned train":>15}{"held":>7}' if learned else '')
          + f'  N*m, rad/s; raw efforts at {rate:.0f} Hz')
    for j, (name, fit) in enumerate(zip(robot.arm_joints, fits, strict=True)):
        print(f'{name:<14}{fit.coulomb:>9.3f}{fit.viscous:>9.3f}{fit.offset:>9.3f}'
              f'{fit.transition:>11.3f}{rms["training"]["nominal"][j]:>14.3f}'
              f'{rms["training"]["fitted"][j]:>8.3f}{rms["holdout"]["nominal"][j]:>13.3f}'
              f'{rms["holdout"]["fitted"][j]:>8.3f}'
              + (f'{rms["training"]["actuator_model"][j]:>15.3f}'
                 f'{rms["holdout"]["actuator_model"][j]:>7.3f}' if learned else ''))
    t = joint_total
    line = (f'torque RMS (all joints, raw efforts): training {t(before[1]):.3f} -> '
            f'{t(after[1]):.3f} N*m, held-out {t(before[3]):.3f} -> {t(after[3]):.3f} N*m '
            f'(rigid body alone: {t(rms["training"]["rigid_body"]):.3f}, '
            f'{t(rms["holdout"]["rigid_body"]):.3f})')
    if learned:
        line += (f'; learned actuator model: training '
                 f'{t(rms["training"]["actuator_model"]):.3f}, held-out '
                 f'{t(rms["holdout"]["actuator_model"]):.3f} N*m')
    print(f'{line} ({wall:.1f} s)')
    print(f'torque RMS (all joints, efforts filtered over {FILTER_WINDOW * 1e3:.0f} ms, as '
          f'fitted): training {t(before[0]):.3f} -> {t(after[0]):.3f} N*m, held-out '
          f'{t(before[2]):.3f} -> {t(after[2]):.3f} N*m', flush=True)


def _fit_payload(model: mujoco.MjModel, index: ModelIndex, carried: SimParams,
                 training: TorqueData, fits: list[JointFriction]
                 ) -> tuple[SimParams, list[JointFriction], mujoco.MjModel]:
    """Fit a flange payload to ``training`` in :data:`PAYLOAD_ROUNDS` rounds of fit_payload.

    Returns ``carried`` with the payload, the friction fits made with it (their
    ``rms_before`` still those of ``fits``, without it) and the rigid-body model with it.
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
    return (replace(carried, payload=PayloadParams(*map(float, theta))),
            [replace(refit, rms_before=fit.rms_before)
             for refit, fit in zip(refits, fits, strict=True)], loaded(theta))


def _join(parts: list[TorqueData]) -> TorqueData:
    return TorqueData(*(np.concatenate([getattr(p, f.name) for p in parts])
                        for f in fields(TorqueData)))


def _rms(data: TorqueData, friction: np.ndarray, raw: bool) -> np.ndarray:
    """Torque RMS (7,) N*m with the model's ``friction`` (2, 7) (see ``nominal_friction``).

    Against the filtered efforts, or the ``raw`` ones.
    """
    return residual_rms(data.raw if raw else data.effort,
                        data.rigid_body + nominal_friction(data.qd, friction))


def _per_joint(robot: RobotSpec, values: Sequence[float]) -> dict[str, float]:
    return {name: round(float(v), 4) for name, v in zip(robot.arm_joints, values, strict=True)}
