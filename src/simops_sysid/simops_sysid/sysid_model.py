"""The fitting model: the simulator's MJCF reduced to the robot, with what the fit reads.

The table, the object and the goal never touch the arm during an excitation, and dropping
them halves the cost of a step. One ``jointactuatorfrc`` sensor per arm joint reads the
node's effort (``qfrc_actuator`` after a step, exactly). Smooth friction
(``friction_transition``), which the simulator applies in Python
(:class:`simops_sim.friction.SmoothFriction`, ``-c tanh(qd / v)``), cannot run inside
``mujoco.rollout``; the fitting model carries it natively instead: four force-limited
actuators per arm joint with a velocity bias, ``-c sum_i w_i clip(k_i qd / v)``
(:data:`simops_sysid.fit_parameters.FRICTION_TERMS`, the least-squares fit of tanh by four
saturating lines: RMS error 0.5 % of ``c`` over ``|qd| <= 4 v``). Their force is not part of
the effort, as in the simulator. This is the fit's ``model_modifier`` seam, in mujoco.sysid's
terms; :class:`simops_sysid.fit_parameters.ModelFactory` writes each candidate into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import SimParams
from simops_sim.model_index import ModelIndex, index_model
from simops_sim.model_params import nominal_sim_params
from simops_sysid.fit_parameters import FRICTION_TERMS

EFFORT_SENSOR = 'sysid_effort_{}'
FRICTION_ACTUATOR = 'sysid_friction{}_{}'
FEEDFORWARD_ACTUATOR = 'sysid_feedforward_{}'


@dataclass(frozen=True)
class FitModel:
    """The simulator's model with effort sensors, its MjSpec and its index.

    ``effort_adr`` (7,) sensordata addresses of the arm joints' actuator-force sensors;
    ``friction_ids`` (7, F) the smooth-friction actuators of each arm joint (one per term of
    :data:`FRICTION_TERMS`) and ``friction_adr`` (7, F) their force sensors' addresses;
    ``feedforward_ids`` (7,) a torque actuator per arm joint that carries the impedance
    loop's dynamics feedforward (:mod:`simops_sim.feedforward`; zero for the effort JTC),
    part of the effort.
    """

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    index: ModelIndex
    effort_adr: np.ndarray
    home_qpos: np.ndarray
    friction_ids: np.ndarray
    friction_adr: np.ndarray
    feedforward_ids: np.ndarray

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
        spec.add_actuator(name=FEEDFORWARD_ACTUATOR.format(name),
                          trntype=mujoco.mjtTrn.mjTRN_JOINT, target=joint,
                          gaintype=mujoco.mjtGain.mjGAIN_FIXED, gainprm=[1.0] + [0.0] * 9,
                          biastype=mujoco.mjtBias.mjBIAS_NONE)
    model = spec.compile()
    index = index_model(model, robot, joint_map)
    adr = np.array([model.sensor_adr[model.sensor(EFFORT_SENSOR.format(n)).id]
                    for n in robot.arm_joints])
    names = [[FRICTION_ACTUATOR.format(t, n) for t in range(len(FRICTION_TERMS))]
             for n in robot.arm_joints]
    friction_ids = np.array([[model.actuator(a).id for a in row] for row in names])
    friction_adr = np.array([[model.sensor_adr[model.sensor(a).id] for a in row]
                             for row in names])
    feedforward_ids = np.array([model.actuator(FEEDFORWARD_ACTUATOR.format(n)).id
                                for n in robot.arm_joints])
    data = mujoco.MjData(model)
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
    if key >= 0:
        mujoco.mj_resetDataKeyframe(model, data, key)
    return FitModel(spec, model, index, adr, data.qpos.copy(), friction_ids, friction_adr,
                    feedforward_ids)


def nominal(fit_model: FitModel) -> SimParams:
    """Every SimParams field of the model as loaded (the fit's starting point)."""
    return nominal_sim_params(fit_model.model, fit_model.index)
