"""The policy node's per-tick processing, reproduced step for step for the env.

:class:`DeploymentPipeline` takes a measured joint state, builds the observation with the
shared :class:`~simops_core.observation.ObservationBuilder` and maps the policy's raw action
through the shared :mod:`simops_core.safety` pipeline, exactly as
``simops_policy.policy_node`` does in one control tick:

- restart (the first tick after ``~/enable`` or a reset): ``safety.start`` from the
  measured arm position and gripper width, ``last_action`` zeros, ``builder.reset``;
- later ticks: ``builder.build`` with ``last_action`` = the previous tick's clipped action;
- then ``safety.step(state, action, measured, blend)`` with ``blend`` the ramp's progress.

The node ramps against wall-clock time; the env against control ticks (tick ``k`` after the
restart has ``blend = min(k · period / ramp_time, 1)``), which is what the node sees with
on-time ticks. :class:`SafetyConfig` holds the node parameters this depends on; its defaults
are the node's defaults (docs/interfaces.md, checked by tests/test_env_parity_config.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simops_core import safety
from simops_core.observation import ObservationBuilder, RobotObservation
from simops_core.policy_card import PolicyCard
from simops_core.robot_spec import RobotSpec


@dataclass(frozen=True)
class SafetyConfig:
    """The policy node parameters that shape commands (names as in docs/interfaces.md).

    ``lpf_cutoff_hz`` Hz, ``velocity_scale`` fraction of the spec limits, ``joint_limit_margin``
    rad, ``ramp_time`` s (0: no ramp).
    """

    lpf_cutoff_hz: float = 5.0
    velocity_scale: float = 0.5
    joint_limit_margin: float = 0.05
    ramp_time: float = 2.0

    def ros_args(self) -> list[str]:
        """``-p name:=value`` arguments that give a policy node these settings."""
        args = []
        for name, value in vars(self).items():
            args += ['-p', f'{name}:={value!r}']
        return args


class DeploymentPipeline:
    """Observation building and the safety pipeline of one policy node, for one robot.

    Joint arrays in :meth:`restart`/:meth:`observe` are (9,) in ``spec.joint_names`` order;
    the arm command is (7,) rad in ``spec.arm_joints`` order, the gripper command in m.
    """

    def __init__(self, card: PolicyCard, spec: RobotSpec, config: SafetyConfig) -> None:
        self.card = card
        self.spec = spec
        self.config = config
        self.period = 1.0 / card.control_rate
        self.limits = safety.SafetyLimits.from_spec(spec, self.period, config.velocity_scale,
                                                    config.joint_limit_margin)
        action = card.action
        self.mapping = safety.ActionMapping(
            arm_index=np.array([action.joints.index(j) for j in spec.arm_joints]),
            gripper_index=len(action.joints) if action.gripper else None, clip=action.clip,
            scale=action.scale, reference=action.reference,
            lpf_alpha=safety.lowpass_alpha(config.lpf_cutoff_hz, card.control_rate))
        self.builder = ObservationBuilder(card, spec.joint_names, spec.gripper.joints)
        n = len(spec.joint_names)
        self.last_action = np.zeros(action.size)
        self.raw = RobotObservation(
            joint_position=np.zeros(n), joint_velocity=np.zeros(n),
            object_position=np.zeros(3), object_quaternion=np.array([0.0, 0.0, 0.0, 1.0]),
            goal_position=np.zeros(3), last_action=self.last_action)
        self.state: safety.SafetyState | None = None
        self.tick = 0

    def _fill(self, position: np.ndarray, velocity: np.ndarray, object_position: np.ndarray,
              object_quaternion_xyzw: np.ndarray, goal: np.ndarray) -> None:
        raw = self.raw
        raw.joint_position[:] = position
        raw.joint_velocity[:] = velocity
        raw.object_position[:] = object_position
        raw.object_quaternion[:] = object_quaternion_xyzw
        raw.goal_position[:] = goal

    def restart(self, position: np.ndarray, velocity: np.ndarray, object_position: np.ndarray,
                object_quaternion_xyzw: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """First tick: start the safety state from the measurement; return the observation.

        Raises ``safety.OutsideLimitsError`` like the node's start (it faults instead).
        """
        self._fill(position, velocity, object_position, object_quaternion_xyzw, goal)
        arm = len(self.spec.arm_joints)
        width = float(position[arm:].sum())
        self.state = safety.start(position[:arm].copy(), width, self.limits)
        self.last_action[:] = 0.0
        self.tick = 0
        return self.builder.reset(self.raw)

    def observe(self, position: np.ndarray, velocity: np.ndarray, object_position: np.ndarray,
                object_quaternion_xyzw: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """A later tick's observation (pushes one history frame)."""
        self._fill(position, velocity, object_position, object_quaternion_xyzw, goal)
        return self.builder.build(self.raw)

    @property
    def blend(self) -> float:
        """The ramp's progress at this tick, in [0, 1]."""
        ramp = self.config.ramp_time
        return 1.0 if ramp <= 0 else min(self.tick * self.period / ramp, 1.0)

    def command(self, action: np.ndarray) -> safety.SafetyOutput:
        """Map the raw ``action`` (card.action.size,) at the current measurement to targets.

        ``output.state.target`` (7,) rad and ``output.state.gripper`` m are the command; the
        clipped action becomes the next observation's ``last_action``.
        """
        if self.state is None:
            raise RuntimeError('command() before restart()')
        arm = len(self.spec.arm_joints)
        out = safety.step(self.state, np.asarray(action, dtype=np.float64),
                          self.raw.joint_position[:arm].copy(), self.blend, self.limits,
                          self.mapping)
        self.state = out.state
        self.last_action[:] = out.action
        self.tick += 1
        return out
