"""The fit's residual: recorded sequences replayed through mujoco.sysid, compared per joint.

Each :class:`~simops_sysid.recording.SequenceData` becomes one measured rollout of a
``mujoco.sysid.ModelSequences``, with the two hooks mujoco.sysid asks for:

- ``custom_rollout``: :class:`DelayedReplay` delays each sequence's servo targets by the
  candidate command delay (:func:`simops_sysid.replay.delayed`) and calls
  ``mujoco.sysid.sysid_rollout``;
- ``modify_residual``: :class:`JointResidual` compares arm joint position, velocity and
  effort (both averaged over ``EFFORT_WINDOW``, see
  :func:`simops_sysid.recording.average_effort`) at the measured times, each divided by its
  scale in :class:`Scales`.

``build_model`` is :class:`~simops_sysid.fit_parameters.ModelFactory` over the fitting
model (:mod:`simops_sysid.sysid_model`). :func:`make_problem` binds them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np
from mujoco import sysid

from simops_core.sim_params import SENSOR_FIELDS, SimParams
from simops_sim.feedforward import desired_acceleration, dynamics_feedforward
from simops_sim.model_params import controller_model
from simops_sysid.fit_parameters import (
    DELAY,
    ModelFactory,
)
from simops_sysid.recording import EFFORT_WINDOW, SequenceData, average_effort
from simops_sysid.replay import delayed
from simops_sysid.sysid_model import FitModel

SIGNALS = ('q', 'qd', 'effort')


@dataclass(frozen=True)
class Scales:
    """Residual scales per signal: position rad, velocity rad/s, effort N*m.

    A residual entry is ``(measured - predicted) / scale``; the defaults weigh 1 mrad of
    position like 10 mrad/s of velocity and 0.05 N*m of effort.
    """

    q: float = 1e-3
    qd: float = 1e-2
    effort: float = 0.05

    def vector(self, joints: int) -> np.ndarray:
        """(3 * joints,) scales in the column order q..., qd..., effort..."""
        return np.repeat([self.q, self.qd, self.effort], joints)


@dataclass
class DelayedReplay:
    """``mujoco.sysid`` CustomRolloutFn: per-candidate command delay, then batched rollout.

    ``sequences`` maps ``id()`` of each sequence's control TimeSeries (the object
    ``ModelSequences`` holds) to its data; ``fixed_delay`` s is used when the delay is not
    fitted. Each rollout starts from the measured position less the candidate's encoder
    offsets (``base``'s when they are not fitted): the arm's true position. ``feedforward``
    maps the same ids to the impedance loop's dynamics feedforward (history + T, 7) N*m
    along each sequence's undelayed targets, delayed with them (empty: the effort JTC).
    """

    fit_model: FitModel
    sequences: dict[int, SequenceData]
    fixed_delay: float
    base: SimParams
    feedforward: dict[int, np.ndarray] = field(default_factory=dict)

    def __call__(self, *, models: Sequence[mujoco.MjModel], datas: Sequence[mujoco.MjData],
                 control_signal: Sequence[sysid.TimeSeries], initial_states: Sequence[np.ndarray],
                 param_dicts: Sequence[sysid.ParameterDict], **mappings: object
                 ) -> Sequence[sysid.SystemTrajectory]:
        """Delay each sequence's targets by its candidate's delay and roll out all at once."""
        per_model = len(models) // len(param_dicts)
        controls, starts = [], []
        arm = self.fit_model.index.arm_dof
        qpos = 1 + self.fit_model.index.qpos_adr[:arm]
        for i, signal in enumerate(control_signal):
            seq = self.sequences[id(signal)]
            params = param_dicts[i // per_model]
            delay = params[DELAY].value[0] if DELAY in params else self.fixed_delay
            inputs = delayed(seq.targets, seq.history, float(delay) / seq.dt)
            out = self._controls(inputs, seq.gripper)
            if id(signal) in self.feedforward:
                torque = delayed(self.feedforward[id(signal)], seq.history,
                                 float(delay) / seq.dt)
                out[:-1, self.fit_model.feedforward_ids] = torque
                out[-1] = out[-2]
            controls.append(sysid.TimeSeries(signal.times, out))
            start = np.array(initial_states[i], dtype=float)   # measured: true + bias
            start[qpos] -= sensor_biases(params, self.base, self.fit_model.spec_joints)[0]
            starts.append(start)
        return sysid.sysid_rollout(models=models, datas=datas, control_signal=controls,
                                   initial_states=starts, **mappings)

    def _controls(self, arm: np.ndarray, gripper: float) -> np.ndarray:
        """(T + 1, nu) actuator inputs; the last row only pads (rollout drops it).

        ``arm`` (T, 14): position targets (rad), then desired velocities (rad/s).
        """
        index = self.fit_model.index
        joints = index.arm_dof
        out = np.zeros((arm.shape[0] + 1, self.fit_model.model.nu))
        out[:-1, index.ctrl_ids[:joints]] = arm[:, :joints]
        out[:-1, index.ctrl_ids[joints]] = gripper
        dampers = index.velocity_ids
        out[:-1, dampers[dampers >= 0]] = arm[:, joints:][:, dampers >= 0]
        out[-1] = out[-2]
        return out


@dataclass
class JointResidual:
    """``mujoco.sysid`` ModifyResidualFn: scaled joint errors at the measured times.

    ``joints`` are the fitted arm-joint indices. Returns the predicted and measured
    TimeSeries in raw units (rad, rad/s, N*m) for reporting.
    """

    fit_model: FitModel
    joints: np.ndarray
    scales: Scales
    base: SimParams
    mapping: dict = field(init=False)

    def __post_init__(self) -> None:
        names = [f'{j}.{s}' for s in SIGNALS for j in self.joints]
        columns = sysid.TimeSeries.from_custom_map(np.zeros(1), np.zeros((1, len(names))),
                                                   names)
        self.mapping = columns.signal_mapping
        self._scale = self.scales.vector(len(self.joints))

    def measured(self, seq: SequenceData) -> sysid.TimeSeries:
        """The measured columns of ``seq`` as a TimeSeries with this residual's mapping."""
        return sysid.TimeSeries(seq.t, np.hstack((seq.q, seq.qd, seq.effort)), self.mapping)

    def __call__(self, params: sysid.ParameterDict, pred: sysid.TimeSeries,
                 measured: sysid.TimeSeries, model: mujoco.MjModel, return_pred_all: bool,
                 state: np.ndarray, **_: object
                 ) -> tuple[np.ndarray, sysid.TimeSeries, sysid.TimeSeries]:
        """Residual (K * 3J,) and the predicted / measured series at the K measured times."""
        index = self.fit_model.index
        nq = model.nq
        friction = pred.data[:, self.fit_model.friction_adr[self.joints]].sum(axis=2)
        effort = pred.data[:, self.fit_model.effort_adr[self.joints]] - friction
        steps = round(EFFORT_WINDOW / model.opt.timestep)
        encoder, torque = sensor_biases(params, self.base, self.fit_model.spec_joints)
        columns = np.hstack((state[:, 1 + index.qpos_adr[self.joints]] + encoder[self.joints],
                             state[:, 1 + nq + index.dof_adr[self.joints]],
                             average_effort(effort, steps) + torque[self.joints]))
        predicted = sysid.TimeSeries(state[:, 0], columns, self.mapping).resample(
            new_times=measured.times)
        residual = (measured.data - predicted.data) / self._scale
        return residual.ravel(), predicted, measured


@dataclass(frozen=True)
class Problem:
    """Sequences bound to mujoco.sysid: its ModelSequences and residual function."""

    fit_model: FitModel
    sequences: tuple[SequenceData, ...]
    residual_fn: Callable[..., tuple[list, list, list]]
    residual: JointResidual


def make_problem(fit_model: FitModel, sequences: Sequence[SequenceData], joints: Sequence[int],
                 base: SimParams, scales: Scales = Scales(), threads: int = 2,
                 feedforward: bool = False) -> Problem:
    """Bind ``sequences`` to mujoco.sysid with the hooks above.

    ``feedforward``: the controller is the arm's impedance loop, which compensates the
    dynamics along the targets (:mod:`simops_sim.feedforward`, on ``base``'s model).
    """
    model = fit_model.model
    residual = JointResidual(fit_model, np.asarray(joints, dtype=int), scales, base)
    controls, states, measured = [], [], []
    lookup: dict[int, SequenceData] = {}
    for seq in sequences:
        times = seq.t0 + seq.dt * np.arange(seq.steps + 1)
        control = sysid.TimeSeries(times, np.zeros((times.size, model.nu)))
        lookup[id(control)] = seq
        controls.append(control)
        states.append(_initial_state(fit_model, seq))
        measured.append(residual.measured(seq))
    groups = sysid.ModelSequences('fr3', fit_model.spec, [s.name for s in sequences], states,
                                  controls, measured, allow_missing_sensors=True)
    replay = DelayedReplay(fit_model, lookup, float(base.command_delay or 0.0), base,
                           _feedforward(fit_model, lookup, base) if feedforward else {})
    residual_fn = sysid.build_residual_fn(
        models_sequences=[groups],
        build_model=ModelFactory(model, fit_model.index, base, fit_model.friction_ids),
        modify_residual=residual, custom_rollout=replay, resample_true=False,
        n_threads=threads)
    return Problem(fit_model, tuple(sequences), residual_fn, residual)


def sensor_biases(params: sysid.ParameterDict, base: SimParams, joints: Sequence[str]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Encoder (rad) and torque-sensor (N*m) biases (7,) of the arm: candidate, else base."""
    out = []
    for kind in SENSOR_FIELDS:
        values = []
        for joint in joints:
            name = f'{joint}.{kind}'
            if name in params:
                values.append(float(params[name].value[0]))
            else:
                entry = base.joints.get(joint)
                values.append(float(getattr(entry, kind) or 0.0) if entry is not None else 0.0)
        out.append(np.array(values))
    return out[0], out[1]


def _feedforward(fit_model: FitModel, sequences: dict[int, SequenceData], base: SimParams
                 ) -> dict[int, np.ndarray]:
    """The dynamics feedforward (history + T, 7) N*m of each sequence's targets, by id."""
    model = controller_model(fit_model.model, base, fit_model.index)
    index = fit_model.index
    arm = index.arm_dof
    return {key: dynamics_feedforward(
        model, index.qpos_adr[:arm], index.dof_adr[:arm], fit_model.home_qpos,
        seq.targets[:, :arm], seq.targets[:, arm:2 * arm],
        desired_acceleration(seq.targets[:, arm:2 * arm], seq.dt))
        for key, seq in sequences.items()}


def _initial_state(fit_model: FitModel, seq: SequenceData) -> np.ndarray:
    """mjSTATE_FULLPHYSICS at ``seq.t0``: measured joints, the rest at the home keyframe."""
    index, model = fit_model.index, fit_model.model
    qpos = fit_model.home_qpos.copy()
    qvel = np.zeros(model.nv)
    qpos[index.qpos_adr] = seq.qpos0
    qvel[index.dof_adr] = seq.qvel0
    state = sysid.create_initial_state(model, qpos, qvel)
    state[0] = seq.t0
    return state
