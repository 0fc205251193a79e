"""A parameter set's replay error, in raw units, and the command delay's error profile."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from mujoco import sysid

from simops_core.sim_params import SimParams
from simops_sysid.fit_parameters import (
    set_from_sim_params,
)
from simops_sysid.residual import Problem, Scales

# The median absolute value of a zero-mean normal error is 0.6745 of its standard deviation,
# so the median absolute error times 1 / 0.6745 is the RMS of normal errors, which one
# transient (a command the arm took late, a dropped sample) leaves unchanged.
NORMAL_MAD = 1.4826


@dataclass(frozen=True)
class Evaluation:
    """Replay error of one parameter set, in raw units, per fitted joint.

    ``rms_q`` (J,) rad, ``rms_qd`` (J,) rad/s, ``rms_effort`` (J,) N*m; ``cost`` is half
    the sum of squared scaled residuals; ``series`` (t, predicted, measured) per sequence,
    columns as in :class:`JointResidual`; ``typical`` (3,) the typical error of position
    (rad), velocity (rad/s) and effort (N*m) over every fitted joint and sample, robust to
    rare transients (:data:`NORMAL_MAD` times the median absolute error).
    """

    rms_q: np.ndarray
    rms_qd: np.ndarray
    rms_effort: np.ndarray
    cost: float
    series: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    typical: np.ndarray

    @property
    def rms_q_total(self) -> float:
        """RMS position error over every fitted joint and sample (rad)."""
        return float(np.sqrt(np.mean(self.rms_q ** 2)))


def evaluate(problem: Problem, params: sysid.ParameterDict, values: SimParams) -> Evaluation:
    """Replay every sequence with ``values`` (through ``params``' layout) and measure errors."""
    trial = params.copy()
    x = set_from_sim_params(trial, values, problem.residual.base)
    residuals, pred_lists, record_lists = problem.residual_fn(x, trial, return_pred_all=True)
    preds = [p[0] for p in pred_lists]        # one candidate model: the first of each list
    records = [m[0] for m in record_lists]
    predicted = np.vstack([p.data for p in preds])
    measured = np.vstack([m.data for m in records])
    joints = len(problem.residual.joints)
    error = (predicted - measured).reshape(-1, 3, joints)
    rms = np.sqrt(np.mean(error ** 2, axis=0))
    typical = typical_errors(error)
    flat = np.concatenate(residuals)
    series = tuple((m.times, p.data, m.data) for p, m in zip(preds, records, strict=True))
    return Evaluation(rms[0], rms[1], rms[2], 0.5 * float(flat @ flat), series, typical)


def typical_errors(error: np.ndarray) -> np.ndarray:
    """Typical size (3,) of replay errors ``error`` (N, 3, J): position, velocity, effort.

    :data:`NORMAL_MAD` times the median absolute error over the N samples and J joints of
    each signal, in its unit (rad, rad/s, N*m): the RMS of normal errors, robust to
    transients in fewer than half the samples.
    """
    signals = np.abs(error).transpose(1, 0, 2).reshape(error.shape[1], -1)
    return NORMAL_MAD * np.median(signals, axis=1)


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


def delay_starts(delays: np.ndarray, costs: np.ndarray, within: float = 1.5, most: int = 3
                 ) -> list[float]:
    """The delays (s) a fit starts from: the profile's local minima, the lowest first.

    ``delays`` (D,) s ascending and ``costs`` (D,) their errors; a minimum counts when its
    error is at most ``within`` times the lowest, and at most ``most`` of them do. LM from
    each, the best objective kept, is a multi-start search: a delay the controller's own
    lag imitates leaves a second valley.
    """
    inner = [i for i in range(delays.size)
             if (i == 0 or costs[i] <= costs[i - 1])
             and (i == delays.size - 1 or costs[i] <= costs[i + 1])]
    chosen = sorted((i for i in inner if costs[i] <= within * costs.min()),
                    key=lambda i: costs[i])[:most]
    return [float(delays[i]) for i in chosen]


def refined_delays(delays: np.ndarray, costs: np.ndarray, step: float, bound: float
                   ) -> np.ndarray:
    """The delays (s) between the profile's points around its valleys, every ``step`` s.

    ``delays`` (D,) s ascending at a coarse spacing and ``costs`` (D,) their errors: every
    whole ``step`` (the physics step) within one spacing of each start of
    :func:`delay_starts`, in [0, ``bound``], that ``delays`` does not hold yet. A stream
    that jitters by a millisecond at 1 kHz makes the valley as narrow as a step: on the
    stand-in its position error is 0.17 mrad at the true 3 ms and 0.23 at 4 ms, while the
    5 ms points of the coarse grid put the lowest at 5 ms.
    """
    spacing = float(np.min(np.diff(delays))) if delays.size > 1 else step
    steps = np.round(np.asarray(delays) / step)
    out: set[float] = set()
    for start in delay_starts(delays, costs):
        centre = round(start / step)
        reach = round(spacing / step)
        for k in range(centre - reach + 1, centre + reach):
            if 0 <= k * step <= bound + 1e-12 and k not in steps:
                out.add(k * step)
    return np.array(sorted(out))


def recording_scales(fit: Evaluation, floors: Scales) -> Scales:
    """Residual scales for velocity and effort set by a fit's errors relative to position's.

    ``floors`` are the scales sized for sensor noise (:class:`Scales`, ``--effort-scale``).
    Positions keep theirs; velocity and effort are weighed by their typical replay error in
    proportion to the positions' (``error * floors.q / position error``), as maximum
    likelihood with an unknown error level per signal would balance them, but never above
    their floors' weight. A real arm's velocities and link torques carry errors that no
    parameter here explains (Gaz et al.'s Panda: 17 mrad/s and 0.3 N*m RMS against
    0.7 mrad), which with the noise-sized scales outweigh the positions. The typical errors
    (:attr:`Evaluation.typical`) are robust: a command the arm took a few milliseconds
    late sets off a transient of tens of mrad/s for a few tens of ms, which would move an
    RMS by half on an arm the model explains to its noise.
    """
    position, velocity, effort = (float(v) for v in fit.typical)
    ratio = floors.q / max(position, 1e-9)
    return Scales(q=floors.q, qd=max(velocity * ratio, floors.qd),
                  effort=max(effort * ratio, floors.effort))
