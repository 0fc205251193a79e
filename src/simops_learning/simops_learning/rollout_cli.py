"""``simops-rollout``: simulated episodes into a LeRobot v3.0 dataset, in the card's schema.

``simops-rollout --policy P --out DIR [--task reach|pick_place] [--episodes 20]
[--randomization PROFILE] [--sim-params F] [--seed 0] [--workers 2] [--append]`` runs the
policy (loaded and checked against its card as the policy node loads it), or with
``--expert`` the reach task's IK expert, in its task's env (the card's task; ``--task`` only
for a card that names none) under the task's randomisation profile of
config/randomization.yaml (full ranges), and writes each episode as
:func:`simops_learning.sim_episodes.sim_episode` records it, through the same writer as
``simops-dataset export``.

Episodes run in chunks on local worker processes, or with ``--ray ADDRESS`` on a Ray
cluster (:mod:`simops_core.executor`). ``--cameras scene,wrist`` renders those cameras of
config/cameras.yaml at every frame into LeRobot video features, as ``simops-dataset
export`` writes recorded ones, under an appearance drawn per episode. Exit codes:
:data:`EXIT_CODES` (the output is left unchanged in every failing case).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simops_core.camera_rig import CameraConfigError, CameraSpec, load_cameras
from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    CommandLineParser,
    UsageError,
    exit_codes,
    fail,
)
from simops_core.executor import (
    Executor,
    ExecutorError,
    isolate_for_local_ray,
    make_executor,
    run_tasks,
)
from simops_core.policy_card import CardError, file_sha256
from simops_core.robot_spec import SpecError
from simops_core.sim_params import SimParamsError
from simops_core.tasks import TASK_NAMES, TASKS, resolve_task
from simops_learning.dataset_cli import load_card
from simops_learning.episode_schema import EpisodeFrames, card_schema
from simops_learning.lerobot_writer import DatasetError, write_dataset
from simops_learning.rollout import BATCH, TASK_EPISODES
from simops_sim.appearance import load_appearance
from simops_sim.randomization import RandomizationError, default_randomization

PROG = 'simops-rollout'
CAMERA_TASK_EPISODES = 5   # episodes per job with --cameras (0.2 MB per image in memory)
EXIT_CODES = {EXIT_OK: 'written', EXIT_FAILED: 'the workers failed (the output is unchanged)',
              EXIT_CONFIG: 'bad command line, policy, card, robot, randomisation, sim params or '
                           'camera',
              EXIT_OUTPUT: 'the output cannot take the episodes (left unchanged)',
              EXIT_INTERRUPTED: 'interrupted (every worker stopped, the output unchanged)'}


@dataclass(frozen=True)
class Job:
    """Episodes ``episodes`` of one rollout run, for one worker."""

    policy: str
    card: str
    task: str
    expert: bool
    profile: str
    sim_params: str | None
    seed: int
    episodes: range
    cameras: tuple[str, ...] = ()


def run_job(job: Job) -> list[EpisodeFrames]:
    """Worker: build the env and the policy once, run the job's episodes."""
    from simops_learning import env_class
    from simops_learning.expert import ReachExpert
    from simops_learning.sim_episodes import sim_episodes
    from simops_policy.model import load_policy

    card, spec = load_card(job.card)
    kind = env_class(job.task)
    envs = [kind(card_path=job.card, sim_params_file=job.sim_params,
                 randomization=default_randomization(job.profile), robot=spec.name)
            for _ in range(min(BATCH, len(job.episodes)))]
    if job.expert:   # the expert reads the env's raw state: one env, stepped alone
        env = envs[0]
        envs = [env]
        expert = ReachExpert(env.physics.model, env.physics.index, spec, card.action.scale)

        def policy(obs: np.ndarray) -> np.ndarray:
            del obs
            raw = env.policy_step.raw
            return expert.act(raw.joint_position, raw.goal_position)
        policy_hash = 'expert:reach-ik'
    else:
        policy = load_policy(Path(job.policy), envs[0].card).infer
        policy_hash = file_sha256(Path(job.policy))
    provenance = {'policy_sha256': policy_hash, 'sim_params_sha256':
                  file_sha256(Path(job.sim_params)) if job.sim_params else ''}
    specs = load_cameras().select(job.cameras)
    out = sim_episodes(envs, policy, card_schema(card, camera_sizes(specs)), job.seed,
                       job.episodes, provenance, specs, load_appearance() if specs else None)
    for frames in out:
        frames.task = TASKS[job.task].summary
    return out


def camera_sizes(specs: list[CameraSpec]) -> tuple[tuple[str, int, int], ...]:
    """(name, width, height) of each camera, as a schema takes them."""
    return tuple((spec.name, spec.width, spec.height) for spec in specs)


def rollouts(jobs: list[Job], executor: Executor) -> Iterator[EpisodeFrames]:
    """Every job's episodes in order, run on ``executor`` with a progress line per job."""
    def progress(line: str) -> None:
        print(f'rollouts: {line}', file=sys.stderr, flush=True)

    parts = run_tasks(executor, run_job, jobs, units=len, unit='episodes', progress=progress)
    for part in parts:
        yield from part


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-rollout --help``."""
    parser = CommandLineParser(
        PROG, 'Roll a policy out in the simulator under domain randomisation and write the '
              'episodes as a LeRobot v3.0 dataset.',
        exit_codes(EXIT_CODES))
    parser.add_argument('--policy', help='TorchScript .pt or .pt2 policy')
    parser.add_argument('--card', help='policy card (default: the policy path with .yaml)')
    parser.add_argument('--expert', action='store_true',
                        help='act with the reach task\'s IK expert instead of a policy '
                             '(needs --card)')
    parser.add_argument('--task', choices=TASK_NAMES,
                        help='the task, for a card that names none (default reach); a card\'s '
                             'own task is refused if it differs')
    parser.add_argument('--out', required=True, help='dataset directory')
    parser.add_argument('--episodes', type=int, default=20)
    parser.add_argument('--seed', type=int, default=0, help='task and physics seed')
    parser.add_argument('--randomization', help='profile of config/randomization.yaml '
                                                '(default: the task\'s)')
    parser.add_argument('--sim-params', help='SimParams YAML (calibrated physics)')
    parser.add_argument('--workers', type=int, default=2,
                        help='local worker processes (or CPUs of --ray local)')
    parser.add_argument('--ray', metavar='ADDRESS',
                        help='run on a Ray cluster: HOST:PORT, or "local" (127.0.0.1 only)')
    parser.add_argument('--append', action='store_true', help='add to the dataset at --out')
    parser.add_argument('--cameras', default='', help='cameras of config/cameras.yaml to '
                        'render into video features, comma-separated (e.g. scene,wrist); '
                        'appearance randomised per episode')
    args = parser.parse_args(argv)
    if args.episodes < 1 or args.workers < 1:
        parser.error('--episodes and --workers must be >= 1')
    if args.expert == bool(args.policy):
        parser.error('give exactly one of --policy and --expert')
    if args.expert and not args.card:
        parser.error('--expert runs the reach task and needs --card')
    if args.ray == 'local':
        try:
            isolate_for_local_ray([sys.argv[0], *(sys.argv[1:] if argv is None else argv)])
        except ExecutorError as exc:
            return fail(PROG, EXIT_USAGE, str(exc))
    card_path = args.card or str(Path(args.policy).with_suffix('.yaml'))
    cameras = tuple(name for name in args.cameras.split(',') if name)
    try:
        card, _ = load_card(card_path)
        task = resolve_task(args.task, card.task, card_path)
        if args.expert and task.name != 'reach':
            raise UsageError(f'--expert runs the reach task; {card_path} is a {task.name} card')
        profile = args.randomization or task.randomization
        if card.images:
            raise CardError(f'{card_path} takes camera images; the rollout envs feed none '
                            'to policies yet (--cameras only records them)')
        specs = load_cameras().select(cameras)
        if specs:
            load_appearance()
        default_randomization(profile)
        if args.policy and not Path(args.policy).is_file():
            raise CardError(f'policy {args.policy} does not exist')
        if args.sim_params and not Path(args.sim_params).is_file():
            raise SimParamsError(f'sim params {args.sim_params} does not exist')
    except (CardError, SpecError, RandomizationError, SimParamsError,
            CameraConfigError, UsageError) as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    # A job's episodes stay in memory until it ends: with images, fewer per job.
    most = CAMERA_TASK_EPISODES if cameras else TASK_EPISODES
    chunk = max(1, min(most, -(-args.episodes // args.workers)))
    jobs = [Job(args.policy or '', card_path, task.name, args.expert, profile,
                args.sim_params, args.seed, range(s, min(s + chunk, args.episodes)), cameras)
            for s in range(0, args.episodes, chunk)]
    started = time.monotonic()

    def progress(episode: EpisodeFrames, index: int) -> None:
        print(f'episode {index}: {episode.length} frames, {episode.meta["outcome"]}',
              flush=True)

    try:
        written = write_dataset(args.out, card_schema(card, camera_sizes(specs)),
                                card.control_rate,
                                rollouts(jobs, make_executor(args.ray, args.workers)),
                                append=args.append, progress=progress)
    except ExecutorError as exc:
        return fail(PROG, EXIT_FAILED, f'{exc}; {args.out} is unchanged')
    except KeyboardInterrupt:
        print(f'{PROG}: interrupted; every worker has been stopped, {args.out} is unchanged',
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except DatasetError as exc:
        return fail(PROG, EXIT_OUTPUT, str(exc))
    except OSError as exc:
        return fail(PROG, EXIT_OUTPUT, f'cannot write {args.out}: {exc}; it is unchanged')
    elapsed = time.monotonic() - started
    print(f'{args.out}: {written.episodes} episodes, {written.frames} frames in '
          f'{elapsed:.1f} s ({written.episodes / elapsed:.2f} episodes/s, {args.workers} '
          f'workers)')
    return EXIT_OK


def cli() -> None:
    """Console-script wrapper: exit with :func:`main`'s code."""
    sys.exit(main())
