"""The MuJoCo physics wrapper shared by the simulator node, the Gym env and sysid (no rclpy).

Conventions, for every array this module takes or returns:

- joint arrays have shape (9,) in ``spec.joint_names`` order: the 7 arm joints (rad, rad/s,
  N*m) then the 2 finger joints (m, m/s, N);
- an arm target has shape (7,) in ``spec.arm_joints`` order (rad); the gripper target is the
  finger opening width (m), the length of the model's ``gripper_width`` tendon;
- poses are in the robot base frame (body ``spec.base_frame``): position (3,) in m and
  quaternion (4,) as MuJoCo orders it, (w, x, y, z);
- effort is the joint actuator torque ``qfrc_actuator`` at the joint's dof (N*m, N for the
  fingers). The model compensates gravity through the actuators (``actuatorgravcomp``), so
  the effort includes the gravity-holding torque: at rest it equals g(q). That is the
  convention of Franka's measured link-side torque ``tau_J``, which franka_ros2 publishes as
  ``effort`` on ``joint_states``; passive damping and friction torques are not included.
  With a learned sensor model named by the SimParams (``actuator_model``,
  :mod:`simops_sim.sensor_model`), the arm's effort is what that model says the torque
  sensors read of this one; the motion is the same bit for bit.

Physics parameters come from a :class:`~simops_core.sim_params.SimParams` through
:func:`simops_sim.model_params.apply_sim_params`, the one code path that the node, the env
and sysid share; the model's index is :mod:`simops_sim.model_index`'s, the smooth friction
:mod:`simops_sim.friction`'s.

With ``reflexes`` (the node and the env; not sysid's replays) the arm stops itself as a
real Franka arm does (:mod:`simops_sim.reflexes`): the stop latches in :attr:`Physics.stop`,
the arm holds, and commands are refused until :meth:`Physics.clear_stop` (ErrorRecovery) or
a reset.

The arm runs one of two controller laws (:meth:`Physics.set_controller`): franka_ros2's
effort JointTrajectoryController (``joint_trajectory``, the default), or the arm's own
joint-impedance loop behind a position interface (``joint_impedance``: the spec's stiffer
gains plus the dynamics feedforward of :mod:`simops_sim.feedforward`), each with its gains
from :func:`simops_sim.model_params.controller_gains`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec, gripper_width
from simops_core.sim_params import CONTROLLER_LAWS, SimParams
from simops_sim.actuator_law import ArmLaws, ArmSite, advance, contact_generalised
from simops_sim.delay import delay_steps
from simops_sim.feedforward import InverseDynamics
from simops_sim.friction import SmoothFriction
from simops_sim.model_index import index_model, keyframe_id, write_gains
from simops_sim.model_params import (
    apply_sim_params,
    controller_gains,
    controller_model,
    nominal_sim_params,
    sensor_bias,
)
from simops_sim.reflexes import ProtectiveStop, Reflexes
from simops_sim.sensor_model import load_sensor_model
from simops_sim.trajectory_plan import TrajectoryPlan

MAX_SPEED = 100.0   # rad/s or m/s; any faster dof means the integration diverged


@dataclass(frozen=True)
class SimState:
    """A snapshot of the simulation (copies; safe to keep). See the module docstring."""

    time: float                      # s of sim time
    position: np.ndarray             # (9,)
    velocity: np.ndarray             # (9,)
    effort: np.ndarray               # (9,)
    flange_pos: np.ndarray           # (3,) m, base frame
    flange_quat: np.ndarray          # (4,) w, x, y, z
    object_pos: np.ndarray | None    # (3,) or None without an object
    object_quat: np.ndarray | None   # (4,)


class Physics:
    """One MuJoCo model and data, driven by arm position targets and a gripper width.

    ``step`` runs the actuator law (:mod:`simops_sim.actuator_law`) on this arm's one row,
    :attr:`law`; a command delay (from ``SimParams``) sits between the targets and the
    actuators. Same model, params, reset and target sequence give bit-identical states.
    ``reflexes``: stop on the arm's limits (module docstring).
    """

    def __init__(self, model: mujoco.MjModel, spec: RobotSpec,
                 joint_map: Mapping[str, str] | None = None,
                 params: SimParams | None = None, reflexes: bool = False,
                 prefix: str = '', data: mujoco.MjData | None = None) -> None:
        self.model = model
        self.spec = spec
        self.index = index_model(model, spec, joint_map, prefix)
        arm = self.index.arm_dof
        self._generalised = np.zeros(model.nv)
        self._arm_dofs = self.index.dof_adr[:arm]
        self.nominal = nominal_sim_params(model, self.index)
        self.shared = data is not None   # one arm of a World, which writes the model and resets
        self.data = mujoco.MjData(model) if data is None else data
        self.params = SimParams()
        self.controller = CONTROLLER_LAWS[0]   # the controller law in force
        dampers = self.index.velocity_ids
        slots = np.flatnonzero(dampers >= 0)   # arm joints with a velocity actuator
        ids = np.concatenate((self.index.ctrl_ids, dampers[slots]))
        self.site = ArmSite(model, self.data, ids, self.index.qpos_adr[:arm].copy(),
                            self._arm_dofs.copy())
        # The controller's state: this arm's row of the actuator law. Its command holds the
        # actuator inputs, delayed as one vector: (8,) arm rad and gripper m, then rad/s.
        self.law = ArmLaws(np.zeros((1, ids.size)), arm, slots)
        self.law.reflexes[0] = Reflexes(spec) if reflexes else None
        self.sites = (self.site,)   # advance's sites: one tuple, so its bindings are kept
        self._command = self.law.command[0]
        self._target = self._command[:self.index.ctrl_ids.size]
        self._velocity = self._command[self.index.ctrl_ids.size:]
        self._bias = np.zeros((2, len(self.index.joint_names)))   # encoder rad, torque N*m
        gripper = self.index.ctrl_ids[-1]
        self._gripper_force = float(model.actuator_forcerange[gripper, 1])   # N, the model's
        warning = mujoco.mjtWarning
        self._reset_warnings = tuple(self.data.warning[w] for w in (
            warning.mjWARN_BADQPOS, warning.mjWARN_BADQVEL, warning.mjWARN_BADQACC))
        self._reported_resets = 0   # MuJoCo's own resets already reported
        if self.shared:
            self.take_params(params or SimParams())
        else:
            self.apply_params(params or SimParams())
            self.reset_keyframe(None)

    @property
    def stop(self) -> ProtectiveStop | None:
        """The protective stop in force (latched until :meth:`clear_stop` or a reset)."""
        return self.law.stops[0]

    @property
    def time(self) -> float:
        """Sim time (s)."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Physics step (s)."""
        return float(self.model.opt.timestep)

    @property
    def arm_target(self) -> np.ndarray:
        """The arm target (7,) rad at the current sim time (a copy).

        While a plan is followed it is the plan's position now, where a streamed target
        taken over now starts (:mod:`simops_sim.stream_rule`).
        """
        target = self._target[:self.index.arm_dof].copy()
        plan = self.law.plans[0]
        if plan is not None:
            plan.sample(self.data.time, target)
        return target

    @property
    def arm_in_flight(self) -> np.ndarray:
        """How far (7,) rad the commands still in the command delay move the arm's target.

        The target set now minus the oldest one queued (the next the actuators see); zeros
        without a delay. The measured joints plus this are where the arm is headed once the
        commands in flight have landed.
        """
        arm = self.index.arm_dof
        if self.law.delay[0] == 0:
            return np.zeros(arm)
        return self._target[:arm] - self.law.next_delayed(0)[:arm]

    @property
    def delay_steps(self) -> int:
        """Physics steps between setting a target and the actuators seeing it."""
        return int(self.law.delay[0])

    def apply_params(self, params: SimParams) -> None:
        """Apply ``params`` (see :func:`apply_sim_params`), the sensor biases and the delay."""
        self._own_world('apply_params')
        apply_sim_params(self.model, params, self.index)
        self.take_params(params)

    def take_params(self, params: SimParams) -> None:
        """Take the parts of ``params`` that are not model fields (biases, friction, delay).

        The model fields are the caller's to write (:func:`apply_arm_params`).
        """
        self._bias[:] = sensor_bias(params, self.index.joint_names)
        arm = self.index.arm_dof
        model = (None if params.actuator_model is None
                 else load_sensor_model(params.actuator_model, arm))
        self.law.set_sensor(0, model, self._bias[1, :arm], self.site)
        smooth = SmoothFriction.of(params, self.index)
        self.law.set_friction(0, smooth.dofs, smooth.level, smooth.transition)
        steps = delay_steps(params.command_delay or 0.0, self.timestep)
        if steps != self.delay_steps:
            self.law.set_delay(0, steps)
        self.params = params
        self._write_law()

    def set_controller(self, law: str) -> None:
        """Run controller ``law`` (one of ``CONTROLLER_LAWS``) from the next step on.

        Its gains (:func:`controller_gains`) and, for ``joint_impedance``, the dynamics
        feedforward; the arm holds where it is, as a controller switch leaves it.
        """
        if law not in CONTROLLER_LAWS:
            raise ValueError(f'unknown controller law {law!r}; use one of '
                             f'{", ".join(CONTROLLER_LAWS)}')
        self.controller = law
        self._write_law()
        self.hold()

    def _write_law(self) -> None:
        """Write the gains of the law in force; bind its feedforward (the controller's model)."""
        index, arm = self.index, self.index.arm_dof
        kp, kv = controller_gains(self.spec, self.params, self.controller)
        for i in range(arm):
            write_gains(self.model, index.ctrl_ids[i], index.velocity_ids[i], kp[i], kv[i])
        dynamics = None
        if self.controller == 'joint_impedance':
            key = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_KEY, 'home')
            home = self.model.key_qpos[key] if key >= 0 else self.model.qpos0
            dynamics = InverseDynamics(controller_model(self.model, self.params, index),
                                       index.qpos_adr[:arm], index.dof_adr[:arm], home)
        self.law.set_feedforward(0, dynamics, kp)

    @property
    def following(self) -> bool:
        """Whether a trajectory plan drives the arm targets."""
        return self.law.plans[0] is not None

    def arm_desired(self) -> tuple[np.ndarray, np.ndarray]:
        """The controller's current targets: position (7,) rad and velocity (7,) rad/s."""
        arm = self.index.arm_dof
        return self._target[:arm].copy(), self._velocity[:arm].copy()

    def follow(self, plan: TrajectoryPlan,
               speed: np.ndarray | None = None) -> ProtectiveStop | None:
        """Drive the arm targets from ``plan``, sampled at every physics step until it ends.

        Each step's targets are the plan's position and velocity at that step's sim time, as
        JointTrajectoryController samples its trajectory every control cycle. It replaces
        any plan being followed; :meth:`set_arm_target`, :meth:`hold` and the resets end it.
        With reflexes, returns the stop that refused the plan: the one in force, or the one
        a plan faster than the velocity limits trips (the arm then holds); else None.
        ``speed`` (7,) rad/s: the commanded speed to judge instead of the plan's
        :meth:`~TrajectoryPlan.peak_speed` (a stream's step as sent).
        """
        reflexes = self.law.reflexes[0]
        if reflexes is not None:
            if self.stop is None:
                commanded = plan.peak_speed() if speed is None else speed
                self._latch(reflexes.command(commanded, self.time,
                                             plan.segments(self.timestep)))
            if self.stop is not None:
                return self.stop
        self.law.follow(0, plan)
        return None

    def set_collision_torque(self, threshold: np.ndarray) -> None:
        """The collision reflex's threshold (7,) N*m from now on (no effect without reflexes)."""
        reflexes = self.law.reflexes[0]
        if reflexes is not None:
            reflexes.set_collision_torque(threshold)
            self.law.changed()

    def clear_stop(self) -> ProtectiveStop | None:
        """End a protective stop (franka_msgs' ErrorRecovery); return the one that ended.

        The arm keeps holding where it stopped.
        """
        cleared, self.law.stops[0] = self.stop, None
        return cleared

    def latch_stop(self, stop: ProtectiveStop) -> None:
        """Latch ``stop`` as one the arm tripped itself: it holds where it is, at rest.

        Commands are refused until :meth:`clear_stop` (a scenario's stop of the arm).
        """
        self._latch(stop)

    def _latch(self, stop: ProtectiveStop | None) -> None:
        if stop is not None:
            self.law.stops[0] = stop
            self.hold()

    def contact_torque(self, out: np.ndarray) -> None:
        """Write the joint torques (7,) N*m that the contacts apply to the arm into ``out``.

        See :func:`contact_generalised`; the arm's entries of it.
        """
        contact_generalised(self.model, self.data, self._generalised)
        self._generalised.take(self._arm_dofs, out=out)

    def set_arm_target(self, q: np.ndarray, qd: np.ndarray | None = None) -> None:
        """Arm targets: position ``q`` (7,) rad and desired velocity ``qd`` (7,) rad/s.

        ``qd`` None means 0 (a position target). The controller acts on both errors,
        ``p (q - q_meas) + d (qd - qd_meas)``, like franka_ros2's JointTrajectoryController.
        A plan being followed ends.
        """
        self.law.follow(0, None)
        self.law.put_target(0, q, qd)

    def set_torque_lag(self, seconds: float) -> None:
        """The arm joints receive the actuators' torque through a first-order lag (0: none).

        ``seconds``: the time constant. A stand-in's hidden imperfection that no SimParams
        field expresses; the efforts still read the actuators' torque
        (:meth:`~simops_sim.actuator_law.ArmLaws.set_torque_lag`).
        """
        self.law.set_torque_lag(0, seconds, self.timestep, self.site)

    def set_gripper_width(self, width: float) -> None:
        """Gripper opening target (m); the servo clamps it to its ctrlrange.

        Ends a :meth:`move_gripper` motion and restores the model's gripper force.
        """
        self.law.ramp[0] = np.nan
        self._set_gripper_force(self._gripper_force)
        self._target[self.index.arm_dof] = width

    def move_gripper(self, width: float, speed: float, force: float) -> None:
        """Ramp the gripper target from the measured opening to ``width`` (m) at ``speed``.

        ``speed`` m/s; the fingers push with at most ``force`` N (capped at the model's), so
        they stop where something blocks them.
        """
        self._target[self.index.arm_dof] = self.gripper_width()[0]
        self.law.ramp[0] = width, speed
        self._set_gripper_force(min(force, self._gripper_force))

    def gripper_width(self) -> tuple[float, float]:
        """The measured opening (m) and its rate (m/s): the ``gripper_width`` tendon."""
        adr = self.index.qpos_adr[self.index.arm_dof:]
        dofs = self.index.dof_adr[self.index.arm_dof:]
        return float(gripper_width(self.data.qpos[adr])), float(gripper_width(self.data.qvel[dofs]))

    def _set_gripper_force(self, force: float) -> None:
        self.model.actuator_forcerange[self.index.ctrl_ids[-1]] = (-force, force)

    def push(self, body: int, force: np.ndarray) -> None:
        """Apply ``force`` (3,) N, world frame, at ``body``'s centre of mass from now on.

        MuJoCo's ``xfrc_applied``; zeros end it, and a reset clears it.
        """
        self.data.xfrc_applied[body] = (*force, 0.0, 0.0, 0.0)

    def hold(self) -> None:
        """Target the arm's current position at rest (a stop), keeping the gripper target."""
        self.law.follow(0, None)
        self.law.put_target(0, self.data.qpos[self.site.qpos], None)

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps with the current targets or the plan's."""
        self._own_world('step')
        advance(self.law, self.sites, n)

    def _own_world(self, action: str) -> None:
        if self.shared:
            raise RuntimeError(f'{action} acts on the whole world: call it on the World, not '
                               f'on arm {self.index.prefix!r}')

    def diverged(self) -> str | None:
        """Why the state is unusable, or None when it is fine.

        Unusable: NaN or Inf, a dof faster than :data:`MAX_SPEED`, or MuJoCo's own reset on a
        bad position, velocity or acceleration (``mjWARN_BADQPOS``, ``_BADQVEL``,
        ``_BADQACC``), which moved the arm to the model's qpos0 and zeroed the clock; each
        such reset is reported once. The usual case costs about 1.5 us (two dot products and
        three counters), an eighth of a physics step.
        """
        data = self.data
        qvel = data.qvel
        resets = self._resets()
        if (qvel.dot(qvel) < MAX_SPEED**2 and math.isfinite(data.qpos.dot(data.qpos))
                and resets == self._reported_resets):
            return None
        if resets != self._reported_resets:
            self._reported_resets = resets
            kind, warning = next((k, w) for k, w in zip(('position', 'velocity', 'acceleration'),
                                                        self._reset_warnings, strict=True)
                                 if w.number)
            return f'MuJoCo reset an unstable simulation (bad {kind} at dof {warning.lastinfo})'
        if not (np.all(np.isfinite(data.qpos)) and np.all(np.isfinite(qvel))):
            return 'non-finite position or velocity'
        speed = float(np.abs(qvel).max(initial=0.0))
        if speed > MAX_SPEED:
            return f'a dof moves at {speed:.3g}, beyond {MAX_SPEED:g} rad/s or m/s'
        return None

    def _resets(self) -> int:
        """How many times MuJoCo reset the data by itself since the last reset here."""
        bad_qpos, bad_qvel, bad_qacc = self._reset_warnings
        return bad_qpos.number + bad_qvel.number + bad_qacc.number

    def recover(self, name: str | None, time: float) -> None:
        """After a divergence: back to keyframe ``name``, holding it, at sim ``time`` (s).

        ``time`` is passed in because MuJoCo's own reset has already zeroed the clock.
        """
        self.reset_keyframe(name)
        self.data.time = time

    def reset_keyframe(self, name: str | None) -> None:
        """Reset to keyframe ``name`` with the keyframe's ctrl as targets.

        ``None`` resets to the model's qpos0, holding that position.

        Sim time restarts at 0 and queued delayed commands are dropped.
        """
        self._own_world('reset_keyframe')
        if name is None:
            self.reset_joints(self.model.qpos0[self.index.qpos_adr])
            return
        mujoco.mj_resetDataKeyframe(self.model, self.data, keyframe_id(self.model, name))
        self.settle()

    def reset_joints(self, position: np.ndarray, velocity: np.ndarray | None = None) -> None:
        """Reset to joint ``position`` / ``velocity`` (9,) with targets holding that position.

        Everything else (object, goal) returns to the model's qpos0; sim time restarts at 0.
        """
        self._own_world('reset_joints')
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.index.qpos_adr] = position
        if velocity is not None:
            self.data.qvel[self.index.dof_adr] = velocity
        mujoco.mj_forward(self.model, self.data)
        self.hold_here()

    def hold_here(self) -> None:
        """After a reset of the data: hold the arm's current position (see :meth:`settle`)."""
        self.data.ctrl[self.index.ctrl_ids] = self.data.actuator_length[self.index.ctrl_ids]
        self.data.ctrl[self.site.ids[self.index.ctrl_ids.size:]] = 0.0
        self.settle()

    def settle(self) -> None:
        """After a reset of the data: the actuators' inputs become the arm's targets.

        Queued delayed commands, a plan, a stop and a gripper motion end.
        """
        self.law.follow(0, None)
        self.law.stops[0] = None
        self.law.ramp[0] = np.nan
        self._set_gripper_force(self._gripper_force)
        self._reported_resets = self._resets()
        mujoco.mj_forward(self.model, self.data)
        self._command[:] = self.data.ctrl[self.site.ids]
        self.law.fill_delay(0)
        self.law.fill_sensor(0, self.site)
        self.law.fill_lag(0, self.site)

    def arm_measured(self) -> tuple[np.ndarray, np.ndarray]:
        """The arm's measured position (7,) rad (encoder bias included) and velocity (7,) rad/s.

        What ``fr3_arm_controller``'s position and velocity state interfaces read: where
        JointTrajectoryController starts a new trajectory (:mod:`simops_sim.trajectory_plan`).
        """
        joints = np.empty((3, len(self.index.joint_names)))
        self.read_joints(joints)
        arm = self.index.arm_dof
        return joints[0, :arm], joints[1, :arm]

    def read_joints(self, out: np.ndarray | Sequence[np.ndarray]) -> None:
        """Fill ``out`` (a (3, 9) array or three (9,) arrays) with position, velocity, effort.

        As the arm's sensors measure them: position and effort include the encoder and
        torque-sensor biases of the applied SimParams.
        """
        data, index = self.data, self.index
        data.qpos.take(index.qpos_adr, out=out[0])
        data.qvel.take(index.dof_adr, out=out[1])
        data.qfrc_actuator.take(index.dof_adr, out=out[2])
        out[0] += self._bias[0]
        out[2] += self._bias[1]
        if self.law.sensors[0] is not None:   # what the learned model says the sensors read
            out[2][:index.arm_dof] = self.law.sensed[0]

    @property
    def sensor_outside(self) -> int:
        """Samples whose inputs left the learned sensor model's training range (0: none)."""
        return int(self.law.outside[0])

    def state(self) -> SimState:
        """A copy of the current state (joints, flange and object poses in the base frame)."""
        joints = np.empty((3, len(self.index.joint_names)))
        self.read_joints(joints)
        flange_pos, flange_quat = self.body_pose(self.index.flange_body)
        object_pos = object_quat = None
        if self.index.object_body >= 0:
            object_pos, object_quat = self.body_pose(self.index.object_body)
        return SimState(self.time, joints[0], joints[1], joints[2], flange_pos, flange_quat,
                        object_pos, object_quat)

    def ee_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Franka's ``O_T_EE`` in the base frame: position (3,) m, quat (4,) wxyz.

        The hand's ``tcp`` site (franka_description's ``<robot>_hand_tcp``: 0.1034 m along
        the hand's axis), or the flange when the model has no hand (``end_effector: none``
        or no ``tcp`` site), as Desk's end-effector setting makes it.
        """
        site = self.index.tcp_site
        if site < 0 or self.params.end_effector == 'none':
            return self.body_pose(self.index.flange_body)
        data, base = self.data, self.index.base_body
        base_inv, site_quat = np.empty(4), np.empty(4)
        mujoco.mju_negQuat(base_inv, data.xquat[base])
        mujoco.mju_mat2Quat(site_quat, data.site_xmat[site])
        pos, quat = np.empty(3), np.empty(4)
        mujoco.mju_rotVecQuat(pos, data.site_xpos[site] - data.xpos[base], base_inv)
        mujoco.mju_mulQuat(quat, base_inv, site_quat)
        return pos, quat

    def body_pose(self, body: int) -> tuple[np.ndarray, np.ndarray]:
        """Pose of body id ``body`` in the base frame: position (3,) m, quat (4,) wxyz."""
        data, base = self.data, self.index.base_body
        base_inv = np.empty(4)
        mujoco.mju_negQuat(base_inv, data.xquat[base])
        pos, quat = np.empty(3), np.empty(4)
        mujoco.mju_rotVecQuat(pos, data.xpos[body] - data.xpos[base], base_inv)
        mujoco.mju_mulQuat(quat, base_inv, data.xquat[body])
        return pos, quat

    def set_goal_pose(self, pos: np.ndarray, quat: np.ndarray) -> bool:
        """Move the goal marker to a base-frame pose (m, wxyz); False if the model has none."""
        mocap = self.index.goal_mocap
        if mocap < 0:
            return False
        data, base = self.data, self.index.base_body
        world = np.empty(3)
        mujoco.mju_rotVecQuat(world, np.asarray(pos, float), data.xquat[base])
        data.mocap_pos[mocap] = world + data.xpos[base]
        mujoco.mju_mulQuat(data.mocap_quat[mocap], data.xquat[base], np.asarray(quat, float))
        return True
