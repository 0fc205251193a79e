"""The arm controller's law around every physics step, over arrays: one arm or many (no rclpy).

Before each MuJoCo step, an arm's controller (the simulator's model of franka_ros2's
``fr3_arm_controller`` on the arm's joint impedance):

1. samples its trajectory plan at the step's sim time into the position and velocity
   targets, as JointTrajectoryController samples its trajectory every control cycle
   (:mod:`simops_sim.trajectory_plan`);
2. ramps the gripper target towards a move goal at the goal's speed (franka_gripper's move);
3. delays the actuator command by whole physics steps (the command delay,
   :mod:`simops_sim.delay`: a ring of ``d`` commands);
4. with the arm's own joint-impedance law (a position interface's controller,
   :meth:`ArmLaws.set_feedforward`), adds the inverse-dynamics feedforward
   ``M(q_d) qdd_d + c(q_d, qd_d)`` of the delayed targets (:mod:`simops_sim.feedforward`;
   ``qdd_d`` the delayed desired velocity's central difference one step back, as ``fit``'s
   replay computes it) to the position servo's input as ``tau_ff / K``: the servo then applies
   ``K (q_d - q) + tau_ff`` exactly, and the effort reads it, as the arm's torque sensors do;
5. applies the smooth friction ``-c tanh(qd / v)`` at the velocities before the step
   (:mod:`simops_sim.friction`).

A row with a torque lag (a stand-in's hidden imperfection, :meth:`ArmLaws.set_torque_lag`)
steps in two halves: its joints receive the actuators' torque of the step through a
first-order lag, the efforts still read the actuators' torque.

After the step it checks the protective stops (:mod:`simops_sim.reflexes`); a stop latches
and the arm holds where it is, at rest. Then a row with a learned sensor model
(:mod:`simops_sim.sensor_model`) pushes the step's effort, velocity and acceleration into
its history at the model's rate; once the steps are done, every row that pushed reads what
its torque sensors report (one forward pass per model for all of its rows).

:class:`ArmLaws` holds this state for ``n`` arms as rows of arrays, and :func:`advance` runs
``steps`` physics steps of every row: a :class:`~simops_sim.physics.Physics` is one row
(n = 1), a :class:`~simops_sim.world.World` one row per arm over its shared data, and
:func:`simops_sim.physics_batch.step_together` many envs' rows stacked (:meth:`ArmLaws.stack`,
:meth:`ArmLaws.unstack`). Every row runs the same arithmetic in each of them, so an arm ends
bit for bit where it would have ended stepped on its own (``tests/sim/test_physics_batch.py``).
One-segment linear plans (streamed targets, the envs' actions) are sampled for all rows at
once; other plans by their own :meth:`~simops_sim.trajectory_plan.TrajectoryPlan.sample`.

Shapes: ``n`` rows; an arm of ``a`` joints (rad) drives ``w`` actuator inputs: ``a`` position
targets (rad), the gripper width (m), then the velocity targets (rad/s) of the arm joints
with a velocity actuator (``slots``); smooth friction acts on up to ``k`` dofs per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from simops_sim.feedforward import InverseDynamics, step_acceleration
from simops_sim.reflexes import ProtectiveStop, ReflexBank, Reflexes
from simops_sim.sensor_model import SensorModel, groups, sense
from simops_sim.trajectory_plan import KNOT_TOLERANCE, TrajectoryPlan


def contact_generalised(model: mujoco.MjModel, data: mujoco.MjData, out: np.ndarray) -> None:
    """Write the generalised force (nv,) of the contact rows of the constraint solution.

    ``J^T f``: what the arm's external-torque estimate sees of a collision (joint limits and
    the other constraints excluded). MuJoCo orders the rows equality, friction, limit,
    contact, so the contact rows are the last ``nefc - (ne + nf + nl)``.
    """
    first = data.ne + data.nf + data.nl
    if data.nefc == first:
        out[:] = 0.0
        return
    force = np.zeros(data.nefc)
    force[first:] = data.efc_force[first:]
    mujoco.mj_mulJacTVec(model, data, out, force)


# ArmLaws' arrays with one row per arm, besides command, ring, level and transition
_ROW_ARRAYS = ('linear', 'start', 'knot0', 'knot1', 'span', 'first', 'last', 'step', 'slope',
               'ramp', 'delay', 'head', 'stiffness', 'previous', 'earlier', 'torque_bias',
               'inputs', 'inputs_time', 'sample_at', 'sensed', 'outside', 'lag_weight',
               'lagged')
SAMPLE_TOLERANCE = 1e-9   # s: a sample time this close after a step's end is the step's


@dataclass(frozen=True)
class ArmSite:
    """Where one arm acts in MuJoCo: its model and data, and its addresses there.

    ``ids`` (w,): the actuators the command drives, in command order; ``qpos`` and ``dofs``
    (a,): the arm joints' qpos and dof addresses.
    """

    model: mujoco.MjModel
    data: mujoco.MjData
    ids: np.ndarray
    qpos: np.ndarray
    dofs: np.ndarray


class ArmLaws:
    """The controller state of ``n`` arms, one row each; see the module docstring.

    ``command`` (n, w) is the actuator input each arm's controller sets now (before the
    delay); ``arm`` = a; ``slots`` (w - a - 1,) the arm joints whose velocity target each
    velocity input takes (the same layout for every row).
    """

    def __init__(self, command: np.ndarray, arm: int, slots: np.ndarray) -> None:
        n, width = command.shape
        self.command = command
        self.arm, self.slots = arm, slots
        self.plans: list[TrajectoryPlan | None] = [None] * n
        # The rows' one-segment linear plans, sampled together: the segment's sim start (s),
        # knots and their span (s from the start), first and last points and step (a,) rad,
        # and slope at the velocity slots (rad/s).
        self.linear = np.zeros(n, bool)
        self.start, self.knot0, self.knot1 = np.zeros(n), np.zeros(n), np.ones(n)
        self.span = np.ones(n)
        self.first, self.last = np.zeros((n, arm)), np.zeros((n, arm))
        self.step, self.slope = np.zeros((n, arm)), np.zeros((n, width - arm - 1))
        self.ramp = np.full((n, 2), np.nan)   # gripper goal: width m, speed m/s; NaN: none
        self.delay = np.zeros(n, int)         # command delay (physics steps)
        self.ring = np.zeros((n, 0, width))   # the delayed commands, oldest at head
        self.head = np.zeros(n, int)
        self.friction_dofs: list[np.ndarray] = [np.zeros(0, int)] * n
        self.level, self.transition = np.zeros((n, 0)), np.ones((n, 0))   # N*m, rad/s
        # the impedance law's feedforward: each row's inverse dynamics (None: none), its
        # stiffness (a,) N*m/rad, and the delayed desired velocity (a,) rad/s one and two
        # steps ago
        self.dynamics: list[InverseDynamics | None] = [None] * n
        self.stiffness = np.ones((n, arm))
        self.previous, self.earlier = np.zeros((n, arm)), np.zeros((n, arm))
        self.reflexes: list[Reflexes | None] = [None] * n
        self.stops: list[ProtectiveStop | None] = [None] * n
        # the learned sensor model: each row's (None: none), its input history (3, W, a)
        # newest first, the torque-sensor bias (a,) N*m in its effort input, the last step's
        # inputs (3, a) and their sim time (s), the next sample's time (s), what the sensors
        # read (a,) N*m, and how many samples left the model's training range
        self.sensors: list[SensorModel | None] = [None] * n
        self.history = np.zeros((n, 3, 0, arm))
        self.torque_bias = np.zeros((n, arm))
        self.inputs = np.zeros((n, 3, arm))
        self.inputs_time, self.sample_at = np.zeros(n), np.zeros(n)
        self.sensed = np.zeros((n, arm))
        self.outside = np.zeros(n, int)
        # a stand-in's hidden torque lag (:meth:`set_torque_lag`): each row's filter weight a
        # step (0: none) and the torque its arm joints receive (a,) N*m
        self.lag_weight = np.zeros(n)
        self.lagged = np.zeros((n, arm))
        self.runs: dict[int, _Run] = {}   # advance's bindings per sites; see :meth:`changed`

    def changed(self) -> None:
        """Forget :func:`advance`'s bindings: the delay, friction or reflexes changed."""
        self.runs.clear()

    @property
    def rows(self) -> int:
        """How many arms."""
        return len(self.plans)

    def follow(self, row: int, plan: TrajectoryPlan | None) -> None:
        """Row ``row`` samples ``plan`` from the next step on (None: keeps its targets)."""
        self.plans[row] = plan
        linear = plan is not None and len(plan.times) == 2 and plan.velocities is None
        self.linear[row] = linear
        if linear:   # the arithmetic of TrajectoryPlan's own knots, steps and slopes
            self.start[row] = plan.start
            self.knot0[row], self.knot1[row] = plan.times
            self.span[row] = plan.times[1] - plan.times[0]
            self.first[row], self.last[row] = plan.positions
            np.subtract(plan.positions[1], plan.positions[0], out=self.step[row])
            self.slope[row] = (self.step[row] / self.span[row])[self.slots]

    def put_target(self, row: int, q: np.ndarray, qd: np.ndarray | None) -> None:
        """Row ``row``'s arm targets: position ``q`` (a,) rad, velocity ``qd`` (a,) rad/s."""
        command, arm = self.command[row], self.arm
        command[:arm] = q
        if qd is None:
            command[arm + 1:] = 0.0
        else:
            np.take(qd, self.slots, out=command[arm + 1:])

    def set_delay(self, row: int, steps: int) -> None:
        """Row ``row`` delays its commands by ``steps`` physics steps, none queued yet."""
        self.changed()
        self.delay[row] = steps
        if steps > self.ring.shape[1]:
            ring = np.zeros((self.rows, steps, self.command.shape[1]))
            ring[:, :self.ring.shape[1]] = self.ring
            self.ring = ring
        self.fill_delay(row)

    def next_delayed(self, row: int) -> np.ndarray:
        """Row ``row``'s oldest queued command (w,): the next its actuators see (a view).

        Meaningful with a delay (``delay[row] > 0``); without one there is no queue.
        """
        return self.ring[row, self.head[row]]

    def fill_delay(self, row: int) -> None:
        """Forget row ``row``'s queued commands: the next ``d`` it applies are its command."""
        self.ring[row] = self.command[row]
        self.head[row] = 0
        self._rest_velocity(row)

    def _rest_velocity(self, row: int) -> None:
        """Row ``row``'s past desired velocities: its command's, as if it had always held."""
        self.previous[row] = 0.0
        self.previous[row, self.slots] = self.command[row, self.arm + 1:]
        self.earlier[row] = self.previous[row]

    def set_feedforward(self, row: int, dynamics: InverseDynamics | None,
                        stiffness: np.ndarray | None = None) -> None:
        """Row ``row`` adds ``dynamics``' feedforward (None: none) over ``stiffness`` (a,).

        ``stiffness`` N*m/rad: the position servos' gains the feedforward is added through.
        """
        self.changed()
        self.dynamics[row] = dynamics
        if stiffness is not None:
            self.stiffness[row] = stiffness
        self._rest_velocity(row)

    def set_friction(self, row: int, dofs: np.ndarray, level: np.ndarray,
                     transition: np.ndarray) -> None:
        """Row ``row``'s smooth friction: Coulomb ``level`` (k,) N*m, ``transition`` (k,) rad/s."""
        self.changed()
        k = len(dofs)
        if k > self.level.shape[1]:
            grow = k - self.level.shape[1]
            self.level = np.pad(self.level, ((0, 0), (0, grow)))
            self.transition = np.pad(self.transition, ((0, 0), (0, grow)), constant_values=1.0)
        self.friction_dofs[row] = np.array(dofs, int)
        self.level[row], self.transition[row] = 0.0, 1.0
        self.level[row, :k], self.transition[row, :k] = level, transition

    def set_sensor(self, row: int, model: SensorModel | None, bias: np.ndarray,
                   site: ArmSite) -> None:
        """Row ``row`` reports its efforts through ``model`` (None: the parametric effort).

        ``bias`` (a,) N*m: the torque-sensor bias of the SimParams, part of the model's effort
        input as of the parametric effort; ``site``: where the row acts (its history starts
        from the state there, :meth:`fill_sensor`).
        """
        self.changed()
        self.sensors[row] = model
        self.torque_bias[row] = bias
        if model is not None and model.window > self.history.shape[2]:
            self.history = _pad(self.history, model.window, 2, 0.0)
        self.fill_sensor(row, site)

    def fill_sensor(self, row: int, site: ArmSite) -> None:
        """Row ``row``'s sensor history from the state at ``site`` now, as if it had always held.

        After a reset (and a forward pass): every lag holds the present inputs, as the fit
        pads a recording's start.
        """
        model = self.sensors[row]
        if model is None:
            return
        read_inputs(site, self.torque_bias[row], self.inputs[row])
        self.history[row] = self.inputs[row][:, None, :]
        self.inputs_time[row] = site.data.time
        self.sample_at[row] = site.data.time + model.period
        sense([(model, np.array([row]))], self.history, self.sensed)

    def set_torque_lag(self, row: int, seconds: float, timestep: float, site: ArmSite) -> None:
        """Row ``row``'s arm joints receive its actuators' torque through a first-order lag.

        ``seconds``: the lag's time constant (0: none); ``timestep`` s: the physics step. A
        stand-in's hidden imperfection, which no SimParams field expresses: the efforts
        still read the actuators' torque (``qfrc_actuator``), the motion follows the lagged
        torque, so the measured torque leads what the motion's dynamics imply, as on a real
        arm's joints. The lag starts at the torque at ``site`` now (:meth:`fill_lag`).
        """
        self.changed()
        self.lag_weight[row] = -np.expm1(-timestep / seconds) if seconds > 0.0 else 0.0
        self.fill_lag(row, site)

    def fill_lag(self, row: int, site: ArmSite) -> None:
        """Row ``row``'s lagged torque from the actuators' torque at ``site`` now (forwarded)."""
        site.data.qfrc_actuator.take(site.dofs, out=self.lagged[row])

    @classmethod
    def stack(cls, laws: Sequence[ArmLaws]) -> ArmLaws:
        """One :class:`ArmLaws` of every row of ``laws`` in order (copies), of one layout."""
        first = laws[0]
        out = cls(np.concatenate([x.command for x in laws]), first.arm, first.slots)
        for name in _ROW_ARRAYS:
            setattr(out, name, np.concatenate([getattr(x, name) for x in laws]))
        depth = max(x.ring.shape[1] for x in laws)
        k = max(x.level.shape[1] for x in laws)
        out.ring = np.concatenate([_pad(x.ring, depth, 1, 0.0) for x in laws])
        out.level = np.concatenate([_pad(x.level, k, 1, 0.0) for x in laws])
        out.transition = np.concatenate([_pad(x.transition, k, 1, 1.0) for x in laws])
        window = max(x.history.shape[2] for x in laws)
        out.history = np.concatenate([_pad(x.history, window, 2, 0.0) for x in laws])
        for name in ('plans', 'friction_dofs', 'reflexes', 'stops', 'dynamics', 'sensors'):
            setattr(out, name, [v for x in laws for v in getattr(x, name)])
        return out

    def unstack(self, laws: Sequence[ArmLaws]) -> None:
        """Write the rows back into the ``laws`` :meth:`stack` took them from, in order."""
        row = 0
        for x in laws:
            rows = slice(row, row + x.rows)
            x.command[:] = self.command[rows]
            for name in _ROW_ARRAYS:
                getattr(x, name)[:] = getattr(self, name)[rows]
            x.ring[:] = self.ring[rows, :x.ring.shape[1]]
            x.history[:] = self.history[rows, :, :x.history.shape[2]]
            x.plans[:] = self.plans[rows]
            x.stops[:] = self.stops[rows]
            row += x.rows


def _pad(array: np.ndarray, size: int, axis: int, value: float) -> np.ndarray:
    """``array`` padded with ``value`` to ``size`` along ``axis``."""
    grow = size - array.shape[axis]
    if not grow:
        return array
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, grow)
    return np.pad(array, widths, constant_values=value)


def read_inputs(site: ArmSite, bias: np.ndarray, out: np.ndarray) -> None:
    """A sensor model's inputs (3, a) at ``site`` now: effort N*m, velocity, acceleration.

    The effort is the parametric one (``qfrc_actuator`` plus ``bias``), as
    :meth:`~simops_sim.physics.Physics.read_joints` reports it without a model.
    """
    data = site.data
    data.qfrc_actuator.take(site.dofs, out=out[0])
    out[0] += bias
    data.qvel.take(site.dofs, out=out[1])
    data.qacc.take(site.dofs, out=out[2])


def input_views(site: ArmSite) -> list[np.ndarray] | None:
    """Views of :func:`read_inputs`' sources at ``site``, for one copy a step.

    The effort (without the bias), velocity and acceleration; None when the arm's dofs are
    not contiguous.
    """
    dofs = site.dofs
    first = int(dofs[0]) if dofs.size else 0
    if not np.array_equal(dofs, np.arange(first, first + dofs.size)):
        return None
    data = site.data
    return [source[first:first + dofs.size]
            for source in (data.qfrc_actuator, data.qvel, data.qacc)]


def advance(laws: ArmLaws, sites: Sequence[ArmSite], steps: int) -> None:
    """Run ``steps`` physics steps of every row of ``laws``; row i acts at ``sites[i]``.

    Rows may share a data (the arms of one world): it is stepped once per step, after every
    row set its inputs, and checked after. See the module docstring for the law.
    """
    run = laws.runs.get(id(sites))
    if run is None or run.sites is not sites:
        run = laws.runs[id(sites)] = _Run(laws, sites)
    run.advance(steps)


class _Run:
    """:func:`advance` over fixed ``sites``: what does not change between calls, bound once."""

    def __init__(self, laws: ArmLaws, sites: Sequence[ArmSite]) -> None:
        self.laws, self.sites = laws, sites
        bodies: dict[int, tuple[mujoco.MjModel, mujoco.MjData]] = {}
        for site in sites:
            bodies.setdefault(id(site.data), (site.model, site.data))
        self.steppers = list(bodies.values())
        self.datas = [site.data for site in sites]
        self.now = np.zeros(laws.rows)   # each row's sim time (s)
        self.delayed = np.empty_like(laws.command)
        self.putters = [(site.data.ctrl.put, site.ids) for site in sites]
        self.timesteps = np.array([site.model.opt.timestep for site in sites])
        # smooth friction: each row's dofs, and views of its velocities and forces (k_i,)
        self.velocity = np.zeros_like(laws.level)
        self.force = np.empty_like(self.velocity)
        self.friction = [(self.datas[i].qvel, self.datas[i].qfrc_applied.put, dofs,
                          self.velocity[i, :dofs.size], self.force[i, :dofs.size])
                         for i, dofs in enumerate(laws.friction_dofs) if dofs.size]
        self.checks = _Checks(laws, sites, self.steppers)
        # the learned sensor models' rows, their data and dofs, bias (m, a) N*m, period (m,)
        # s and training range (m, 3, a); scratch for their inputs (m, 3, a) and sim times
        sensors = [(i, model) for i, model in enumerate(laws.sensors) if model is not None]
        self.sensing = np.array([i for i, _ in sensors], int)
        self.every_row = len(sensors) == laws.rows
        self.sensor_sites = [sites[i] for i, _ in sensors]
        self.sensor_groups = groups(laws.sensors, self.sensing)
        self.sensor_bias = laws.torque_bias[self.sensing].copy()
        self.sensor_period = np.array([model.period for _, model in sensors])
        self.sensor_low = np.array([model.low for _, model in sensors]).reshape(-1, 3, laws.arm)
        self.sensor_high = np.array([model.high for _, model in sensors]).reshape(-1, 3,
                                                                                 laws.arm)
        self.sensor_now = np.zeros((len(sensors), 3, laws.arm))
        self.sensor_flat = self.sensor_now.reshape(-1)
        # views of each row's effort, velocity and acceleration, in sensor_now's order
        views = [input_views(site) for site in self.sensor_sites]
        self.sensor_views = (None if None in views
                             else [view for row in views for view in row])
        self.sensor_end = np.zeros(len(sensors))
        self.sensor_pushed = np.zeros(len(sensors), bool)
        # the impedance law's rows: inverse dynamics, step (s), and scratch (a,) for the
        # delayed velocity, acceleration and torque
        self.impedance = [(i, dynamics, float(self.timesteps[i]), np.zeros(laws.arm),
                           np.zeros(laws.arm), np.zeros(laws.arm))
                          for i, dynamics in enumerate(laws.dynamics) if dynamics is not None]
        self.sampled = np.zeros((2, laws.arm))   # a general plan's position and velocity
        delay = laws.delay
        self.ring, self.direct = np.flatnonzero(delay > 0), np.flatnonzero(delay == 0)
        self.lengths = delay[self.ring]
        self.depth = int(delay[0]) if (delay == delay[0]).all() else None   # one for all
        # the torque-lag rows of each stepped data (none: one mj_step), with scratch (a,) for
        # the actuators' torque and the correction the step adds to qfrc_applied
        lagging = {id(data): [] for _, data in self.steppers}
        for i in np.flatnonzero(laws.lag_weight > 0.0):
            lagging[id(self.datas[i])].append((int(i), sites[i].dofs, np.zeros(laws.arm),
                                               np.zeros(laws.arm)))
        self.lagging = [lagging[id(data)] for _, data in self.steppers]

    def advance(self, steps: int) -> None:
        laws, arm, command, delayed = self.laws, self.laws.arm, self.laws.command, self.delayed
        n = laws.rows
        general = [i for i, plan in enumerate(laws.plans)
                   if plan is not None and not laws.linear[i]]
        sampled = self.sampled
        goals = laws.ramp[:, 0]
        ramping = np.flatnonzero(goals == goals)   # rows with a gripper goal (NaN: none)
        if ramping.size:
            reach = self.timesteps[ramping] * laws.ramp[ramping, 1]   # m per step
        # one delay and one ring position for all rows (one arm, or envs stepped in step)
        depth = self.depth
        uniform = depth is not None and (n == 1 or bool((laws.head == laws.head[0]).all()))
        ring, direct, lengths = self.ring, self.direct, self.lengths
        head = int(laws.head[0])
        for _ in range(steps):
            if laws.linear.any():
                for i, data in enumerate(self.datas):
                    self.now[i] = data.time
                _sample_linear(laws, self.now)
            for i in general:
                plan = laws.plans[i]
                if plan is None:   # a stop ended it
                    continue
                finished = plan.sample(self.datas[i].time, sampled[0], sampled[1])
                laws.put_target(i, sampled[0], sampled[1])
                if finished:
                    laws.follow(i, None)
            if ramping.size:   # the gripper target towards its goal, at most speed * dt a step
                now = command[ramping, arm]
                command[ramping, arm] = now + np.clip(laws.ramp[ramping, 0] - now, -reach,
                                                      reach)
            # the command delay: each row's ring hands out its oldest command, takes the new
            if uniform and depth:
                delayed[:] = laws.ring[:, head]
                laws.ring[:, head] = command
                head = (head + 1) % depth
            elif uniform:
                delayed[:] = command
            else:
                delayed[direct] = command[direct]
                heads = laws.head[ring]
                delayed[ring] = laws.ring[ring, heads]
                laws.ring[ring, heads] = command[ring]
                laws.head[ring] = (heads + 1) % lengths
            for i, dynamics, dt, velocity, acceleration, torque in self.impedance:
                row, previous, earlier = delayed[i], laws.previous[i], laws.earlier[i]
                velocity[laws.slots] = row[arm + 1:]
                step_acceleration(velocity, earlier, dt, acceleration)
                earlier[:] = previous
                previous[:] = velocity
                dynamics(row[:arm], velocity, acceleration, torque)
                torque /= laws.stiffness[i]
                row[:arm] += torque
            if self.friction:   # -c tanh(qd / v) at the velocities before the step
                force = self.force
                for qvel, _, dofs, now_qd, _ in self.friction:
                    qvel.take(dofs, out=now_qd)
                np.divide(self.velocity, laws.transition, out=force)
                np.tanh(force, out=force)
                np.multiply(force, laws.level, out=force)
                np.negative(force, out=force)
                for _, put, dofs, _, row in self.friction:
                    put(dofs, row)
            for i, (put, ids) in enumerate(self.putters):
                put(ids, delayed[i])
            for (model, data), lagging in zip(self.steppers, self.lagging, strict=True):
                if lagging:
                    self.lagged_step(model, data, lagging)
                else:
                    mujoco.mj_step(model, data)
            if self.checks.rows:
                self.checks.run()
            if self.sensor_sites:
                self.sense()
        if uniform and depth:
            laws.head[:] = head
        if self.sensor_sites:   # read once the steps are done: nothing reads it in between
            self.evaluate()

    def lagged_step(self, model: mujoco.MjModel, data: mujoco.MjData,
                    lagging: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """One physics step in which ``lagging``'s rows receive their lagged torque.

        The actuators' torque ``u`` of the step is MuJoCo's own (``mj_fwdActuation`` after
        ``mj_step1``); each row's lagged torque ``y += w (u - y)``; the step adds ``y - u``
        to the joints' applied forces, so they receive ``y``, and takes it away after.
        """
        mujoco.mj_step1(model, data)
        mujoco.mj_fwdActuation(model, data)
        weights, lagged = self.laws.lag_weight, self.laws.lagged
        for i, dofs, torque, correction in lagging:
            data.qfrc_actuator.take(dofs, out=torque)
            lagged[i] += weights[i] * (torque - lagged[i])
            np.subtract(lagged[i], torque, out=correction)
            data.qfrc_applied[dofs] += correction
        mujoco.mj_step2(model, data)
        for _, dofs, _, correction in lagging:
            data.qfrc_applied[dofs] -= correction

    def sense(self) -> None:
        """Push the samples each sensing row's step passed into its history.

        The inputs at each sample time in the step are interpolated between the step's start
        and end (the end's own, exactly, at the end). :meth:`evaluate` reads the model.
        """
        laws, now, rows, end = self.laws, self.sensor_now, self.sensing, self.sensor_end
        if self.sensor_views is not None:   # every row's arm dofs contiguous: one copy
            np.concatenate(self.sensor_views, out=self.sensor_flat)
            now[:, 0] += self.sensor_bias
        else:
            for j, site in enumerate(self.sensor_sites):
                read_inputs(site, self.sensor_bias[j], now[j])
        for j, site in enumerate(self.sensor_sites):
            end[j] = site.data.time
        due = laws.sample_at
        if self.every_row and (abs(due[0] - end[0]) <= SAMPLE_TOLERANCE if len(due) == 1
                               else (np.abs(due - end) <= SAMPLE_TOLERANCE).all()):
            # the usual case (the step is the model's period): one sample, the step's end
            _shift_in(laws.history, now)
            beyond = (now < self.sensor_low) | (now > self.sensor_high)
            if beyond.any():
                laws.outside += beyond.any(axis=(1, 2))
            due += self.sensor_period
            laws.inputs[:], laws.inputs_time[:] = now, end
            self.sensor_pushed[:] = True
            return
        start, before, due = laws.inputs_time[rows], laws.inputs[rows], laws.sample_at[rows]
        while True:
            pushing = due <= end + SAMPLE_TOLERANCE
            if not pushing.any():
                break
            fraction = (due - start) / (end - start)
            sample = before + fraction[:, None, None] * (now - before)
            at_end = due >= end - SAMPLE_TOLERANCE
            sample[at_end] = now[at_end]
            if self.every_row and pushing.all():
                _shift_in(laws.history, sample)
            else:
                pushed = rows[pushing]
                history = laws.history[pushed]
                _shift_in(history, sample[pushing])
                laws.history[pushed] = history
            beyond = ((sample < self.sensor_low) | (sample > self.sensor_high)).any(axis=(1, 2))
            laws.outside[rows] += beyond & pushing
            due = np.where(pushing, due + self.sensor_period, due)
            self.sensor_pushed |= pushing
        laws.sample_at[rows], laws.inputs[rows], laws.inputs_time[rows] = due, now, end

    def evaluate(self) -> None:
        """What the sensors of every row that pushed read now: one forward pass per model."""
        pushed = self.sensor_pushed
        if pushed.all():   # the usual case: the groups bound once
            sense(self.sensor_groups, self.laws.history, self.laws.sensed)
        elif pushed.any():
            sense(groups(self.laws.sensors, self.sensing[pushed]), self.laws.history,
                  self.laws.sensed)
        pushed[:] = False


def _shift_in(history: np.ndarray, sample: np.ndarray) -> None:
    """Shift ``sample`` (k, 3, a) into ``history`` (k, 3, W, a) as its newest lag, in place."""
    history[:, :, 1:] = history[:, :, :-1]
    history[:, :, 0] = sample


def _sample_linear(laws: ArmLaws, now: np.ndarray) -> None:
    """Sample every row's one-segment linear plan at its sim ``now`` (n,) s into its targets.

    TrajectoryPlan.sample's arithmetic, element by element: the first point before the
    segment, the last point after it (both at rest), in between the first point plus the
    step times the elapsed fraction, at the slope.
    """
    arm, rows, command = laws.arm, laws.linear, laws.command
    t = now - laws.start
    reached = t + KNOT_TOLERANCE
    done, before = reached >= laws.knot1, reached <= laws.knot0
    fraction = np.divide(t - laws.knot0, laws.span)[:, None]
    if not np.count_nonzero(done | before | ~rows):   # every row inside its segment
        targets = command[:, :arm]
        np.multiply(fraction, laws.step, out=targets)
        targets += laws.first
        command[:, arm + 1:] = laws.slope
        return
    out = np.multiply(fraction, laws.step)
    out += laws.first
    velocity = laws.slope
    done &= rows
    ends = done | (rows & before)
    if ends.any():
        out[done] = laws.last[done]
        out[ends & ~done] = laws.first[ends & ~done]
        velocity = np.where(ends[:, None], 0.0, velocity)
    command[rows, :arm] = out[rows]
    command[rows, arm + 1:] = velocity[rows]
    for i in np.flatnonzero(done):
        laws.follow(int(i), None)


class _Checks:
    """The protective-stop checks of :func:`advance`'s rows after every step."""

    def __init__(self, laws: ArmLaws, sites: Sequence[ArmSite],
                 steppers: Sequence[tuple[mujoco.MjModel, mujoco.MjData]]) -> None:
        self.laws, self.sites = laws, sites
        self.rows = [i for i in range(laws.rows) if laws.reflexes[i] is not None]
        self.everyone = len(self.rows) == laws.rows
        self.bank = ReflexBank([laws.reflexes[i] for i in self.rows]) if self.rows else None
        self.measured = np.zeros((3, len(self.rows), laws.arm))   # q, qd, contact torque
        # J^T f of the contacts, once per data that a checked row acts in
        generalised = {id(data): np.zeros(model.nv) for model, data in steppers}
        self.contacts = [(model, data, generalised[id(data)]) for model, data in steppers
                         if any(sites[i].data is data for i in self.rows)]
        self.reads = [(sites[i].data, sites[i].qpos, sites[i].dofs,
                       generalised[id(sites[i].data)], self.measured[:, j])
                      for j, i in enumerate(self.rows)]

    def run(self) -> None:
        """Latch the stop each row's measured state trips, if it has none yet."""
        stops = self.laws.stops
        if (None not in stops) if self.everyone else all(stops[i] is not None
                                                         for i in self.rows):
            return   # every checked arm has stopped
        for model, data, out in self.contacts:
            contact_generalised(model, data, out)
        for data, qpos, dofs, generalised, measured in self.reads:
            data.qpos.take(qpos, out=measured[0])
            data.qvel.take(dofs, out=measured[1])
            generalised.take(dofs, out=measured[2])
        inside = self.bank.inside(self.measured)
        if inside.all():
            return
        laws = self.laws
        for j in np.flatnonzero(~inside):
            i, measured = self.rows[j], self.measured[:, j]
            if stops[i] is not None:
                continue
            stop = laws.reflexes[i].measure(measured[0], measured[1], measured[2],
                                            float(self.sites[i].data.time))
            if stop is not None:   # the arm holds where it is, at rest
                stops[i] = stop
                laws.follow(i, None)
                laws.put_target(i, measured[0], None)
