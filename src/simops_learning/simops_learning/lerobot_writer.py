"""Write episodes as a LeRobot v3.0 dataset, atomically, and append to one (no rclpy).

Layout (LeRobot's ``src/lerobot/datasets/utils.py``)::

    meta/info.json                              codebase_version v3.0, fps, features, counts
    meta/stats.json                             per feature: min, max, mean, std, count, q01..q99
    meta/tasks.parquet                          task text (index) -> task_index
    meta/episodes/chunk-000/file-NNN.parquet    one row per episode: indices, length, tasks,
                                                data file, and SimOps' outcome and provenance
    data/chunk-000/file-NNN.parquet             one row per frame
    videos/<key>/chunk-000/file-NNN.mp4         a camera's frames, one file per episode

A dataset is built in a hidden directory beside ``out`` and renamed into place at the end:
a failed export leaves ``out`` as it was. Appending copies the existing dataset there
(hard links for data files, which are never rewritten), adds a data file and an episodes
file, and rewrites the meta files, so indices continue where the dataset ended.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from simops_learning.episode_schema import INDEX_COLUMNS, EpisodeFrames, Schema, VideoFeature
from simops_learning.video_encoder import CODEC, PIX_FMT, ImageStats, VideoError, encode_video

CODEBASE_VERSION = 'v3.0'
CHUNK = 'chunk-{chunk:03d}/file-{file:03d}.parquet'
VIDEO_FILE = 'chunk-{chunk:03d}/file-{file:03d}.mp4'
VIDEO_PATH = 'videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4'
DATA_FILE_MB = 100        # LeRobot's default data file size
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)

Progress = Callable[[EpisodeFrames, int], None]
"""Called after each episode is written, with the episode and its episode_index."""


class DatasetError(ValueError):
    """The output cannot take these episodes (exists, other schema, unwritable)."""


@dataclass(frozen=True)
class Written:
    """What an export wrote: new episodes and frames, and the dataset's totals after it."""

    episodes: int
    frames: int
    total_episodes: int
    total_frames: int


def write_dataset(out: str | Path, schema: Schema, fps: float,
                  episodes: Iterable[EpisodeFrames], append: bool = False,
                  progress: Progress | None = None) -> Written:
    """Write (or with ``append`` extend) the dataset at ``out``; see the module docstring.

    Raises :class:`DatasetError` when ``out`` exists without ``append``, or holds a dataset
    of another fps or schema; any error (a bad episode included) leaves ``out`` untouched.
    """
    target = Path(out)
    info = _existing_info(target, schema, fps) if append and target.exists() else None
    if info is None and target.exists():
        raise DatasetError(f'{target} exists; choose a new --out, or pass --append to add '
                           'episodes to the dataset there')
    stage = target.parent / f'.{target.name}.partial-{os.getpid()}'
    if stage.exists():
        shutil.rmtree(stage)
    try:
        if info is not None:
            shutil.copytree(target, stage, copy_function=os.link)
        else:
            stage.mkdir(parents=True)
            info = _new_info(schema, fps)
        written = _write_into(stage, schema, info, episodes, progress)
        _commit(stage, target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return written


def _existing_info(target: Path, schema: Schema, fps: float) -> dict[str, Any]:
    try:
        info = json.loads((target / 'meta' / 'info.json').read_text())
    except (OSError, ValueError) as exc:
        raise DatasetError(f'{target} is not a LeRobot dataset (meta/info.json: {exc}); '
                           'choose a new --out') from None
    if info.get('codebase_version') != CODEBASE_VERSION:
        raise DatasetError(f'{target} is a LeRobot {info.get("codebase_version")} dataset; '
                           f'this writes {CODEBASE_VERSION}')
    if info.get('fps') != _fps_value(fps):
        raise DatasetError(f'{target} has fps {info.get("fps")}, these episodes {fps:g}; '
                           'export with --fps matching the dataset')
    if info.get('features') != _features(schema, fps):
        theirs, ours = set(info.get('features', {})), set(_features(schema, fps))
        raise DatasetError(f'{target} holds other features (missing here: '
                           f'{sorted(theirs - ours)}, new here: {sorted(ours - theirs)}, or '
                           'other names); export with the card it was made with')
    return info


def _fps_value(fps: float) -> int | float:
    return int(fps) if float(fps).is_integer() else float(fps)


def _new_info(schema: Schema, fps: float) -> dict[str, Any]:
    return {
        'codebase_version': CODEBASE_VERSION, 'robot_type': schema.robot,
        'total_episodes': 0, 'total_frames': 0, 'total_tasks': 0, 'chunks_size': 1000,
        'data_files_size_in_mb': DATA_FILE_MB, 'video_files_size_in_mb': 200,
        'fps': _fps_value(fps), 'splits': {},
        'data_path': 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet',
        'video_path': VIDEO_PATH if schema.videos else None,
        'features': _features(schema, fps),
    }


def _features(schema: Schema, fps: float) -> dict[str, Any]:
    """``meta/info.json``'s features: the schema's columns, then its videos."""
    return schema.info_features() | {video.key: video.info(_fps_value(fps), CODEC, PIX_FMT)
                                     for video in schema.videos}


def _arrow_schema(schema: Schema) -> pa.Schema:
    index = [pa.field('timestamp', pa.float32())] + [
        pa.field(name, pa.int64()) for name in INDEX_COLUMNS[1:]]
    # LeRobot reads a feature of shape (1,) as a scalar column, wider ones as fixed-size lists.
    return pa.schema(index + [pa.field(f.key, pa.float64() if len(f.names) == 1 else
                                       pa.list_(pa.float64(), len(f.names)))
                              for f in schema.features])


def _next_file(folder: Path) -> int:
    return len(list(folder.glob('chunk-000/file-*.parquet')))


def _write_into(stage: Path, schema: Schema, info: dict[str, Any],
                episodes: Iterable[EpisodeFrames], progress: Progress | None) -> Written:
    tasks = _read_tasks(stage)
    image_stats = {video.key: ImageStats() for video in schema.videos}
    first_episode, first_frame = int(info['total_episodes']), int(info['total_frames'])
    episode_index, frame_index = first_episode, first_frame
    data_file = _next_file(stage / 'data')
    arrow = _arrow_schema(schema)
    rows: list[dict[str, Any]] = []
    writer: pq.ParquetWriter | None = None
    written_bytes = 0
    try:
        for episode in episodes:
            if writer is not None and written_bytes > DATA_FILE_MB * 2**20:
                writer.close()
                writer, written_bytes, data_file = None, 0, data_file + 1
            if writer is None:
                path = stage / 'data' / CHUNK.format(chunk=0, file=data_file)
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = pq.ParquetWriter(path, arrow)
            task_index = tasks.setdefault(episode.task, len(tasks))
            table = _frame_table(episode, arrow, episode_index, frame_index, task_index)
            writer.write_table(table)
            written_bytes += table.nbytes
            row = _episode_row(episode, episode_index, frame_index, data_file,
                               _next_file(stage / 'meta' / 'episodes'))
            for video in schema.videos:
                row |= _write_video(stage, video, episode, float(info['fps']), image_stats)
            rows.append(row)
            if progress is not None:
                progress(episode, episode_index)
            episode_index += 1
            frame_index += episode.length
    finally:
        if writer is not None:
            writer.close()
    if not rows:
        raise DatasetError('no episode to write')
    episodes_path = stage / 'meta' / 'episodes' / CHUNK.format(
        chunk=0, file=_next_file(stage / 'meta' / 'episodes'))
    episodes_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), episodes_path)
    _write_tasks(stage, tasks)
    info.update(total_episodes=episode_index, total_frames=frame_index, total_tasks=len(tasks),
                splits={'train': f'0:{episode_index}'})
    _write_json(stage / 'meta' / 'info.json', info)
    stats = dataset_stats(stage, schema)
    for key, sampled in image_stats.items():
        stats[key] = _merged_image_stats(stage, key, sampled)
    _write_json(stage / 'meta' / 'stats.json', stats)
    return Written(episode_index - first_episode, frame_index - first_frame, episode_index,
                   frame_index)


def _frame_table(episode: EpisodeFrames, arrow: pa.Schema, episode_index: int,
                 first_index: int, task_index: int) -> pa.Table:
    n = episode.length
    arrays: list[pa.Array] = [
        pa.array(episode.timestamp.astype(np.float32)),
        pa.array(np.arange(n, dtype=np.int64)),
        pa.array(np.full(n, episode_index, dtype=np.int64)),
        pa.array(np.arange(first_index, first_index + n, dtype=np.int64)),
        pa.array(np.full(n, task_index, dtype=np.int64)),
    ]
    for field in list(arrow)[len(INDEX_COLUMNS):]:
        values = np.ascontiguousarray(episode.columns[field.name], dtype=np.float64)
        arrays.append(pa.array(values[:, 0]) if values.shape[1] == 1 else
                      pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)),
                                                        values.shape[1]))
    return pa.Table.from_arrays(arrays, schema=arrow)


def _episode_row(episode: EpisodeFrames, index: int, first_frame: int, data_file: int,
                 episodes_file: int) -> dict[str, Any]:
    report = episode.report
    return {
        'episode_index': index, 'tasks': [episode.task], 'length': episode.length,
        'data/chunk_index': 0, 'data/file_index': data_file,
        'dataset_from_index': first_frame, 'dataset_to_index': first_frame + episode.length,
        'meta/episodes/chunk_index': 0, 'meta/episodes/file_index': episodes_file,
        **episode.meta,
        'frames_dropped': int(report.get('dropped', 0)),
        'frames_trimmed': int(report.get('trimmed', 0)),
        'alignment': json.dumps(report, sort_keys=True),
    }


def _write_video(stage: Path, video: VideoFeature, episode: EpisodeFrames, fps: float,
                 image_stats: dict[str, ImageStats]) -> dict[str, Any]:
    """Encode an episode's camera stream into a new file; its episode-table columns."""
    folder = stage / 'videos' / video.key
    index = len(list(folder.glob('chunk-000/file-*.mp4')))
    path = folder / VIDEO_FILE.format(chunk=0, file=index)
    try:
        sampled = encode_video(path, episode.videos[video.key](), episode.timestamp, fps,
                               video.width, video.height)
    except VideoError as exc:
        raise DatasetError(f'{video.key}: {exc}') from None
    image_stats[video.key].merge(sampled)
    end = float(episode.timestamp[-1]) + 1.0 / fps if episode.length else 0.0
    return {f'videos/{video.key}/chunk_index': 0, f'videos/{video.key}/file_index': index,
            f'videos/{video.key}/from_timestamp': 0.0, f'videos/{video.key}/to_timestamp': end}


def _merged_image_stats(stage: Path, key: str, sampled: ImageStats) -> dict[str, Any]:
    """This export's image statistics, merged with an appended-to dataset's."""
    path = stage / 'meta' / 'stats.json'
    old = json.loads(path.read_text()).get(key) if path.exists() else None
    if old:
        count = int(old['count'][0])
        mean = np.array(old['mean']).reshape(3)
        std = np.array(old['std']).reshape(3)
        sampled.merge(ImageStats(count, mean * count, (std ** 2 + mean ** 2) * count,
                                 np.array(old['min']).reshape(3),
                                 np.array(old['max']).reshape(3)))
    return sampled.as_lerobot()


def _read_tasks(stage: Path) -> dict[str, int]:
    path = stage / 'meta' / 'tasks.parquet'
    if not path.exists():
        return {}
    table = pd.read_parquet(path)
    return {str(task): int(i) for task, i in zip(table.index, table['task_index'], strict=True)}


def _write_tasks(stage: Path, tasks: dict[str, int]) -> None:
    path = stage / 'meta' / 'tasks.parquet'
    frame = pd.DataFrame({'task_index': list(tasks.values())}, index=list(tasks))
    frame.index.name = 'task'
    tmp = path.with_suffix('.tmp')
    frame.to_parquet(tmp)
    os.replace(tmp, path)   # never writes through a hard link to the appended-to dataset


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_suffix('.tmp')
    tmp.write_text(json.dumps(value, indent=4))
    os.replace(tmp, path)


def dataset_stats(root: Path, schema: Schema) -> dict[str, dict[str, list[float]]]:
    """Per-feature statistics over every frame of the dataset at ``root`` (NaN ignored).

    Each feature of width k gets ``min``, ``max``, ``mean``, ``std``, ``q01``, ``q10``,
    ``q50``, ``q90``, ``q99`` (k,) and ``count`` (1,) (frames with a finite value), as
    LeRobot's ``compute_stats`` names them. Reads one column at a time.
    """
    files = sorted((root / 'data').glob('chunk-*/file-*.parquet'))
    stats = {}
    for feature in [('timestamp', 1), *((f.key, len(f.names)) for f in schema.features)]:
        key, width = feature
        parts = [pq.read_table(file, columns=[key]).column(0) for file in files]
        chunks = [c for part in parts for c in part.chunks]
        if width == 1:
            values = np.concatenate([c.to_numpy(zero_copy_only=False) for c in chunks]
                                    ).astype(np.float64)[:, None]
        else:
            values = np.concatenate([c.flatten().to_numpy(zero_copy_only=False)
                                     for c in chunks]).reshape(-1, width)
        stats[key] = _feature_stats(values)
    return stats


def _feature_stats(values: np.ndarray) -> dict[str, list[float]]:
    """Statistics of (n, k) ``values``; an entry that is NaN in every frame gets NaN."""
    finite = np.isfinite(values)
    count = int(finite.all(axis=1).sum())
    if not finite.any():
        nan = [float('nan')] * values.shape[1]
        return {k: nan for k in ('min', 'max', 'mean', 'std', 'q01', 'q10', 'q50', 'q90',
                                 'q99')} | {'count': [count]}
    with warnings.catch_warnings():   # an all-NaN entry (no gripper command) is NaN
        warnings.simplefilter('ignore', RuntimeWarning)
        quantiles = np.nanquantile(values, QUANTILES, axis=0)
        out = {'min': np.nanmin(values, axis=0), 'max': np.nanmax(values, axis=0),
               'mean': np.nanmean(values, axis=0), 'std': np.nanstd(values, axis=0)}
    out |= {f'q{round(q * 100):02d}': row for q, row in zip(QUANTILES, quantiles, strict=True)}
    return {k: [float(x) for x in v] for k, v in out.items()} | {'count': [count]}


def _commit(stage: Path, target: Path) -> None:
    """Put ``stage`` at ``target``: a rename, or two around the old dataset when appending."""
    if not target.exists():
        os.replace(stage, target)
        return
    old = target.parent / f'.{target.name}.replaced-{os.getpid()}'
    os.replace(target, old)
    try:
        os.replace(stage, target)
    except OSError:
        os.replace(old, target)
        raise
    shutil.rmtree(old)
