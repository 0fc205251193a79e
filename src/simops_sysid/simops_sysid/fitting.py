"""Open-loop replay fit on ``mujoco.sysid``: Levenberg-Marquardt over batched ``mujoco.rollout``.

Each :class:`~simops_sysid.dataset.SequenceData` becomes one measured rollout of a
``mujoco.sysid.ModelSequences``. The optimizer, the finite-difference Jacobian, the batched
rollouts and the confidence intervals are mujoco.sysid's; this module supplies the three
hooks it asks for:

- ``build_model``: :class:`~simops_sysid.fit_parameters.ModelFactory` (``apply_sim_params``);
- ``custom_rollout``: :class:`DelayedReplay` delays each sequence's servo targets by the
  candidate command delay (:func:`simops_sysid.replay.delayed`) and calls
  ``mujoco.sysid.sysid_rollout``;
- ``modify_residual``: :class:`JointResidual` compares arm joint position, velocity and
  effort (both averaged over ``EFFORT_WINDOW``, see
  :func:`simops_sysid.dataset.average_effort`) at the measured times, each divided by its
  scale in :class:`Scales`.

The fitting model is the simulator's MJCF reduced to the robot (the bodies under the spec's
base frame; the table, the object and the goal never touch the arm during excitation, and
dropping them halves the cost of a step) plus one ``jointactuatorfrc`` sensor per arm
joint: the node's effort (``qfrc_actuator`` after a step) is exactly that sensor's value.

Smooth friction (``friction_transition``), which the simulator applies in Python
(:class:`simops_sim.friction.SmoothFriction`, ``-c tanh(qd / v)``), cannot run inside
``mujoco.rollout``. The fitting model carries it natively instead: two force-limited
actuators per arm joint with a velocity bias,
``-c (w1 clip(k1 qd / v) + w2 clip(k2 qd / v))``
(:data:`simops_sysid.fit_parameters.FRICTION_TERMS`, the least-squares fit of tanh by two
saturating lines: RMS error 1.7 % of ``c`` over ``|qd| <= 4 v``). Their force is not part of
the effort, as in the simulator.

The Jacobian is finite-differenced in two phases: :class:`GroupedJacobian` (one rollout per
parameter kind) brings LM close to the optimum cheaply, then mujoco.minimize's own
finite differences (one rollout per parameter) finish the fit and give the Jacobian that
the confidence intervals use.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
from mujoco import sysid
from mujoco.minimize import IterLog

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import SENSOR_FIELDS, SimParams
from simops_sim.model_index import ModelIndex, index_model
from simops_sim.model_params import nominal_sim_params
from simops_sysid.dataset import EFFORT_WINDOW, SequenceData, average_effort
from simops_sysid.fit_parameters import (
    DELAY,
    FRICTION_TERMS,
    JOINT_KINDS,
    ModelFactory,
    set_from_sim_params,
    to_sim_params,
)
from simops_sysid.replay import delayed

EFFORT_SENSOR = 'sysid_effort_{}'
FRICTION_ACTUATOR = 'sysid_friction{}_{}'
SIGNALS = ('q', 'qd', 'effort')
# LM regulariser growth per rejected step. mujoco.minimize starts at mu = 0 and grows by
# 10^0.1, so a rejected Gauss-Newton step from far off (the first one, typically) costs
# dozens of full rollouts; 10^0.5 reaches a useful mu in a few (fit time 90 -> 68 s on 60 s
# of data, same optimum).
MU_FACTOR = 10 ** 0.5


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


@dataclass(frozen=True)
class FitModel:
    """The simulator's model with effort sensors, its MjSpec and its index.

    ``effort_adr`` (7,) sensordata addresses of the arm joints' actuator-force sensors;
    ``friction_ids`` (7, 2) the smooth-friction actuators of each arm joint and
    ``friction_adr`` (7, 2) their force sensors' addresses.
    """

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    index: ModelIndex
    effort_adr: np.ndarray
    home_qpos: np.ndarray
    friction_ids: np.ndarray
    friction_adr: np.ndarray

    @property
    def spec_joints(self) -> tuple[str, ...]:
        """The robot spec's arm joint names, in order."""
        return self.index.joint_names[:self.index.arm_dof]


def load_fit_model(path: Path, robot: RobotSpec,
                   joint_map: Mapping[str, str] | None = None) -> FitModel:
    """Load the MJCF at ``path``, keep the robot, add an actuator-force sensor per arm joint."""
    spec = mujoco.MjSpec.from_file(str(path))
    index_model(spec.compile(), robot, joint_map)  # the full scene must fit the spec
    for body in list(spec.worldbody.bodies):
        if body.name != robot.base_frame:
            spec.delete(body)
    for geom in list(spec.worldbody.geoms):
        spec.delete(geom)
    index = index_model(spec.compile(), robot, joint_map)
    plain = spec.compile()
    for name, jid in zip(robot.arm_joints, index.joint_ids, strict=False):
        joint = plain.joint(jid).name
        spec.add_sensor(name=EFFORT_SENSOR.format(name),
                        type=mujoco.mjtSensor.mjSENS_JOINTACTFRC,
                        objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=joint)
        for term in range(len(FRICTION_TERMS)):   # inert until ModelFactory sets them
            actuator = FRICTION_ACTUATOR.format(term, name)
            spec.add_actuator(name=actuator, trntype=mujoco.mjtTrn.mjTRN_JOINT, target=joint,
                              gaintype=mujoco.mjtGain.mjGAIN_FIXED, gainprm=[0.0] * 10,
                              biastype=mujoco.mjtBias.mjBIAS_AFFINE, biasprm=[0.0] * 10,
                              forcelimited=mujoco.mjtLimited.mjLIMITED_TRUE,
                              forcerange=[-1.0, 1.0])
            spec.add_sensor(name=actuator, type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
                            objtype=mujoco.mjtObj.mjOBJ_ACTUATOR, objname=actuator)
    model = spec.compile()
    index = index_model(model, robot, joint_map)
    adr = np.array([model.sensor_adr[model.sensor(EFFORT_SENSOR.format(n)).id]
                    for n in robot.arm_joints])
    names = [[FRICTION_ACTUATOR.format(t, n) for t in range(len(FRICTION_TERMS))]
             for n in robot.arm_joints]
    friction_ids = np.array([[model.actuator(a).id for a in row] for row in names])
    friction_adr = np.array([[model.sensor_adr[model.sensor(a).id] for a in row]
                             for row in names])
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
    if key >= 0:
        mujoco.mj_resetDataKeyframe(model, data, key)
    return FitModel(spec, model, index, adr, data.qpos.copy(), friction_ids, friction_adr)


def nominal(fit_model: FitModel) -> SimParams:
    """Every SimParams field of the model as loaded (the fit's starting point)."""
    return nominal_sim_params(fit_model.model, fit_model.index)


@dataclass
class DelayedReplay:
    """``mujoco.sysid`` CustomRolloutFn: per-candidate command delay, then batched rollout.

    ``sequences`` maps ``id()`` of each sequence's control TimeSeries (the object
    ``ModelSequences`` holds) to its data; ``fixed_delay`` s is used when the delay is not
    fitted. Each rollout starts from the measured position less the candidate's encoder
    offsets (``base``'s when they are not fitted): the arm's true position.
    """

    fit_model: FitModel
    sequences: dict[int, SequenceData]
    fixed_delay: float
    base: SimParams

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
            controls.append(sysid.TimeSeries(signal.times, self._controls(inputs, seq.gripper)))
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
                 base: SimParams, scales: Scales = Scales(), threads: int = 2) -> Problem:
    """Bind ``sequences`` to mujoco.sysid with the hooks above."""
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
    replay = DelayedReplay(fit_model, lookup, float(base.command_delay or 0.0), base)
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


@dataclass(frozen=True)
class Evaluation:
    """Replay error of one parameter set, in raw units, per fitted joint.

    ``rms_q`` (J,) rad, ``rms_qd`` (J,) rad/s, ``rms_effort`` (J,) N*m; ``cost`` is half
    the sum of squared scaled residuals; ``series`` (t, predicted, measured) per sequence,
    columns as in :class:`JointResidual`.
    """

    rms_q: np.ndarray
    rms_qd: np.ndarray
    rms_effort: np.ndarray
    cost: float
    series: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]

    @property
    def rms_q_total(self) -> float:
        """RMS position error over every fitted joint and sample (rad)."""
        return float(np.sqrt(np.mean(self.rms_q ** 2)))


def evaluate(problem: Problem, params: sysid.ParameterDict, values: SimParams) -> Evaluation:
    """Replay every sequence with ``values`` (through ``params``' layout) and measure errors."""
    trial = params.copy()
    x = set_from_sim_params(trial, values)
    residuals, pred_lists, record_lists = problem.residual_fn(x, trial, return_pred_all=True)
    preds = [p[0] for p in pred_lists]        # one candidate model: the first of each list
    records = [m[0] for m in record_lists]
    predicted = np.vstack([p.data for p in preds])
    measured = np.vstack([m.data for m in records])
    joints = len(problem.residual.joints)
    rms = np.sqrt(np.mean((predicted - measured) ** 2, axis=0)).reshape(3, joints)
    flat = np.concatenate(residuals)
    series = tuple((m.times, p.data, m.data) for p, m in zip(preds, records, strict=True))
    return Evaluation(rms[0], rms[1], rms[2], 0.5 * float(flat @ flat), series)


def delay_profile(problem: Problem, params: sysid.ParameterDict, values: SimParams,
                  delays: np.ndarray) -> np.ndarray:
    """The replay's position error (rad RMS) at each command delay of ``delays`` (D,) s.

    Every other parameter keeps its value in ``values``. The delay is not convex (a lag
    the controller's own dynamics imitate makes local minima), so the fit starts it from
    this profile's lowest point; a flat profile says the data do not determine it.
    Positions alone judge it: efforts that do not follow the commands (a real arm's
    position interface, a tool, efforts that are not the controller's) leave it intact.
    """
    return np.array([evaluate(problem, params, dataclasses.replace(
        values, command_delay=float(d))).rms_q_total for d in delays])


@dataclass
class GroupedJacobian:
    """Finite-difference Jacobian with one rollout per parameter kind instead of per parameter.

    A mujoco.minimize ``jacobian(x, r)`` hook. Every parameter of one kind (say, the damping
    of all seven joints) is perturbed in the same candidate model; the change of joint j's
    residual rows is credited to joint j's parameter, and global parameters (command delay,
    masses) get a candidate of their own. The batch is evaluated by mujoco.sysid's residual
    (one batched ``mujoco.rollout``), so a Jacobian costs ``kinds + 1`` rollouts rather than
    ``parameters + 1``. Cross-joint terms (inertial coupling, tiny against the servo
    stiffness) are dropped; the residual itself is exact, so LM still converges to where the
    approximate gradient vanishes, next to the least-squares optimum.
    """

    problem: Problem
    params: sysid.ParameterDict
    eps: float = float(np.finfo(np.float64).eps ** 0.5)
    _row_joint: np.ndarray = field(init=False)   # (R,) fitted-joint column of each row
    _owner: np.ndarray = field(init=False)       # (P,) joint of each parameter, -1 global
    _groups: list[np.ndarray] = field(init=False)  # parameter indices perturbed together

    def __post_init__(self) -> None:
        joints = [self.problem.fit_model.index.joint_names[j] for j in self.problem.residual.joints]
        width = 3 * len(joints)
        rows = [np.arange(len(seq.t) * width) % width % len(joints)
                for seq in self.problem.sequences]
        owner, kinds = [], []
        for name, _ in self.params.items():
            joint, _, kind = name.rpartition('.')
            local = joint in joints and kind in JOINT_KINDS
            owner.append(joints.index(joint) if local else -1)
            kinds.append(kind if local else name)
        groups: dict[str, list[int]] = {}
        for i, kind in enumerate(kinds):
            groups.setdefault(kind, []).append(i)
        self._row_joint = np.concatenate(rows)
        self._owner = np.array(owner)
        self._groups = [np.array(g) for g in groups.values()]

    def __call__(self, x: np.ndarray, r: np.ndarray) -> np.ndarray:
        """(R, P) Jacobian at ``x`` (P, 1) with residual ``r`` (R, 1)."""
        x = x.reshape(-1)
        low, high = self.params.get_bounds()
        step = self.eps * np.maximum(1.0, np.abs(x)) * np.where(x > 0.5 * (low + high), -1, 1)
        step = np.clip(x + step, low, high) - x
        candidates = np.repeat(x[:, None], len(self._groups), axis=1)
        for c, members in enumerate(self._groups):
            candidates[members, c] += step[members]
        residuals, _, _ = self.problem.residual_fn(candidates, self.params.copy())
        batch = np.concatenate(residuals, axis=0)
        jac = np.zeros((batch.shape[0], x.size))
        for c, members in enumerate(self._groups):
            change = batch[:, c] - r.reshape(-1)
            for p in members:
                column = change / step[p]
                if self._owner[p] >= 0:
                    column = np.where(self._row_joint == self._owner[p], column, 0.0)
                jac[:, p] = column
        return jac


@dataclass(frozen=True)
class FitResult:
    """The optimum and how it was reached.

    ``params`` the ParameterDict at the optimum, ``values`` the same as SimParams,
    ``intervals`` (P,) 95 % half-widths in parameter units, ``covariance`` (P, P),
    ``iterations``, ``wall`` s, ``objective`` per iteration.
    """

    params: sysid.ParameterDict
    values: SimParams
    intervals: np.ndarray
    covariance: np.ndarray
    iterations: int
    wall: float
    objective: tuple[float, ...]


def fit(problem: Problem, params: sysid.ParameterDict, base: SimParams,
        iterations: tuple[int, int] = (8, 1),
        progress: Callable[[int, float, float], None] | None = None) -> FitResult:
    """Levenberg-Marquardt from ``params``' current values (mujoco.sysid.optimize).

    ``iterations`` = (grouped, full): LM iterations with :class:`GroupedJacobian`, then with
    mujoco.minimize's per-parameter finite differences (at least one; it also yields the
    Jacobian at the optimum for the intervals). ``progress(iteration, objective,
    elapsed_s)`` is called once per iteration.
    """
    grouped, full = iterations
    if grouped < 0 or full < 1:
        raise ValueError(f'need >= 0 grouped and >= 1 full iterations, got {iterations}')
    start = time.perf_counter()
    objective: list[float] = []

    def on_iteration(trace: list[IterLog]) -> None:
        objective.append(float(trace[-1].objective))
        if len(trace) > 1:  # keep only the newest Jacobian and residual in memory
            trace[-2] = dataclasses.replace(trace[-2], residual=None, jacobian=None)
        if progress is not None:
            progress(len(objective), objective[-1], time.perf_counter() - start)

    def optimize(initial: sysid.ParameterDict, count: int,
                 jacobian: GroupedJacobian | None) -> tuple[sysid.ParameterDict, object]:
        return sysid.optimize(
            initial_params=initial, residual_fn=problem.residual_fn, optimizer='mujoco',
            verbose=False, max_iters=count, x_scale='jac', xtol=1e-6, jacobian=jacobian,
            mu_factor=MU_FACTOR, iter_callback=on_iteration, output=io.StringIO())

    current = params
    if grouped:
        current, _ = optimize(current, grouped, GroupedJacobian(problem, current))
    opt_params, result = optimize(current, full, None)
    wall = time.perf_counter() - start
    residuals, _, _ = problem.residual_fn(result.x, opt_params)
    covariance, intervals = sysid.calculate_intervals(residuals, result.jac)
    return FitResult(opt_params, to_sim_params(opt_params, base), np.asarray(intervals),
                     np.asarray(covariance), len(objective), wall, tuple(objective))
