"""One bag per episode: open, write, flush, finish, and fail without losing data (no rclpy).

The recorder node hands every drained message (CDR bytes, receive time, publisher and
sequence number) to :class:`EpisodeBags`; this module decides what is written where. A
write error (disk full, directory gone) aborts the episode, keeps what was written and
tells the operator to run ``repair``; the node keeps running.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, get_typestore

from simops_core.command_line import ConfigError
from simops_core.paths import resolve_resource
from simops_core.tasks import TASKS
from simops_core.topics import load_topics
from simops_recorder.bag_writer import BagWriteError, BagWriter, SplitPolicy, StoredTopic
from simops_recorder.episode import (
    JOURNAL_FILE,
    Episode,
    EpisodeInfo,
    RecorderIdentity,
    episode_dir_name,
    sha256_file,
    utc_now,
)
from simops_recorder.outcome import OutcomeJudge

Log = Callable[[str, str], None]
"""Hook for a log line: (level ``info``, ``warning`` or ``error``, text)."""


@dataclass
class RecordedTopic:
    """A subscribed topic: what is stored for it and its id in the open bag (0: none).

    For latched (transient_local) topics ``last`` keeps the newest message (receive time in
    ns, CDR, send time in ns), so an episode starts with the current goal and policy state, as a
    ``ros2 bag record`` started at that moment would. ``subscription`` is the node's.
    """

    spec: StoredTopic
    latched: bool = False
    bag_id: int = 0
    last: tuple[int, bytes, int | None] | None = None
    subscription: Any = None


# The folder of discarded episodes under the root: hidden, so `episodes/*` leaves them out.
DISCARDED = '.discarded'


class EpisodeBags:
    """The open episode and its bag; ``identity`` and ``pending_info`` feed the next one."""

    def __init__(self, root: Path, storage: str, compression: str, split: SplitPolicy,
                 identity: RecorderIdentity, log: Log, judge: OutcomeJudge | None = None
                 ) -> None:
        self.root = root
        self.storage = storage
        self.compression = compression
        self.split = split
        self.identity = identity
        self.pending_info = EpisodeInfo()
        self.writer: BagWriter | None = None
        self.episode: Episode | None = None
        self.judge = judge   # labels episodes nobody labelled (simulation)
        self._log = log

    def start(self, topics: Iterable[RecordedTopic]) -> tuple[bool, str]:
        """Open a new bag with ``topics``; return (ok, bag path or reason)."""
        if self.writer is not None:
            return False, f'already recording {self.writer.path}'
        start = utc_now()
        info = EpisodeInfo(self.pending_info.label, None, '')
        path = self.root / episode_dir_name(start, info.label)
        try:
            writer = BagWriter(path, self.storage, self.compression, self.split)
        except BagWriteError as exc:
            self._log('error', f'cannot start an episode: {exc}; make {self.root} writable or '
                               'set the root parameter')
            return False, str(exc)
        self.writer, self.episode = writer, Episode(self.identity, info, start)
        if self.judge is not None:
            self.judge.start()
        try:
            for topic in topics:
                self.add(topic)
            self._write_journal()
        except BagWriteError as exc:
            self.fail(exc)
            return False, str(exc)
        self._log('info', f'episode started: {path}')
        return True, str(path)

    def stop(self, reason: str) -> tuple[bool, str]:
        """Finish the open bag (metadata.yaml with the episode metadata)."""
        writer, episode = self.writer, self.episode
        if writer is None or episode is None:
            return False, 'not recording'
        self.writer = self.episode = None
        episode.stop, episode.end_reason = utc_now(), reason
        verdict = self.judge.verdict() if self.judge is not None else None
        if verdict is not None and episode.info.success is None:
            episode.info.success = verdict[0]
            episode.info.notes = ' '.join(filter(None, (episode.info.notes, verdict[1])))
        writer.custom_data.update(episode.custom_data(writer.topic_counts))
        try:
            writer.close()
            (writer.path / JOURNAL_FILE).unlink(missing_ok=True)
        except (BagWriteError, OSError) as exc:
            writer.abort()
            self._log('error', f'episode {writer.path} could not be finished: {exc}; run '
                               f'`ros2 run simops_recorder repair {writer.path}`')
            return False, str(exc)
        self._log('info', f'episode stopped ({reason}): {writer.path}, {writer.message_count} '
                          f'messages, {episode.gaps.total()} lost on the wire')
        return True, str(writer.path)

    def discard(self) -> tuple[bool, str]:
        """Finish the open bag, then move it into ``<root>/.discarded/`` (kept, not deleted).

        An operator's re-record (lerobot-record's left arrow): the episode leaves the
        dataset's folder, and nothing recorded is lost.
        """
        ok, where = self.stop('discarded')
        if not ok:
            return False, where
        source = Path(where)
        target = self.root / DISCARDED / source.name
        try:
            target.parent.mkdir(exist_ok=True)
            source.rename(target)
        except OSError as exc:
            return False, f'{source} finished but not moved to {target.parent}: {exc}'
        self._log('info', f'episode discarded: {target}')
        return True, str(target)

    def fail(self, exc: Exception) -> None:
        """A write failed: close what can be closed, keep going."""
        writer, episode = self.writer, self.episode
        self.writer = self.episode = None
        if writer is None or episode is None:
            return
        episode.stop, episode.end_reason = utc_now(), f'error: {exc}'
        writer.abort()
        self._log('error', f'episode {writer.path} stopped: {exc}; free disk space or fix '
                           'permissions, then run `ros2 run simops_recorder repair '
                           f'{writer.path}` to keep what was written')

    def add(self, topic: RecordedTopic) -> None:
        """Add ``topic`` to the open bag, with its latched message; raise BagWriteError."""
        assert self.writer is not None
        topic.bag_id = self.writer.add_topic(topic.spec)
        if topic.last is not None:
            self.writer.write(topic.bag_id, *topic.last)

    def add_late(self, topic: RecordedTopic) -> None:
        """Add a topic discovered during an episode (a failure ends the episode)."""
        if self.writer is not None:
            try:
                self.add(topic)
            except BagWriteError as exc:
                self.fail(exc)

    def write(self, topic: RecordedTopic, received_ns: int, data: bytes, publisher: str,
              sequence: int | None, sent_ns: int | None = None) -> None:
        """Record one message (receive time ns, CDR, publication sequence number, send time ns).

        The send time is the publisher's DDS source timestamp.
        """
        if self.judge is not None:
            self.judge.observe(topic.spec.name, data)
        if topic.latched:
            topic.last = (received_ns, data, sent_ns)
        if self.writer is None or self.episode is None or not topic.bag_id:
            return
        self.episode.gaps.observe(topic.spec.name, publisher, sequence)
        try:
            self.writer.write(topic.bag_id, received_ns, data, sent_ns)
        except BagWriteError as exc:
            self.fail(exc)

    def flush(self) -> None:
        """Flush the storage and the journal (a crash then loses at most a flush period)."""
        if self.writer is None:
            return
        try:
            self.writer.flush()
            self._write_journal()
        except BagWriteError as exc:
            self.fail(exc)

    def _write_journal(self) -> None:
        """Episode metadata beside the storage, for ``repair`` after a crash."""
        assert self.writer is not None and self.episode is not None
        data = self.episode.custom_data(self.writer.topic_counts)
        try:
            (self.writer.path / JOURNAL_FILE).write_text(json.dumps(data, indent=1))
        except OSError as exc:
            raise BagWriteError(f'cannot write {self.writer.path / JOURNAL_FILE}: '
                                f'{exc.strerror or exc}') from None


def episode_bags(settings: Any, log: Log, topic_name: Callable[[str], str] = str
                 ) -> EpisodeBags:
    """The recorder's :class:`EpisodeBags` from its settings (``config/parameters/recorder``).

    ``topic_name`` resolves a configured topic name as the node sees it (its remappings).
    Checks what the schema's ranges and choices cannot say; raises
    :class:`~simops_core.command_line.ConfigError` with the fix.
    """
    s = settings
    if s.compression != 'none' and s.storage != 'mcap':
        raise ConfigError('parameter compression is zstd; zstd needs storage mcap (rosbag2 '
                          'sqlite3 has no storage-level compression)')
    if not s.topics or not all(str(t).startswith('/') for t in s.topics):
        raise ConfigError(f'parameter topics is {s.topics!r}; list absolute topic names such '
                          'as /joint_states')
    identity = RecorderIdentity(s.robot, s.robot_mode, s.policy_sha256,
                                _sim_params_hash(s.sim_params_file), s.allow_unvalidated,
                                s.source, s.task)
    judge = None
    if s.success_criterion != 'none':
        topics = load_topics()
        judge = OutcomeJudge(s.success_criterion, s.success_radius,
                             topic_name(topics['goal_pose'].name),
                             topic_name(topics[TASKS[s.success_criterion].tracked].name),
                             get_typestore(Stores.ROS2_JAZZY))
    return EpisodeBags(_writable_root(s.root), s.storage, s.compression,
                       SplitPolicy(int(s.split_duration * 1e9), s.split_size), identity, log,
                       judge)


def _writable_root(root: str) -> Path:
    path = Path(root).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f'root {str(path)!r} cannot be created ({exc.strerror}); set '
                          '-p root:=<writable directory>') from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f'root {str(path)!r} is not writable; set -p root:=<writable '
                          'directory> or fix its permissions')
    return path


def _sim_params_hash(path: str) -> str:
    if not path:
        return ''
    try:
        return sha256_file(resolve_resource(path))
    except OSError as exc:
        raise ConfigError(f'sim_params_file {path!r} is unreadable ({exc}); pass an existing '
                          'SimParams YAML or an empty string') from None
