"""``simops-dataset export``: rosbag2 episodes to a LeRobot v3.0 dataset with the card's schema.

``simops-dataset export BAG... --card CARD --out DIR [--fps 20] [--task "..."]`` reads each
bag as one episode (:mod:`simops_learning.bag_frames`: joint states interpolated at the frame
times, commands at their effective time, slower topics held up to ``--max-age``), in
parallel worker processes, and writes the dataset (:mod:`simops_learning.lerobot_writer`)
atomically: a failed export leaves ``--out`` as it was. ``--append`` adds the episodes to
the dataset at ``--out``. Per episode it prints frames kept, dropped and trimmed and the
worst age of each input. Camera images (``--cameras``, by default every camera of
config/cameras.yaml the first bag recorded) become LeRobot video features
``observation.images.<camera>``, held like the object pose (an image older than
``--max-age`` drops the frame) and encoded as LeRobot encodes them. Exit codes:
:data:`EXIT_CODES`.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from simops_core.bag_reader import BagError, message_typestore, read_bag
from simops_core.camera_rig import CameraConfigError, load_cameras
from simops_core.command_line import (
    EXIT_CONFIG,
    EXIT_DATA,
    EXIT_OK,
    EXIT_OUTPUT,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_core.policy_card import CardError, PolicyCard, load_policy_card
from simops_core.robot_spec import RobotSpec, SpecError, load_robot_spec
from simops_core.topics import load_topics
from simops_learning.bag_frames import (
    DEFAULT_FPS,
    DEFAULT_MAX_AGE,
    IMAGE,
    Alignment,
    EpisodeError,
    bag_episode,
    topic_first,
)
from simops_learning.episode_schema import EpisodeFrames, card_schema
from simops_learning.lerobot_writer import DatasetError, Written, write_dataset

PROG = 'simops-dataset'
EXIT_CODES = {EXIT_OK: 'written', EXIT_CONFIG: 'bad command line, policy card, robot spec or '
                                               'camera name',
              EXIT_DATA: 'a bag cannot be exported (no joint states or commands, the card\'s '
                         'topics or joints\n     missing, another robot, shorter than one '
                         'frame; the line names it)',
              EXIT_OUTPUT: 'the output cannot take the episodes (left unchanged)'}


def load_card(path: str | Path) -> tuple[PolicyCard, RobotSpec]:
    """The card at ``path`` and the robot spec it names; raise CardError or SpecError."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise CardError(f'policy card {path} does not exist') from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CardError(f'{path}: cannot parse policy card: {exc}') from None
    robot = raw.get('robot') if isinstance(raw, dict) else None
    if not isinstance(robot, str):
        raise CardError(f'{path}: robot is missing; name the robot spec the policy is for')
    spec = load_robot_spec(robot)
    return load_policy_card(path, spec.joint_names, spec.arm_joints), spec


Cameras = tuple[tuple[str, int, int], ...]
"""(name, width, height) of each exported camera."""


def _export_one(bag: str, card_path: str, alignment: Alignment, task: str,
                cameras: Cameras) -> EpisodeFrames:
    """Worker: one bag as an episode (the card is loaded again in the worker process)."""
    card, spec = load_card(card_path)
    rig = load_cameras()
    return bag_episode(bag, card_schema(card, cameras), spec, load_topics(), alignment, task,
                       {name: rig.topics(name).color for name, _, _ in cameras})


def bag_cameras(bag: str, names: str) -> Cameras:
    """The cameras to export, with their sizes from ``bag``'s first image.

    ``names`` is comma-separated, or ``auto``: every camera of config/cameras.yaml whose
    colour topic ``bag`` has.
    """
    rig = load_cameras()
    try:
        listing = read_bag(bag, topics=())
    except BagError as exc:
        raise EpisodeError(str(exc)) from None
    found = {name for name, t in listing.topics.items() if t.count}
    chosen = ([n for n in rig.cameras if rig.topics(n).color in found] if names == 'auto'
              else [spec.name for spec in rig.select([n for n in names.split(',') if n])])
    store = message_typestore(listing)
    cameras = []
    for name in chosen:
        topic = rig.topics(name).color
        if topic not in found:
            raise EpisodeError(f'{bag} has no images on {topic} (camera {name}); record it, '
                               'or leave it out of --cameras')
        first = topic_first(Path(bag), topic, IMAGE, store)
        cameras.append((name, int(first.width), int(first.height)))
    return tuple(cameras)


def episodes_in_parallel(bags: Sequence[str], card_path: str, alignment: Alignment,
                         task: str, workers: int, cameras: Cameras = ()
                         ) -> Iterator[EpisodeFrames]:
    """Each bag's episode, in the bags' order, converted by ``workers`` processes."""
    if workers <= 1:
        for bag in bags:
            yield _export_one(bag, card_path, alignment, task, cameras)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_export_one, bag, card_path, alignment, task, cameras)
                   for bag in bags]
        try:
            for future in futures:
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def describe(episode: EpisodeFrames) -> str:
    """One progress line: frames kept, dropped (by input), trimmed and worst input ages."""
    report = episode.report
    ages = ', '.join(f'{name} {1e3 * age:.0f} ms' for name, age in
                     report.get('worst_age_s', {}).items())
    dropped = {k: v for k, v in report.get('dropped_by_input', {}).items() if v}
    return (f'{report["frames"]} frames, {report["dropped"]} dropped'
            + (f' ({", ".join(f"{k} {v}" for k, v in dropped.items())})' if dropped else '')
            + f', {report["trimmed"]} trimmed; worst input age: {ages}')


def _episodes_in(out: Path) -> int:
    """Episodes already in the dataset at ``out`` (0 when there is none or it is unreadable)."""
    try:
        return int(json.loads((out / 'meta' / 'info.json').read_text())['total_episodes'])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def export(args: object) -> int:
    """``export``: see the module docstring."""
    bags, out = [str(b) for b in args.bags], Path(args.out)
    try:
        card, _ = load_card(args.card)
    except (CardError, SpecError) as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    missing = [b for b in bags if not Path(b).is_dir()]
    if missing:
        return fail(PROG, EXIT_DATA, f'{missing[0]} is not a rosbag2 directory')
    alignment = Alignment(args.fps, args.max_age)
    try:
        cameras = bag_cameras(bags[0], args.cameras)
    except CameraConfigError as exc:
        return fail(PROG, EXIT_CONFIG, str(exc))
    except EpisodeError as exc:
        return fail(PROG, EXIT_DATA, f'{exc}; {out} is unchanged')
    started, total = time.monotonic(), len(bags)
    first = _episodes_in(out) if args.append else 0

    def progress(episode: EpisodeFrames, index: int) -> None:
        done = index - first + 1
        print(f'[{done}/{total}] {Path(episode.meta["bag"]).name} -> episode {index}: '
              f'{describe(episode)} ({time.monotonic() - started:.1f} s)', flush=True)

    try:
        written: Written = write_dataset(
            out, card_schema(card, cameras), args.fps,
            episodes_in_parallel(bags, args.card, alignment, args.task, args.workers, cameras),
            append=args.append, progress=progress)
    except EpisodeError as exc:
        return fail(PROG, EXIT_DATA, f'{exc}; {out} is unchanged')
    except DatasetError as exc:
        return fail(PROG, EXIT_OUTPUT, str(exc))
    except OSError as exc:
        return fail(PROG, EXIT_OUTPUT, f'cannot write {out}: {exc}; it is unchanged')
    print(f'{out}: {written.episodes} episodes, {written.frames} frames written at '
          f'{args.fps:g} fps (dataset: {written.total_episodes} episodes, '
          f'{written.total_frames} frames) in {time.monotonic() - started:.1f} s')
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see ``simops-dataset --help``."""
    parser = CommandLineParser(
        PROG, 'Export rosbag2 episodes to a LeRobot v3.0 dataset in a policy card\'s schema.',
        exit_codes(EXIT_CODES))
    commands = parser.add_subparsers(dest='command', required=True)
    sub = commands.add_parser('export', description='Export bags, an episode each.')
    sub.add_argument('bags', nargs='+', metavar='BAG', help='rosbag2 directories, an episode each')
    sub.add_argument('--card', required=True, help='policy card (YAML) whose schema to use')
    sub.add_argument('--out', required=True, help='dataset directory (must not exist, or '
                                                  'pass --append)')
    sub.add_argument('--fps', type=float, default=DEFAULT_FPS, help='frames per second')
    sub.add_argument('--task', default='', help='task text for episodes whose metadata has '
                                                'none (default: the episode label)')
    sub.add_argument('--max-age', type=float, default=DEFAULT_MAX_AGE,
                     help='s, the oldest a held input (command, pose) may be at a frame')
    sub.add_argument('--append', action='store_true', help='add to the dataset at --out')
    sub.add_argument('--workers', type=int, default=2, help='parallel worker processes')
    sub.add_argument('--cameras', default='auto', help='cameras of config/cameras.yaml to '
                     'export as video, comma-separated; auto: every one the first bag '
                     'recorded; empty: none')
    args = parser.parse_args(argv)
    if args.fps <= 0 or args.max_age <= 0 or args.workers < 1:
        parser.error('--fps and --max-age must be > 0 and --workers >= 1')
    return export(args)


def cli() -> None:
    """Console-script wrapper: exit with :func:`main`'s code."""
    sys.exit(main())
