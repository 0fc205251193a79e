"""One control tick of a policy, as the policy node and every Gym env run it (no ROS here).

A tick: the measured joint state (and object pose, goal) fills :attr:`PolicyStep.raw`; the
out-of-domain check refuses a state the policy never saw (an arm joint faster than its
velocity limit: the node faults, the env terminates); the shared
:class:`~simops_core.observation.ObservationBuilder` builds the observation; after
inference, the shared safety pipeline (:mod:`simops_core.safety`) maps the raw action to the
command. The policy node and the envs call the same methods in the same order, so the env
and the ROS graph agree bit for bit (``tests/learning/test_parity.py``):

- :meth:`PolicyStep.restart` on the first tick after ``~/enable``, a hold or a reset: the
  safety state starts from the measured position (or re-anchors at the held target), the
  ``last_action`` term is zeroed and the history restarts;
- :meth:`PolicyStep.observe` on every later tick (pushes one history frame);
- :meth:`PolicyStep.command` with the policy's action and the ramp's ``blend``.

Joint arrays are (n,) in ``spec.joint_names`` order (arm then fingers); the command is (7,)
rad in ``spec.arm_joints`` order and a gripper width in m.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from simops_core import safety
from simops_core.observation import ObservationBuilder, RobotObservation
from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_core.policy_card import PolicyCard
from simops_core.robot_spec import RobotSpec

_NODE = defaults(load_parameter_schema('policy'))   # the policy node's parameter schema


@dataclass(frozen=True)
class StepSettings:
    """The policy node parameters that shape commands; defaults are the node's schema's.

    ``lpf_cutoff_hz`` Hz, ``velocity_scale`` fraction of the spec's velocity and acceleration
    limits, ``joint_limit_margin`` rad, ``ramp_time`` s (0: no ramp),
    ``stale_state_timeout`` s (an older joint state holds the arm).
    """

    lpf_cutoff_hz: float = _NODE['lpf_cutoff_hz']
    velocity_scale: float = _NODE['velocity_scale']
    joint_limit_margin: float = _NODE['joint_limit_margin']
    ramp_time: float = _NODE['ramp_time']
    stale_state_timeout: float = _NODE['stale_state_timeout']

    def ros_args(self) -> list[str]:
        """``-p name:=value`` arguments that give a policy node these settings."""
        return [arg for field in fields(self)
                for arg in ('-p', f'{field.name}:={getattr(self, field.name)!r}')]


Infer = Callable[[np.ndarray], np.ndarray]
"""A policy: observation (card.observation_size,) -> raw action (card.action.size,)."""


@dataclass(frozen=True)
class Tick:
    """One node tick: the safety output and raw action, or the fault that stopped it.

    ``fault`` is ``out_of_domain``, ``outside_limits`` or ``inference`` (then ``problem``
    says why and nothing may be commanded); ``inference`` is the inference time (s).
    """

    out: safety.SafetyOutput | None = None
    action: np.ndarray | None = None
    inference: float = 0.0
    fault: str = ''
    problem: str = ''


class PolicyStep:
    """The per-tick state of one policy on one robot; see the module docstring."""

    def __init__(self, card: PolicyCard, spec: RobotSpec, settings: StepSettings) -> None:
        self.card = card
        self.spec = spec
        self.settings = settings
        self.period = 1.0 / card.control_rate
        self.limits = safety.SafetyLimits.from_spec(spec, self.period, settings.velocity_scale,
                                                    settings.joint_limit_margin)
        action = card.action
        self.mapping = safety.ActionMapping(
            arm_index=np.array([action.joints.index(j) for j in spec.arm_joints]),
            gripper_index=len(action.joints) if action.gripper else None, clip=action.clip,
            scale=action.scale, reference=action.reference,
            lpf_alpha=safety.lowpass_alpha(settings.lpf_cutoff_hz, card.control_rate))
        self.builder = ObservationBuilder(card, spec.joint_names, spec.gripper.joints)
        n = len(spec.joint_names)
        self.last_action = np.zeros(action.size)
        self.raw = RobotObservation(
            joint_position=np.zeros(n), joint_velocity=np.zeros(n),
            object_position=np.zeros(3), object_quaternion=np.array([0.0, 0.0, 0.0, 1.0]),
            goal_position=np.zeros(3), last_action=self.last_action)
        self.state: safety.SafetyState | None = None
        self._arm = len(spec.arm_joints)

    @property
    def measured(self) -> np.ndarray:
        """The measured arm position (7,) rad (a copy)."""
        return self.raw.joint_position[:self._arm].copy()

    def out_of_domain(self) -> str | None:
        """Why the measured state lies outside what any policy was trained on, or None.

        An arm joint faster than the spec's velocity limit means a broken state estimate or
        an arm already out of control: the node faults and the env terminates the episode.
        """
        over = np.abs(self.raw.joint_velocity[:self._arm]) - self.spec.velocity
        if not np.any(over > 0):
            return None
        joint = int(np.argmax(over))
        return (f'{self.spec.arm_joints[joint]} moves at '
                f'{self.raw.joint_velocity[joint]:.2f} rad/s, beyond its '
                f'{self.spec.velocity[joint]:.2f} rad/s limit')

    def restart(self, width: float) -> np.ndarray:
        """First tick of a run: (re)anchor the safety state; return the observation.

        ``last_action`` is zeroed and the history restarts. Without a previous target the
        state starts at the measured position (gripper ``width`` m); after a hold it
        re-anchors at the held target, so the command never jumps. Raises
        :class:`~simops_core.safety.OutsideLimitsError` (the node faults).
        """
        self.state = (safety.start(self.measured, width, self.limits) if self.state is None
                      else safety.hold(self.state))
        self.last_action[:] = 0.0
        return self.builder.reset(self.raw)

    def observe(self) -> np.ndarray:
        """A later tick's observation (pushes one history frame)."""
        return self.builder.build(self.raw)

    def run(self, infer: Infer, restart: bool, blend: float, width: float) -> Tick:
        """The whole tick a node runs: check, observe, infer, command.

        ``restart`` on the first tick of a run (``width``: the measured gripper opening, m);
        a model that raises is a fault, not a crash.
        """
        problem = self.out_of_domain()
        if problem is not None:
            return Tick(fault='out_of_domain', problem=problem)
        if restart:
            try:
                observation = self.restart(width)
            except safety.OutsideLimitsError as exc:
                return Tick(fault='outside_limits', problem=f'cannot start: {exc}; move the '
                                                            'arm inside its limits')
        else:
            observation = self.observe()
        started = time.perf_counter()
        try:
            action = infer(observation)
        except Exception as exc:  # a model that throws must not stop the node
            return Tick(fault='inference', problem=f'inference failed: {exc}')
        inference = time.perf_counter() - started
        return Tick(self.command(action, blend), action, inference)

    def command(self, action: np.ndarray, blend: float) -> safety.SafetyOutput:
        """Map the raw ``action`` (card.action.size,) to the command at this measurement.

        ``blend`` in [0, 1] is the ramp's progress. The clipped action becomes the next
        observation's ``last_action``.
        """
        if self.state is None:
            raise RuntimeError('command() before restart()')
        out = safety.step(self.state, np.asarray(action, dtype=np.float64), self.measured,
                          blend, self.limits, self.mapping)
        self.state = out.state
        self.last_action[:] = out.action
        return out

    def forget(self) -> None:
        """Drop the safety state (DISABLED, or an env reset): the next start measures anew."""
        self.state = None
