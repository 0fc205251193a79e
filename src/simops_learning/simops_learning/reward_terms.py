"""Penalty terms for the gate's failure modes, added to the pick-and-place reward PPO trains on.

The improve stage (``feedback.change: [reward]``) turns each way the gate's episodes failed
into a term of the reward the next round's PPO fine-tuning maximises. A term is an event
the episode pays once, at the step it happens, times its weight (reward units; the success
bonus is 10):

- ``protective_stop``: the arm's protective stop latched (the episode ends there);
- ``unsafe``: the episode first exceeded the safe joint speed or contact force;
- ``dropped``: the cube, lifted in a grasp earlier, first left the grasp away from its goal;
- ``timeout``: paid as ``1 / episode_steps`` of the weight every step, so an episode that
  runs out of its steps pays it whole.

The modes are :data:`~simops_learning.validation_report.FAILURE_MODES`' but ``fault`` (a
non-finite command is a bug to fix, not a behaviour to train away). No rclpy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from simops_learning.reach_env import SUCCESS_BONUS
from simops_learning.validation_report import FAILURE_MODES

UNTRAINED = ('', 'fault')   # a success, and a bug's symptom: no term
TERMS = tuple(mode for mode in FAILURE_MODES if mode not in UNTRAINED)
FAILURE_WEIGHT = SUCCESS_BONUS   # a failing mode's weight: it costs what a success earns


class RewardTermsError(ValueError):
    """A reward term that is not one of :data:`TERMS`, or a weight that is not >= 0."""


def parse_reward_terms(items: Sequence[str]) -> dict[str, float]:
    """``NAME=WEIGHT`` items (the command line's) to ``{name: weight}``, each checked."""
    terms: dict[str, float] = {}
    for item in items:
        name, _, value = item.partition('=')
        if name not in TERMS:
            raise RewardTermsError(f'reward term {name!r} is not one of {", ".join(TERMS)}')
        try:
            weight = float(value)
        except ValueError:
            raise RewardTermsError(f'reward term {item!r} is not NAME=WEIGHT') from None
        if not (math.isfinite(weight) and weight >= 0.0):
            raise RewardTermsError(f'reward term {name} weighs {value}; a weight is >= 0')
        terms[name] = weight
    return terms


def format_reward_terms(terms: Mapping[str, float]) -> list[str]:
    """``{name: weight}`` as the command line's ``NAME=WEIGHT`` items, in :data:`TERMS` order."""
    return [f'{name}={terms[name]:g}' for name in TERMS if name in terms]


def failing_terms(failures: Mapping[str, int], terms: Mapping[str, float]) -> dict[str, float]:
    """``terms`` plus, at :data:`FAILURE_WEIGHT`, each mode a gate's ``failures`` counts.

    ``failures``: failed episodes by mode (a gate report's ``failures``); a mode with a term
    keeps its weight.
    """
    added = {name: FAILURE_WEIGHT for name in TERMS
             if failures.get(name, 0) > 0 and name not in terms}
    return {**terms, **added}


class Penalties:
    """One env's penalty per step under ``terms`` ({name: weight}); see the module docstring.

    ``episode_steps``: the env's step limit. :meth:`reset` at each episode's start; call it
    with each step's ``info``.
    """

    def __init__(self, terms: Mapping[str, float], episode_steps: int) -> None:
        unknown = set(terms) - set(TERMS)
        if unknown:
            raise RewardTermsError(f'reward terms {sorted(unknown)} are not of {TERMS}')
        self.terms, self.episode_steps = dict(terms), episode_steps
        self._paid: set[str] = set()

    def reset(self) -> None:
        """A new episode: every event may be paid again."""
        self._paid.clear()

    def __call__(self, info: Mapping[str, Any]) -> float:
        """The penalty (>= 0, reward units) of the step that ended with ``info``."""
        total = 0.0
        for name, weight in self.terms.items():
            if name == 'timeout':
                total += weight / self.episode_steps
            elif name not in self._paid and _happened(name, info):
                self._paid.add(name)
                total += weight
        return total


def _happened(name: str, info: Mapping[str, Any]) -> bool:
    """Whether event ``name`` holds at the step of ``info`` (the pick env's)."""
    if name == 'protective_stop':
        return info['protective_stop'] != ''
    return bool(info[name])   # 'unsafe', 'dropped'
