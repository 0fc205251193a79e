"""Everything a policy node loads before its first tick, checked (no rclpy).

The robot spec, the topics, the franka_ros2 release whose names the node uses, the policy
card and model, and the :class:`PolicyStep` they
make, from the node's settings (``config/parameters/policy.yaml``); with
``require_promotion`` (a real arm), the promotion record that lets the policy run there
(:func:`simops_core.promotion.check_deployable`). Every problem is a
:class:`~simops_core.command_line.ConfigError` that says how to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simops_core.command_line import ConfigError
from simops_core.franka_ros2 import FrankaRelease, franka_release
from simops_core.paths import resolve_resource
from simops_core.policy_card import PolicyCard, load_policy_card
from simops_core.policy_step import PolicyStep, StepSettings
from simops_core.promotion import PromotionError, check_deployable
from simops_core.robot_spec import RobotSpec, load_robot_spec
from simops_core.topics import TopicSpec, load_topics

if TYPE_CHECKING:
    from simops_policy.model import PolicyModel


@dataclass(frozen=True)
class Deployment:
    """A policy ready to tick on one robot."""

    spec: RobotSpec
    topics: dict[str, TopicSpec]
    release: FrankaRelease
    card: PolicyCard
    model: PolicyModel
    step: PolicyStep
    unvalidated: str = ''   # why it runs without a matching promotion (allow_unvalidated)

    def diagnostic_default(self) -> tuple[str, str]:
        """The diagnostics' level in the running modes and a note on the message.

        ``ok`` and none; ``warn`` and the reason while an unpromoted policy runs
        (``allow_unvalidated``), so /diagnostics says so every period.
        """
        if not self.unvalidated:
            return 'ok', ''
        return 'warn', f' (UNVALIDATED policy: {self.unvalidated})'

    def summary(self) -> str:
        """One line for the log: model, checksum, observation and action sizes."""
        card = self.card
        return (f'{self.model.path.name} ({card.sha256[:12]}): {card.observation_size} '
                f'observation values ({card.history} x {card.frame_size}), '
                f'{card.action.size} actions')


def load_deployment(settings: Any) -> Deployment:
    """Load and cross-check what ``settings`` (the node's parameters) name."""
    spec = load_robot_spec(settings.robot)
    topics = load_topics()
    release = franka_release(settings.franka_ros2)
    model_path = _resolve('model_path', settings.model_path)
    card_path = _resolve('card_path', settings.card_path
                         or str(model_path.with_suffix('.yaml')))
    card = load_policy_card(card_path, spec.joint_names, spec.arm_joints)
    unvalidated = _check_promotion(settings, model_path, card_path)
    if card.robot != spec.name:
        raise ConfigError(f'card {card_path.name} is for robot {card.robot!r}, the spec is '
                          f'{spec.name!r}; set the robot parameter')
    rate = settings.control_rate
    if abs(card.control_rate - rate) > 1e-9:
        raise ConfigError(f'control_rate {rate:g} Hz differs from the card\'s '
                          f'{card.control_rate:g} Hz; set control_rate:={card.control_rate:g}')
    step_settings = StepSettings(settings.lpf_cutoff_hz, settings.velocity_scale,
                                 settings.joint_limit_margin, settings.ramp_time,
                                 settings.stale_state_timeout)
    step = PolicyStep(card, spec, step_settings)
    # torch takes seconds to import: last, so every other problem is refused without it, and
    # here, inside main()'s handlers, so Ctrl-C during start-up ends the node cleanly.
    from simops_policy.model import load_policy

    model = load_policy(model_path, card)
    return Deployment(spec, topics, release, card, model, step, unvalidated)


def _check_promotion(settings: Any, model_path: Path, card_path: Path) -> str:
    """'' when the policy may run here; why not when ``allow_unvalidated`` runs it anyway."""
    if not settings.require_promotion:
        return ''
    calibration = (_resolve('calibration', settings.calibration) if settings.calibration
                   else None)
    try:
        check_deployable(model_path, card_path, calibration)
    except PromotionError as exc:
        if not settings.allow_unvalidated:
            raise
        return str(exc)
    return ''


def _resolve(parameter: str, path: str) -> Path:
    try:
        return resolve_resource(path)
    except FileNotFoundError as exc:
        raise ConfigError(f'{parameter} {exc}; set {parameter} to an existing file') from None
