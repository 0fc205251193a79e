"""The fit itself: Levenberg-Marquardt (mujoco.minimize) over mujoco.sysid's residual.

The Jacobian is finite-differenced in two phases: :class:`GroupedJacobian` (one rollout per
parameter kind) brings LM close to the optimum cheaply, then mujoco.minimize's own
finite differences (one rollout per parameter) finish the fit and give the Jacobian that
the confidence intervals use.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from mujoco import sysid
from mujoco.minimize import IterLog

from simops_core.sim_params import SimParams
from simops_sysid.fit_parameters import (
    JOINT_KINDS,
    to_sim_params,
)
from simops_sysid.residual import Problem

# LM regulariser growth per rejected step. mujoco.minimize starts at mu = 0 and grows by
# 10^0.1, so a rejected Gauss-Newton step from far off (the first one, typically) costs
# dozens of full rollouts; 10^0.5 reaches a useful mu in a few (fit time 90 -> 68 s on 60 s
# of data, same optimum).
MU_FACTOR = 10 ** 0.5


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
