"""``simops-train``: the default reach policy, cloned from the IK expert, then evaluated.

1. Goals are drawn uniformly from the workspace, slightly enlarged (seeded), and the expert
   (:mod:`simops_learning.expert`) labels each with its goal posture q* (7,) rad, in worker
   processes.
2. The posture network of :class:`~simops_learning.network.PosturePolicy` is fit to them by
   mean squared error (Adam, cosine schedule, one torch thread); a held-out tenth of the
   goals measures its joint and flange errors.
3. The feedback gain is chosen among candidates by closed-loop rollouts of the scripted
   module in the env under full domain randomisation (the node's safety pipeline, action
   delay, mass, friction, damping, servo gain, noise, ramp): the randomisation ranges, which
   ``--randomization`` takes from a validation report's suggestion, shape the controller;
   with ``--scenarios``, a share of those rollouts play the named events (a push, a moved
   goal, lost joint states, the e-stop), so the gain is chosen through them too.

The policy's feedback law is the expert's, so imitation reduces to the posture map, which
depends on the goal alone: no state-distribution shift, hence no DAgger rounds. Same seed and
settings give the same weights (labelling is deterministic, fitting single-threaded).
"""

from __future__ import annotations

import io
import multiprocessing
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simops_core.command_line import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CommandLineParser,
    exit_codes,
    terminate_as_interrupt,
)
from simops_core.executor import interrupts_ignored
from simops_core.promotion import file_entry
from simops_core.sim_params import SimParamsError, load_sim_params
from simops_core.tasks import DEFAULT_TASK, TASK_NAMES, TASKS
from simops_learning.dataset_train import (
    SELECTION_EPISODES,
    SELECTION_EVERY,
    TWIST_AT_CAP,
    train_datasets_and_export,
)
from simops_learning.dataset_train import UPDATES as DATASET_UPDATES
from simops_learning.expert import ExpertGains, ReachExpert
from simops_learning.network import PosturePolicy, export_policy
from simops_learning.pick_train import PickTrainConfig, train_pick_and_export
from simops_learning.reach_env import WORKSPACE_HIGH, WORKSPACE_LOW, FR3ReachEnv
from simops_learning.reward_terms import parse_reward_terms
from simops_learning.seeding import seeded_torch
from simops_learning.training_options import TrainingAsked, refusal
from simops_sim.randomization import (
    DomainRandomization,
    default_randomization,
    load_randomization,
)
from simops_sim.scenarios import ScenarioError, drawn, scenario
from simops_sim.sim_profiles import (
    SIM_PROFILES_FILE,
    TRAINING,
    SimProfileError,
    profile_entry,
    sim_profile,
)

EXIT_CODES = {EXIT_OK: 'trained and exported', EXIT_FAILED: 'the export failed',
              EXIT_USAGE: 'bad command line, randomisation, sim params file, dataset or '
                          'initial policy',
              EXIT_INTERRUPTED: 'interrupted (Ctrl-C): every worker stopped, nothing written'}
GOAL_MARGIN = 0.01        # m the sampled goals extend beyond the workspace on every side
HELD_OUT = 0.1            # fraction of the goals kept for the error estimate


@dataclass(frozen=True)
class TrainConfig:
    """Training settings; counts are goals, updates and episodes."""

    robot: str = 'fr3'
    seed: int = 0
    goals: int = 4000
    hidden: tuple[int, ...] = (128, 128)
    updates: int = 20000
    batch: int = 256
    learning_rate: float = 3e-3
    eval_episodes: int = 60          # per candidate gain
    gain_candidates: tuple[float, ...] = (0.15, 0.2, 0.3)
    workers: int = 2
    gains: ExpertGains = field(default_factory=ExpertGains)
    randomization: DomainRandomization = field(default_factory=default_randomization)
    sim_params: str | None = None    # SimParams YAML of the training physics (None: nominal)
    profile: str = TRAINING          # the simulator's options (simops_sim.sim_profiles)
    scenarios: tuple[str, ...] = ()  # config/scenarios.yaml events the gain rollouts play
    scenario_share: float = 0.5      # of those rollouts, each plays one of them


def label_goals(robot: str, goals: np.ndarray) -> np.ndarray:
    """Worker: the expert's posture (N, 7) rad for goals (N, 3) m on ``robot``."""
    env = FR3ReachEnv(robot=robot)
    expert = ReachExpert(env.physics.model, env.physics.index, env.spec_robot,
                         env.card.action.scale)
    return np.array([expert.solve(goal) for goal in goals])


@dataclass(frozen=True)
class EvalJob:
    """Closed-loop evaluation episodes for one worker."""

    policy: bytes                  # TorchScript archive
    seeds: tuple[int, ...]
    randomization: DomainRandomization
    robot: str
    sim_params: str | None = None
    profile: str = TRAINING
    scenarios: tuple[str, ...] = ()
    scenario_share: float = 0.5


def evaluate(job: EvalJob) -> list[bool]:
    """Worker: success per episode of the scripted policy under full randomisation.

    Episode ``seed`` plays the scenario :func:`~simops_sim.scenarios.drawn` gives it.
    """
    torch.set_num_threads(1)
    module = torch.jit.load(io.BytesIO(job.policy))
    env = FR3ReachEnv(randomization=job.randomization, robot=job.robot,
                      sim_params_file=job.sim_params, profile=job.profile)
    successes = []
    for seed in job.seeds:
        played = drawn(job.scenarios, job.scenario_share, seed, 'reach')
        obs, info = env.reset(seed=seed, options={'level': 1.0, 'scenario': played})
        while True:
            with torch.inference_mode():
                action = module(torch.as_tensor(obs)[None])[0].numpy().astype(float)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes.append(bool(info['is_success']))
    return successes


def fit(policy: PosturePolicy, goals: np.ndarray, postures: np.ndarray, config: TrainConfig,
        generator: torch.Generator) -> float:
    """Fit the posture network by MSE on standardised postures; return the last loss."""
    x = torch.as_tensor(goals, dtype=torch.float32)
    y = torch.as_tensor(postures, dtype=torch.float32)
    optimizer = torch.optim.Adam(policy.body.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, config.updates)
    scale = policy.posture_std
    loss = torch.zeros(())
    for _ in range(config.updates):
        batch = torch.randint(len(x), (config.batch,), generator=generator)
        loss = torch.mean(((policy.posture(x[batch]) - y[batch]) / scale) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return loss.item()


def flange_errors(env: FR3ReachEnv, postures: np.ndarray, goals: np.ndarray) -> np.ndarray:
    """Flange-goal distance (N,) m of postures (N, 7) by forward kinematics."""
    import mujoco

    data = mujoco.MjData(env.physics.model)
    index = env.physics.index
    out = []
    for q, goal in zip(postures, goals, strict=True):
        data.qpos[index.qpos_adr[:index.arm_dof]] = q
        mujoco.mj_kinematics(env.physics.model, data)
        out.append(np.linalg.norm(data.xpos[index.flange_body] - goal))
    return np.array(out)


def train(config: TrainConfig, log: Any = print) -> tuple[PosturePolicy, dict[str, Any]]:
    """Label, fit and evaluate; return the policy and the training metadata for its card."""
    generator = seeded_torch(config.seed)
    started = time.monotonic()
    env = FR3ReachEnv(robot=config.robot)
    rng = np.random.default_rng(config.seed)
    goals = rng.uniform(WORKSPACE_LOW - GOAL_MARGIN, WORKSPACE_HIGH + GOAL_MARGIN,
                        (config.goals, 3))
    context = multiprocessing.get_context('spawn')
    with interrupts_ignored():   # Ctrl-C is this process's to handle
        pool = context.Pool(config.workers)
    with pool:
        chunks = np.array_split(goals, config.workers * 4)
        postures = np.concatenate(pool.map(partial(label_goals, config.robot), chunks))
        log(f'labelled {len(goals)} goals with the IK expert in '
            f'{time.monotonic() - started:.0f} s')
        held = max(1, int(len(goals) * HELD_OUT))
        policy = PosturePolicy(env.card, env.spec_robot, config.hidden, config.gains.gain)
        policy.eval()
        policy.set_normalization(goals[held:], postures[held:])
        loss = fit(policy, goals[held:], postures[held:], config, generator)
        policy.eval()
        with torch.no_grad():
            predicted = policy.posture(torch.as_tensor(goals[:held], dtype=torch.float32))
        joint_rms = float(np.sqrt(np.mean((predicted.numpy() - postures[:held]) ** 2)))
        flange = flange_errors(env, predicted.numpy().astype(float), goals[:held])
        log(f'fit {config.updates} updates: loss {loss:.2e}, held-out joint RMS '
            f'{joint_rms:.4f} rad, flange error median {1000 * np.median(flange):.1f} mm, '
            f'95th percentile {1000 * np.percentile(flange, 95):.1f} mm, '
            f'{time.monotonic() - started:.0f} s')
        results = {}
        for gain in config.gain_candidates:
            policy.gain_per_unit = gain / env.card.action.scale
            buffer = io.BytesIO()
            torch.jit.save(torch.jit.script(policy), buffer)
            seeds = [config.seed * 1_000_003 + 500_000 + i for i in range(config.eval_episodes)]
            jobs = [EvalJob(buffer.getvalue(), tuple(seeds[w::config.workers]),
                            config.randomization, config.robot, config.sim_params,
                            config.profile, config.scenarios, config.scenario_share)
                    for w in range(config.workers)]
            results[gain] = float(np.mean([s for part in pool.map(evaluate, jobs)
                                           for s in part]))
            log(f'gain {gain:g}: closed-loop success under full randomisation '
                f'{results[gain]:.1%} of {config.eval_episodes} episodes, '
                f'{time.monotonic() - started:.0f} s')
    best = max(results, key=lambda g: (results[g], -abs(g - config.gains.gain)))
    policy.gain_per_unit = best / env.card.action.scale
    log(f'chose gain {best:g}')
    metadata = {
        'framework': f'torch {torch.__version__}',
        'algorithm': 'behaviour cloning of the IK expert\'s goal posture',
        'policy': 'posture MLP (goal -> q*) + proportional joint law (simops_learning.network)',
        'seed': config.seed, 'goals': config.goals, 'hidden': list(config.hidden),
        'updates': config.updates, 'gain': best,
        'randomized_success_by_gain': {f'{g:g}': r for g, r in results.items()},
        'held_out_joint_rms_rad': round(joint_rms, 5),
        'held_out_flange_error_median_m': round(float(np.median(flange)), 5),
        'randomization': {**asdict(config.randomization),
                          'ramp_times': list(config.randomization.ramp_times)},
        'eval_episodes': config.eval_episodes,
        'sim_params': file_entry(config.sim_params),   # the training physics, by sha256
        'sim_profile': profile_entry(config.profile),
        'scenarios': ({'names': list(config.scenarios), 'share': config.scenario_share,
                       'in': 'the gain rollouts'} if config.scenarios else None),
        'wall_time_s': round(time.monotonic() - started, 1),
    }
    return policy, metadata


def usage_problem(args: Any) -> str | None:
    """What is wrong with the command line's options, if anything (before defaults fill in).

    Which options go together is :func:`~simops_learning.training_options.refusal`'s rule;
    then the values, and the files that must exist.
    """
    problem = refusal(TrainingAsked(
        args.task, dataset=bool(args.dataset), rounds=args.rounds is not None,
        ppo_iterations=args.ppo_iterations, scenarios=bool(args.scenarios),
        reward_terms=bool(args.reward_terms), init_policy=bool(args.init_policy),
        in_flight=args.in_flight))
    if problem:
        return problem
    if args.init_policy and not Path(args.init_policy).exists():
        return f'no such policy: {args.init_policy}'
    if not 0.0 < args.scenario_share <= 1.0:
        return f'--scenario-share is a fraction in (0, 1], got {args.scenario_share:g}'
    if args.select_episodes < 0:
        return f'--select-episodes is a count, 0 or more, got {args.select_episodes}'
    if args.expert_rounds < 0 or args.expert_weight <= 0:
        return (f'--expert-rounds is a count, 0 or more, and --expert-weight positive, got '
                f'{args.expert_rounds} and {args.expert_weight:g}')
    if not args.dataset:
        return ('--weight goes with --dataset' if args.weight else
                '--expert-rounds goes with --dataset' if args.expert_rounds else None)
    if args.weight and (len(args.weight) != len(args.dataset) or min(args.weight) <= 0):
        return (f'give one positive --weight per --dataset ({len(args.dataset)} datasets, '
                f'{len(args.weight)} weights)')
    absent = [d for d in [*args.dataset, *([args.init_policy] if args.init_policy else [])]
              if not Path(d).exists()]
    return f'no such dataset or policy: {", ".join(absent)}' if absent else None


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-train --help``."""
    terminate_as_interrupt()
    try:
        return _main(argv)
    except KeyboardInterrupt:   # the workers ignore it; leaving the pool ends them
        print('simops-train: interrupted; every worker stopped, nothing written',
              file=sys.stderr)
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
    defaults = TrainConfig()
    parser = CommandLineParser(
        'simops-train', 'Train the reach policy of an FR3 or Panda from the IK expert and '
        'export STEM.pt, STEM.pt2 and their cards (STEM.yaml, STEM.pt2.yaml).',
        exit_codes(EXIT_CODES))
    parser.add_argument('--task', choices=TASK_NAMES, default=DEFAULT_TASK,
                        help='reach (IK expert, posture network) or pick_place (grasp expert, '
                             'DAgger with a randomisation curriculum); the cards say it')
    parser.add_argument('--rounds', type=int,
                        help=f'pick_place: DAgger rounds (default {PickTrainConfig.rounds}; '
                             'with --dataset, --expert-rounds)')
    parser.add_argument('--episodes', type=int, default=PickTrainConfig.episodes,
                        help='pick_place: episodes per round (DAgger\'s, or --expert-rounds\')')
    parser.add_argument('--ppo-iterations', type=int, default=0,
                        help='pick_place: PPO iterations (RSL-RL) after DAgger (default 0)')
    parser.add_argument('--robot', default=defaults.robot,
                        help='robot spec (config/robot/<robot>.yaml; scene models/<robot>)')
    parser.add_argument('--out', help='output stem (default models/policy/<robot>_reach or '
                                      '<robot>_pick_place)')
    parser.add_argument('--seed', type=int, default=defaults.seed)
    parser.add_argument('--goals', type=int, default=defaults.goals,
                        help='goals labelled by the expert')
    parser.add_argument('--updates', type=int,
                        help=f'Adam steps (reach: {defaults.updates}; pick_place: per round, '
                             f'{PickTrainConfig.updates}; with --dataset: {DATASET_UPDATES}, '
                             f'per round with --expert-rounds)')
    parser.add_argument('--eval-episodes', type=int, default=defaults.eval_episodes,
                        help='randomised rollouts per candidate gain (pick_place: of the '
                             'final policy)')
    parser.add_argument('--workers', type=int, default=defaults.workers)
    parser.add_argument('--sim-params', help='SimParams YAML of the training physics (a fit\'s '
                        'calibration; randomisation is drawn around it); default: nominal')
    parser.add_argument('--sim-profile', default=TRAINING,
                        help='the simulator the policy is trained in: a profile of '
                             f'{SIM_PROFILES_FILE} (default: {TRAINING}, built for speed)')
    parser.add_argument('--dataset', action='append', metavar='DIR',
                        help='pick_place: a LeRobot dataset to clone the decision network '
                             'from (teleoperated demonstrations, recorded or simulated '
                             'episodes; repeat to mix) instead of DAgger from the expert')
    parser.add_argument('--weight', action='append', type=float, metavar='W',
                        help='with --dataset: each dataset\'s share of the batches, one per '
                             '--dataset in order (default: equal)')
    parser.add_argument('--init-policy', metavar='PT',
                        help='pick_place: fine-tune this policy (.pt) instead of training '
                             'from scratch (by DAgger at the full ranges, or on --dataset)')
    parser.add_argument('--in-flight', action='store_true',
                        help='pick_place, from scratch: the policy also reads its last '
                             'actions (7 frames), and the expert labels each state for where '
                             'the commands still in the command delay take the arm, so that '
                             'training with --randomization\'s delay teaches it to act for '
                             'the delay (pick_network.InFlightPolicy)')
    parser.add_argument('--expert-rounds', type=int, default=0, metavar='N',
                        help='with --dataset: co-train with the simulation, N DAgger rounds '
                             'in the training sim at full randomisation: the policy drives '
                             '--episodes episodes, the grasp expert labels every state it '
                             'visits, and the network is refit on the datasets and those '
                             'states (default 0: the datasets alone)')
    parser.add_argument('--expert-weight', type=float, default=1.0, metavar='W',
                        help='with --expert-rounds: the expert-labelled states\' share of '
                             'the batches, next to the --weight of each --dataset (default 1)')
    parser.add_argument('--augment', choices=('turn', 'none'), default='turn',
                        help='with --dataset: "turn" shows each frame labelled by a decision '
                             'at a random heading (the scene turned about the vertical through '
                             'the grasp point); "none" as recorded (default: turn)')
    parser.add_argument('--twist-at-cap', choices=TWIST_AT_CAP, default=TWIST_AT_CAP[0],
                        help='with --dataset: an operator twist at the teleop node\'s speed '
                             'cap labels the step "exact"ly, or as a lower bound ("at-least": '
                             'its direction, at least the cap), for demonstrations mixed with '
                             'faster policies\' episodes (default: exact)')
    parser.add_argument('--select-episodes', type=int, default=SELECTION_EPISODES,
                        metavar='N',
                        help=f'with --dataset: every {SELECTION_EVERY} updates, run the '
                             'network alone for N episodes of their own seeds and keep the '
                             'checkpoint that places the cube most often; 0 keeps the last '
                             f'(default {SELECTION_EPISODES})')
    parser.add_argument('--scenarios', nargs='+', default=[], metavar='NAME',
                        help='events of config/scenarios.yaml (push_arm, estop, '
                             'object_pose_dropout, ...) that the training rollouts play: '
                             'pick_place\'s DAgger rounds, the expert labelling on the true '
                             'cube pose in those episodes; reach\'s gain rollouts '
                             '(default: none)')
    parser.add_argument('--scenario-share', type=float, default=PickTrainConfig.scenario_share,
                        help='with --scenarios: the fraction of the training rollouts that '
                             'play one (default: %(default)s)')
    parser.add_argument('--reward-terms', nargs='+', default=[], metavar='NAME=W',
                        help='pick_place with --ppo-iterations: penalties added to the reward '
                             'PPO fine-tunes on, by failure mode (protective_stop, unsafe, '
                             'dropped, timeout) and weight (the success bonus is 10; '
                             'simops_learning.reward_terms); default: none')
    parser.add_argument('--randomization', type=Path,
                        help='YAML with a "randomization" mapping (e.g. the dr_suggestion.yaml '
                             'that simops-validate writes); fields it leaves out keep the '
                             'task\'s built-in ranges; default: those')
    args = parser.parse_args(argv)
    problem = usage_problem(args)
    if problem:
        print(f'simops-train: error: {problem}', file=sys.stderr)
        return EXIT_USAGE
    if args.rounds is None:
        args.rounds = PickTrainConfig.rounds
    if args.updates is None:
        args.updates = (DATASET_UPDATES if args.dataset and not args.expert_rounds
                        else PickTrainConfig.updates
                        if args.task == 'pick_place' else defaults.updates)
    if (min(args.goals, args.updates, args.eval_episodes, args.workers, args.rounds,
            args.episodes) < 1 or args.goals < 10 or args.ppo_iterations < 0):
        print('simops-train: error: --goals must be >= 10, --updates, --eval-episodes, '
              '--workers, --rounds and --episodes >= 1 and --ppo-iterations >= 0',
              file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.sim_params:
            load_sim_params(args.sim_params)
        sim_profile(args.sim_profile)
        for name in args.scenarios:
            scenario(name, args.task)
        parse_reward_terms(args.reward_terms)
        task_ranges = default_randomization(TASKS[args.task].randomization)
        randomization = (load_randomization(args.randomization, key='randomization',
                                            base=task_ranges)
                         if args.randomization else task_ranges)
    except (ValueError, SimParamsError, SimProfileError, ScenarioError) as exc:
        print(f'simops-train: error: {exc}', file=sys.stderr)
        return EXIT_USAGE
    if args.dataset:
        return train_datasets_and_export(args, randomization)
    if args.task == 'pick_place':
        return train_pick_and_export(args, randomization)
    config = TrainConfig(robot=args.robot, seed=args.seed, goals=args.goals, updates=args.updates,
                         eval_episodes=args.eval_episodes, workers=args.workers,
                         randomization=randomization, sim_params=args.sim_params,
                         profile=args.sim_profile, scenarios=tuple(args.scenarios),
                         scenario_share=args.scenario_share)
    policy, metadata = train(config, log=lambda line: print(line, flush=True))
    env = FR3ReachEnv(robot=config.robot)
    stem = Path(args.out or f'models/policy/{config.robot}_reach')
    try:
        paths = export_policy(policy, env.spec_robot, stem, env.card.observation_size, metadata)
    except OSError as exc:
        print(f'simops-train: error: cannot write {stem}: {exc}', file=sys.stderr)
        return EXIT_FAILED
    print(f'wrote {", ".join(str(p) for p in paths)} in {metadata["wall_time_s"]} s')
    return EXIT_OK


if __name__ == '__main__':
    sys.exit(main())
