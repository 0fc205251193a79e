"""Step many :class:`~simops_sim.physics.Physics` together, the per-step law vectorised (no rclpy).

``Physics.step`` runs the controller's law in Python before and after every ``mj_step``:
sample the trajectory plan, delay the command, apply the smooth friction, check the
protective stops. For one arm that costs about as much as the physics. :func:`step_together`
runs ``steps`` physics steps of every arm at once: the law on arrays of shape (n_arms, ...),
then each arm's own ``mj_step`` on its own model and data. Every arm ends bit for bit where
``physics.step(steps)`` would have left it (``tests/test_physics_batch.py``): the arithmetic
is the same element by element, and MuJoCo's is untouched.

Arms in a state the vectorised law does not cover (a multi-point or cubic plan, a gripper
ramp, a World's shared data) are stepped on their own with ``Physics.step``. This module is
``Physics.step``'s vectorised twin: it reads and writes the arms' private controller state
on purpose, and ``tests/test_physics_batch.py`` holds the two to the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from simops_sim.physics import Physics, contact_generalised
from simops_sim.trajectory_plan import KNOT_TOLERANCE


def _batchable(physics: Physics) -> bool:
    plan = physics._plan
    return (not physics.shared and physics._gripper_goal is None
            and (plan is None or (len(plan._knots) == 2 and plan.velocities is None)))


def step_together(arms: Sequence[Physics], steps: int) -> None:
    """Advance every arm ``steps`` physics steps, as ``arm.step(steps)`` each would."""
    together = [a for a in arms if _batchable(a)]
    for arm in arms:
        if not _batchable(arm):
            arm.step(steps)
    groups: dict[tuple[int, ...], list[Physics]] = {}
    for arm in together:   # one smooth-friction layout per group (the same model: one group)
        groups.setdefault(tuple(arm._smooth.dofs), []).append(arm)
    for group in groups.values():
        _Batch(group).run(steps)


@dataclass
class _Batch:
    """The vectorised state of arms of one layout, gathered from and written back to them."""

    arms: list[Physics]

    def __post_init__(self) -> None:
        arms, first = self.arms, self.arms[0]
        n = len(arms)
        self.arm_dof = first.index.arm_dof
        self.ids, self.slots = first._ids, first._slots
        self.ntarget = first.index.ctrl_ids.size
        self.command = np.stack([a._command for a in arms])          # (n, w)
        plans = [a._plan for a in arms]
        self.planned = np.array([p is not None for p in plans])
        self.start = np.array([p.start if p is not None else 0.0 for p in plans])
        self.knot0 = np.array([p._knots[0] if p is not None else 0.0 for p in plans])
        self.knot1 = np.array([p._knots[1] if p is not None else 1.0 for p in plans])
        zeros = np.zeros(self.arm_dof)
        self.first = np.stack([p.positions[0] if p is not None else zeros for p in plans])
        self.last = np.stack([p.positions[-1] if p is not None else zeros for p in plans])
        self.steps = np.stack([p._steps[0] if p is not None else zeros for p in plans])
        self.slopes = np.stack([p._slopes[0] if p is not None else zeros for p in plans])
        self.delay = np.array([a._delay.steps for a in arms])
        self.head = np.array([a._delay._head for a in arms])
        width = self.command.shape[1]
        self.buffer = np.zeros((n, max(1, int(self.delay.max())), width))
        for i, arm in enumerate(arms):
            self.buffer[i, :self.delay[i]] = arm._delay._buffer
        self.dofs = first._smooth.dofs
        self.level = np.stack([a._smooth.level for a in arms]) if self.dofs.size else None
        self.transition = (np.stack([a._smooth.transition for a in arms]) if self.dofs.size
                           else None)
        self.checked = [a._reflexes is not None and a.stop is None for a in arms]
        self.arm_qpos, self.arm_dofs = _slice(first._arm_qpos), _slice(first._arm_dofs)
        self.qvel = np.stack([a.data.qvel for a in arms])

    def run(self, steps: int) -> None:
        """``steps`` physics steps of every arm; then write the state back to the arms."""
        arms = self.arms
        n = len(arms)
        first = arms[0]
        delayed = np.empty_like(self.command)
        force = np.empty((n, self.dofs.size))
        qpos = np.stack([a.data.qpos for a in arms])
        generalised = np.zeros((n, first.model.nv))   # J^T f of the contact rows, per arm
        measured = np.zeros((n, 3, self.arm_dof))
        # bound once: the per-arm Python calls are most of the cost of a batched step
        calls = [(a.model, a.data, a.data.ctrl.put, a.data.qfrc_applied.put, a.data.qpos,
                  a.data.qvel) for a in arms]
        ids, dofs, smooth = self.ids, self.dofs, bool(self.dofs.size)
        direct = np.flatnonzero(self.delay == 0)
        ring = np.flatnonzero(self.delay > 0)
        lengths = self.delay[ring]
        for _ in range(steps):
            if self.planned.any():
                self._sample(np.array([call[1].time for call in calls]))
            # the command delay: each arm's ring buffer, as CommandDelay.push
            delayed[direct] = self.command[direct]
            if ring.size:
                heads = self.head[ring]
                delayed[ring] = self.buffer[ring, heads]
                self.buffer[ring, heads] = self.command[ring]
                self.head[ring] = (heads + 1) % lengths
            if smooth:   # SmoothFriction.apply, at the velocities before the step
                self.qvel.take(dofs, axis=1, out=force)
                np.divide(force, self.transition, out=force)
                np.tanh(force, out=force)
                np.multiply(force, self.level, out=force)
                np.negative(force, out=force)
            for i, (model, data, put_ctrl, put_force, now_qpos, now_qvel) in enumerate(calls):
                put_ctrl(ids, delayed[i])
                if smooth:
                    put_force(dofs, force[i])
                mujoco.mj_step(model, data)
                qpos[i] = now_qpos
                self.qvel[i] = now_qvel
                if self.checked[i]:
                    contact_generalised(model, data, generalised[i])
            self._check(qpos, generalised, measured)
        self._write_back()

    def _sample(self, now: np.ndarray) -> None:
        """TrajectoryPlan.sample of each arm's one-segment plan, then Physics._put_target."""
        t = now - self.start
        reached = t + KNOT_TOLERANCE
        out = np.multiply(((t - self.knot0) / (self.knot1 - self.knot0))[:, None], self.steps)
        out += self.first
        velocity = self.slopes
        done = self.planned & (reached >= self.knot1)
        ends = done | (self.planned & (reached <= self.knot0))
        if ends.any():   # before the first knot or past the last: that point, at rest
            out[done] = self.last[done]
            out[ends & ~done] = self.first[ends & ~done]
            velocity = np.where(ends[:, None], 0.0, velocity)
        arm, planned = self.arm_dof, self.planned
        if planned.all():
            self.command[:, :arm] = out
            self.command[:, self.ntarget:] = velocity[:, self.slots]
        else:
            self.command[planned, :arm] = out[planned]
            self.command[planned, self.ntarget:] = velocity[planned][:, self.slots]
        self.planned &= ~done

    def _check(self, qpos: np.ndarray, generalised: np.ndarray, measured: np.ndarray) -> None:
        """Reflexes.within for every checked arm; latch the stops, as Physics.check does.

        ``qpos`` (n, nq) and ``generalised`` (n, nv): each arm's positions and contact forces.
        """
        checked = np.flatnonzero(self.checked)
        if not checked.size:
            return
        measured[:, 0] = qpos[:, self.arm_qpos]
        measured[:, 1] = self.qvel[:, self.arm_dofs]
        measured[:, 2] = generalised[:, self.arm_dofs]
        reflexes = self.arms[checked[0]]._reflexes
        tripped = checked[~reflexes.inside(measured[checked])]
        for i in tripped:
            arm = self.arms[i]
            stop = arm._reflexes.measure(measured[i, 0], measured[i, 1], measured[i, 2],
                                         arm.time)
            if stop is not None:   # Physics._latch then hold(): the arm holds where it is
                arm.stop = stop
                self.checked[i] = False
                self.planned[i] = False
                self.command[i, :self.arm_dof] = measured[i, 0]
                self.command[i, self.ntarget:] = 0.0

    def _write_back(self) -> None:
        for i, arm in enumerate(self.arms):
            arm._command[:] = self.command[i]
            if not self.planned[i]:
                arm._plan = None
            if self.delay[i]:
                arm._delay._buffer[:] = self.buffer[i, :self.delay[i]]
                arm._delay._head = int(self.head[i])


def _slice(index: np.ndarray) -> slice | np.ndarray:
    """A slice for consecutive indices (a view, no gather per step), else the indices."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return index
