"""``simops-train --task pick_place --dataset DIR``: behaviour cloning from LeRobot datasets.

1. Each dataset (teleoperated demonstrations, recorded policy runs, ``simops-rollout``'s
   simulated episodes; real and sim mixed) is read through LeRobot's own loader and labelled
   with the network's decision (:mod:`simops_learning.demonstrations`).
2. :class:`~simops_learning.pick_network.PickPolicy`'s network is fit by mean squared error
   on the labelled entries (a frame without a step label still teaches the gripper), each
   batch drawn from the datasets in proportion to their ``--weight``; from scratch, or
   fine-tuned from ``--init-policy`` (its input standardisation then kept). Each frame
   labelled by a decision is shown at a random heading: the scene turned about the vertical
   through the grasp point, which turns the network's inputs and the decision with them
   (:func:`~simops_learning.pick_network.turn_scene`); ``--augment none`` shows the frames
   as recorded.
3. Optionally (``expert_rounds``), co-training with the simulation: DAgger rounds in the
   training sim at full randomisation, where the policy drives ``episodes`` episodes, the
   grasp expert (:mod:`simops_learning.pick_expert`) labels every state it visits, and the
   network is refit on the datasets and every round's states so far, the simulated states
   one more source of the batches (``expert_weight``). Demonstrations show the task where
   a person took the arm; the expert's labels cover where the policy itself goes, which
   the demonstrations never show.
4. The policy alone is evaluated at full randomisation in the training sim, as DAgger's is.

The card records every dataset's path, sha256 and episode count, and the initial policy's
sha256. Same datasets, seed and settings give the same weights (single-threaded fitting).
"""

from __future__ import annotations

import argparse
import copy
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simops_core.command_line import EXIT_USAGE
from simops_core.executor import interrupts_ignored
from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_core.promotion import file_entry
from simops_learning.demonstrations import Demonstrations, read_demonstrations
from simops_learning.lerobot_reader import DatasetError
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_network import PickPolicy, turn_scene
from simops_learning.pick_train import (
    InitPolicyError,
    Log,
    PickTrainConfig,
    Rollouts,
    export_pick,
    run_round,
    scripted,
    start_policy,
)
from simops_learning.reach_card import CONTROL_RATE
from simops_learning.seeding import seeded_torch
from simops_sim.randomization import DomainRandomization
from simops_sim.sim_profiles import profile_entry

# Adam steps of a fit from datasets (one fit on fixed frames, unlike a DAgger round's
# PickTrainConfig.updates): 30 teleoperated demonstrations through the graph (3,468 frames)
# clone to 58 % of 50 episodes after 5,000 steps, 76 % and 90 % (two seeds) after 10,000
# and 86 % after 20,000.
UPDATES = 20000
# The fit keeps the checkpoint that places the cube most often in SELECTION_EPISODES
# episodes alone at full randomisation (their own seeds, apart from the final
# evaluation's), one every SELECTION_EVERY updates: clones of the same frames land
# anywhere between about 60 and 90 % by their length and seed.
SELECTION_EVERY = 5000
# how an operator twist at the teleop node's speed cap labels its step: exactly, or as a
# lower bound (its direction, at least the cap)
EXACT, AT_LEAST = 'exact', 'at-least'
TWIST_AT_CAP = (EXACT, AT_LEAST)
SELECTION_EPISODES = 20


@dataclass(frozen=True)
class DatasetTrainConfig:
    """Behaviour-cloning settings: the datasets, their weights and the fit."""

    datasets: tuple[Path, ...]
    weights: tuple[float, ...]
    init_policy: Path | None = None     # TorchScript pick-and-place policy to fine-tune
    turn: bool = True                   # show decision-labelled frames at random headings
    twist_cap: float | None = None      # m/s: a twist this fast or faster is a lower bound
    selection_episodes: int = SELECTION_EPISODES   # per checkpoint; 0: keep the last
    expert_rounds: int = 0              # DAgger rounds with the grasp expert in the sim
    expert_weight: float = 1.0          # the expert-labelled states' weight in the batches
    pick: PickTrainConfig = field(default_factory=PickTrainConfig)


def teleop_speed_cap() -> float:
    """The teleop node's default linear speed cap (m/s), config/parameters/teleop.yaml."""
    return float(defaults(load_parameter_schema('teleop'))['linear_speed'])


def step_error(decision: torch.Tensor, target: torch.Tensor, at_least: torch.Tensor,
               length: float) -> torch.Tensor:
    """Squared error (B, 3) of the decision's steps ``decision`` (B, 3) against ``target``.

    Rows ``at_least`` (B,) bool are lower bounds: the labelled step is ``length`` or more
    long in its direction (a twist at the teleop node's speed cap, executed at the cap,
    says the operator wanted at least that); their error is the decision's part across
    that direction, squared, plus its shortfall below ``length`` along it, squared (spread
    evenly over the three entries). Other rows: the plain squared error.
    """
    error = (decision - target) ** 2
    if not bool(at_least.any()):
        return error
    way = target / target.norm(dim=1, keepdim=True).clamp(min=1e-12)
    along = (decision * way).sum(dim=1, keepdim=True)
    bound = (decision - along * way) ** 2 + torch.relu(length - along) ** 2 / 3.0
    return torch.where(at_least[:, None], bound, error)


def fit_decisions(policy: PickPolicy, parts: Sequence[Demonstrations], weights: Sequence[float],
                  config: PickTrainConfig, generator: torch.Generator, normalize: bool,
                  turn: bool = True, at_least: float | None = None,
                  checkpoint: Callable[[int], None] | None = None, every: int = 0) -> float:
    """Fit ``policy``'s network on the labelled entries; return the last batch loss.

    Frame i of dataset d is drawn with probability weight_d / (sum of weights · N_d). The
    loss is the mean squared error over the labelled entries: of the decision (a twist's
    step, the gripper command) and of the joint deltas the task-space law makes of the
    network's step (a commanded or policy step), in action units. With ``turn``, each drawn
    frame without a joint-delta label (which would not turn with the scene) is turned by
    an angle uniform in [0, 2 pi) (:func:`~simops_learning.pick_network.turn_scene`), and
    the standardisation is taken over one such turn of every frame. With ``at_least`` (a
    step length in network units), an operator's twist step (a part's ``twist`` frames)
    that long or longer is a lower bound (:func:`step_error`). ``checkpoint(updates)`` is
    called after every ``every`` updates (and after the last), with the network as it is
    then.
    """
    raw = torch.as_tensor(np.concatenate([p.raw for p in parts]))
    twist = torch.as_tensor(np.concatenate([np.zeros(len(p.raw), dtype=bool) if p.twist is None
                                            else p.twist for p in parts]))
    labels = torch.as_tensor(np.concatenate([np.concatenate([p.decisions, p.arm], axis=1)
                                             for p in parts]))
    mask = torch.isfinite(labels).float()
    labels = torch.nan_to_num(labels)
    turnable = (mask[:, 4:] == 0).all(dim=1)   # joint-delta labels do not turn
    bounded = (twist & (labels[:, :3].norm(dim=1) >= at_least - 1e-9)
               if at_least is not None else torch.zeros(len(labels), dtype=torch.bool))

    def shown(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and labels of frames ``rows``, the turnable ones at random headings."""
        if not turn:
            return x[rows], labels[rows]
        angle = torch.rand(len(rows), generator=generator, dtype=x.dtype) * (2 * torch.pi)
        turned, steps = turn_scene(x[rows], labels[rows, :3], angle * turnable[rows])
        return turned, torch.cat([steps, labels[rows, 3:]], dim=1)

    with torch.no_grad():
        x, q, cube_yaw = policy.features(raw)
        if normalize:
            policy.set_normalization(shown(torch.arange(len(raw)))[0].numpy())
    total = float(sum(weights))
    probability = torch.as_tensor(np.concatenate(
        [np.full(len(p.raw), w / (total * len(p.raw))) for p, w in zip(parts, weights,
                                                                         strict=True)]))
    optimizer = torch.optim.Adam(policy.body.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, config.updates)
    loss = torch.zeros(())
    for update in range(1, config.updates + 1):
        batch = torch.multinomial(probability, config.batch, replacement=True,
                                  generator=generator)
        inputs, targets = shown(batch)
        decision = policy.head(inputs)
        arm = policy.law(q[batch], decision[:, :3] * policy.move_unit, cube_yaw[batch])
        error = torch.cat([step_error(decision[:, :3], targets[:, :3], bounded[batch],
                                      at_least or 0.0),
                           (torch.cat([decision[:, 3:], arm], dim=1) - targets[:, 3:]) ** 2],
                          dim=1) * mask[batch]
        loss = error.sum() / mask[batch].sum().clamp(min=1.0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if checkpoint is not None and (update == config.updates
                                       or (every > 0 and update % every == 0)):
            checkpoint(update)
    return float(loss.item())


@dataclass
class CheckpointChoice:
    """The fit's checkpoint that scores best, kept (the later one on a tie).

    A :func:`fit_decisions` ``checkpoint`` hook: ``evaluate()`` scores the network as it is
    (the fraction of selection episodes it places the cube in); :meth:`restore` puts the
    best checkpoint's weights back.
    """

    policy: torch.nn.Module
    evaluate: Callable[[], float]
    log: Log = print
    scores: dict[int, float] = field(default_factory=dict)   # updates -> score
    kept: int | None = None                                  # updates of the best
    _weights: dict[str, torch.Tensor] | None = None

    def __call__(self, updates: int) -> None:
        """Score the network after ``updates``; keep its weights if none scored higher."""
        score = self.scores[updates] = self.evaluate()
        if score >= max(self.scores.values()):
            self.kept = updates
            self._weights = copy.deepcopy(self.policy.state_dict())
        self.log(f'checkpoint after {updates} updates: {score:.0%} of the selection episodes'
                 f' (best after {self.kept})')

    def restore(self) -> None:
        """Load the best checkpoint's weights into the policy."""
        if self._weights is not None:
            self.policy.load_state_dict(self._weights)


def selects_checkpoint(config: DatasetTrainConfig) -> bool:
    """Whether the fit keeps its best checkpoint (:class:`CheckpointChoice`).

    Only a fit on datasets alone with selection episodes and more than one checkpoint's
    updates does; co-training keeps its last round's network, as DAgger does.
    """
    return (config.selection_episodes > 0 and config.pick.updates > SELECTION_EVERY
            and not config.expert_rounds)


def expert_frames(policy: PickPolicy, rounds: Sequence[Rollouts]) -> Demonstrations:
    """DAgger rounds' states as labelled frames: the expert's decisions, no joint deltas.

    The quantities are read from each observation as the policy reads them
    (:meth:`~simops_learning.pick_network.PickPolicy.quantities`), noise included.
    """
    with torch.no_grad():
        raw = policy.quantities(torch.as_tensor(np.concatenate(
            [r.observations for r in rounds]))).numpy()
    decisions = np.concatenate([r.actions for r in rounds]).astype(np.float32)
    return Demonstrations(raw.astype(np.float32), decisions,
                          np.full((len(raw), 7), np.nan, dtype=np.float32), {})


def co_train(pool: Any, policy: PickPolicy, parts: Sequence[Demonstrations],
             config: DatasetTrainConfig, generator: torch.Generator, at_least: float | None,
             first_seed: int, log: Log = print) -> tuple[float, list[dict[str, Any]]]:
    """``config.expert_rounds`` DAgger rounds in the sim, each refitting on all; see step 3.

    Each round: the policy drives ``pick.episodes`` episodes at full randomisation (seeds
    from ``first_seed`` on, 10,000 apart by round), the expert labels every state; then
    :func:`fit_decisions` on the datasets ``parts`` and every round's states so far, of
    weight ``config.expert_weight``. Returns the last batch loss and a record per round.
    """
    pick = config.pick
    rounds: list[Rollouts] = []
    history: list[dict[str, Any]] = []
    loss = float('nan')
    for number in range(1, config.expert_rounds + 1):
        data = run_round(pool, pick, scripted(policy), first_seed + number * 10_000,
                         pick.episodes, 0.0, 1.0)
        rounds.append(data)
        expert = expert_frames(policy, rounds)
        loss = fit_decisions(policy, [*parts, expert], [*config.weights, config.expert_weight],
                             pick, generator, normalize=config.init_policy is None,
                             turn=config.turn, at_least=at_least)
        success = float(np.mean(data.successes))
        history.append({'round': number, 'success': success, 'states': len(expert.raw),
                        'loss': round(loss, 5)})
        log(f'expert round {number}: the policy placed the cube in {success:.0%} of '
            f'{len(data.successes)} episodes; refit on the datasets and {len(expert.raw)} '
            f'expert-labelled states: loss {loss:.4f}')
    return loss, history


def train_from_datasets(config: DatasetTrainConfig, log: Log = print
                        ) -> tuple[PickPolicy, dict[str, Any]]:
    """Read, fit and evaluate; return the policy and the training metadata for its card."""
    pick = config.pick
    generator = seeded_torch(pick.seed)
    started = time.monotonic()
    env = FR3PickPlaceEnv(robot=pick.robot)
    try:
        policy, pick = start_policy(env, pick, config.init_policy)
    except InitPolicyError as exc:
        raise DatasetError(str(exc)) from None
    parts = []
    for root in config.datasets:
        part = read_demonstrations(root, env.spec_robot, policy.law, 1.0 / CONTROL_RATE)
        if not len(part.raw):
            raise DatasetError(f'{root}: no frame to learn from (every episode failed)')
        parts.append(part)
        e = part.entry
        log(f'{root}: {e["episodes"]} episodes, {e["frames"]} frames ({e["frames_from_twist"]} '
            f'with an operator twist), {e["episodes_failed_left_out"]} failed episodes left '
            f'out, sha256 {e["sha256"][:12]}')
    at_least = (None if config.twist_cap is None
                else config.twist_cap / CONTROL_RATE / policy.move_unit)
    base = pick.seed * 1_000_003
    context = multiprocessing.get_context('spawn')
    with interrupts_ignored():   # Ctrl-C is this process's to handle
        pool = context.Pool(pick.workers)
    with pool:
        def placed(first_seed: int, episodes: int) -> float:
            return float(np.mean(run_round(pool, pick, scripted(policy), first_seed, episodes,
                                           0.0, 1.0).successes))

        choice = (CheckpointChoice(policy, lambda: placed(base + 800_000,
                                                          config.selection_episodes), log)
                  if selects_checkpoint(config) else None)
        history: list[dict[str, Any]] = []
        if config.expert_rounds:
            loss, history = co_train(pool, policy, parts, config, generator, at_least, base,
                                     log)
        else:
            loss = fit_decisions(policy, parts, config.weights, pick, generator,
                                 normalize=config.init_policy is None, turn=config.turn,
                                 at_least=at_least, checkpoint=choice, every=SELECTION_EVERY)
        if choice is not None:
            choice.restore()
        log(f'fit {pick.updates} updates' + (f' per round, {config.expert_rounds} rounds,'
                                             if config.expert_rounds else '')
            + f' on {sum(len(p.raw) for p in parts)} dataset frames: loss {loss:.4f}'
            + (f', kept the checkpoint after {choice.kept}' if choice else '')
            + f', {time.monotonic() - started:.0f} s')
        success = placed(base + 900_000, pick.eval_episodes)
    log(f'final: policy alone at full randomisation {success:.1%} of {pick.eval_episodes} '
        f'episodes, {time.monotonic() - started:.0f} s')
    metadata = {
        'framework': f'torch {torch.__version__}',
        'algorithm': 'behaviour cloning of the decision network from LeRobot datasets'
                     + (', co-trained with the grasp expert by DAgger in the sim'
                        if config.expert_rounds else '')
                     + (' (fine-tuned)' if config.init_policy is not None else ''),
        'policy': 'kinematics layer + MLP (simops_learning.pick_network)',
        'seed': pick.seed, 'hidden': list(pick.hidden), 'updates': pick.updates,
        'augmentation': 'scene turned about the vertical' if config.turn else 'none',
        'twist_at_cap': ('exact' if config.twist_cap is None
                         else f'at least (cap {config.twist_cap:g} m/s)'),
        'final_loss': round(loss, 5),
        'checkpoint_selection': None if choice is None else {
            'episodes': config.selection_episodes, 'every_updates': SELECTION_EVERY,
            'success_by_updates': choice.scores, 'kept_updates': choice.kept},
        'datasets': [{**p.entry, 'weight': w} for p, w in zip(parts, config.weights,
                                                                strict=True)],
        'expert_rounds': None if not config.expert_rounds else {
            'expert': 'the scripted grasp expert (simops_learning.pick_expert) labelling the '
                      'states the policy visits, DAgger in the training sim at full '
                      'randomisation',
            'rounds': config.expert_rounds, 'episodes_per_round': pick.episodes,
            'weight': config.expert_weight, 'rounds_log': history},
        'init_policy': file_entry(config.init_policy),
        'randomized_success': success, 'eval_episodes': pick.eval_episodes,
        'randomization': {**asdict(pick.randomization),
                          'ramp_times': list(pick.randomization.ramp_times)},
        'sim_params': file_entry(pick.sim_params),
        'sim_profile': profile_entry(pick.profile),
        'wall_time_s': round(time.monotonic() - started, 1),
    }
    return policy, metadata


def train_datasets_and_export(args: argparse.Namespace,
                              randomization: DomainRandomization) -> int:
    """``simops-train --dataset``: train, export ``STEM.pt``/``.pt2`` and their cards.

    Returns the exit code: 0, 1 when the export fails, 2 on an unreadable dataset or
    initial policy (one line each).
    """
    weights = tuple(args.weight or [1.0] * len(args.dataset))
    pick = PickTrainConfig(robot=args.robot, seed=args.seed, eval_episodes=args.eval_episodes,
                           updates=args.updates, workers=args.workers, episodes=args.episodes,
                           randomization=randomization, sim_params=args.sim_params,
                           profile=args.sim_profile)
    config = DatasetTrainConfig(tuple(Path(d) for d in args.dataset), weights,
                                Path(args.init_policy) if args.init_policy else None,
                                turn=args.augment == 'turn',
                                twist_cap=(teleop_speed_cap() if args.twist_at_cap == AT_LEAST
                                           else None), pick=pick,
                                selection_episodes=args.select_episodes,
                                expert_rounds=args.expert_rounds,
                                expert_weight=args.expert_weight)
    try:
        policy, metadata = train_from_datasets(config, log=lambda line: print(line, flush=True))
    except DatasetError as exc:
        print(f'simops-train: error: {exc}', file=sys.stderr)
        return EXIT_USAGE
    return export_pick(policy, metadata, pick.robot, args.out, suffix='_bc')
