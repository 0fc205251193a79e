"""Which of ``simops-train``'s options go together: one rule for every caller (no torch).

``simops-train`` checks its own command line with :func:`refusal`, and a pipeline file
(:mod:`simops_bringup.pipeline_file`) checks with it the trainings its loop would ask for:
the train stage's, and the improve stage's with each change it may make. The reasons name
simops-train's options; a pipeline's ``train`` fields are those options by name.
"""

from __future__ import annotations

from dataclasses import dataclass

FINE_TUNED_TASK = 'pick_place'   # the task whose policy a dataset, PPO or a policy refines


@dataclass(frozen=True)
class TrainingAsked:
    """What a ``simops-train`` run is asked for, as its options say.

    ``dataset``: at least one ``--dataset``; ``rounds``: ``--rounds`` given;
    ``ppo_iterations``: ``--ppo-iterations``; ``scenarios``: at least one ``--scenarios``;
    ``reward_terms``: at least one ``--reward-terms``; ``init_policy``: ``--init-policy``;
    ``in_flight``: ``--in-flight``.
    """

    task: str
    dataset: bool = False
    rounds: bool = False
    ppo_iterations: int = 0
    scenarios: bool = False
    reward_terms: bool = False
    init_policy: bool = False
    in_flight: bool = False


def refusal(asked: TrainingAsked) -> str | None:
    """Why ``simops-train`` refuses ``asked``'s combination of options; None: it takes it."""
    refined = asked.task == FINE_TUNED_TASK
    if asked.init_policy and not refined:
        return '--init-policy fine-tunes a pick_place policy; add --task pick_place'
    if asked.reward_terms and (not refined or asked.ppo_iterations < 1 or asked.dataset):
        return ('--reward-terms shape the reward PPO fine-tunes on; add --task pick_place and '
                '--ppo-iterations N, without --dataset')
    if asked.in_flight and not refined:
        return '--in-flight trains a pick_place policy; add --task pick_place'
    if asked.in_flight and asked.init_policy:
        return ('--in-flight trains a new policy; a fine-tune keeps the inputs of its '
                '--init-policy')
    if asked.in_flight and asked.dataset:
        return ('--in-flight policies read their last actions, which a --dataset\'s frames '
                'do not hold')
    if not asked.dataset:
        return None
    if not refined:
        return '--dataset trains the pick_place decision network; add --task pick_place'
    if asked.scenarios:
        return ('--scenarios plays events in the expert\'s training rollouts; a --dataset '
                'is cloned as recorded')
    if asked.ppo_iterations:
        return ('--ppo-iterations fine-tunes DAgger\'s policy on the simulation\'s reward; a '
                '--dataset is cloned, with --expert-rounds for the simulation\'s part')
    if asked.rounds:
        return ('--rounds counts DAgger\'s rounds from scratch; with --dataset the expert\'s '
                'rounds are --expert-rounds')
    return None
