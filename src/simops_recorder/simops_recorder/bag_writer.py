"""A rosbag2 bag directory writer with splitting and periodic flushing (no rclpy).

Messages go through the rosbags storage plugins (``McapWriter``, ``Sqlite3Writer``), which
write exactly the records rosbag2's MCAP and sqlite3 plugins read. On top of them this
module adds what rosbags' ``Writer`` lacks:

- split files ``<bag>_<n>.mcap`` / ``<bag>_<n>.db3`` by duration or size, with one
  ``metadata.yaml`` listing all of them (``files`` entries per split);
- :meth:`BagWriter.flush`: closes the pending MCAP chunk and flushes it to the OS, or
  commits the sqlite3 transaction, so a killed process leaves everything up to the last
  flush on disk (``simops_recorder repair`` restores footer, index and metadata);
- metadata version 8 (read by Humble, Jazzy and Kilted; version 9 QoS strings are not);
- an MCAP message's ``publish_time`` is its DDS send time (the publisher's source
  timestamp) when it is given, as rosbag2 Jazzy writes it (rosbag2 0.26.5,
  rosbag2_transport/src/rosbag2_transport/recorder.cpp:611-614 and
  rosbag2_storage_mcap/src/mcap_storage.cpp:875-876; Humble's 0.15 wrote the receive time
  in both, mcap_storage.cpp:701-702). sqlite3 has no place for it.

The file being written is ``<bag>/<bag>.mcap`` (the storage plugin's own name); it is
renamed to its split name once closed. Used as a context manager, in the manner of rosbags'
``Writer``, the bag is finished when the block ends and aborted when it raises; the recorder,
whose episodes outlive any one block, calls :meth:`BagWriter.close` itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
    Qos,
)
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.metadata import dump_qos_v8
from rosbags.rosbag2.storage_mcap import (
    McapWriter,
    write_record,
    write_uint16,
    write_uint32,
    write_uint64,
)
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

METADATA_VERSION = 8
SUFFIX = {'mcap': '.mcap', 'sqlite3': '.db3'}
STORAGES = tuple(SUFFIX)
COMPRESSIONS = ('none', 'zstd')


class SentTimeMcapWriter(McapWriter):
    """rosbags' MCAP storage writer that also stores each message's send time.

    rosbags (0.11.9) writes the receive time as both MCAP times; this writes the Message
    record the same way (mcap spec: channel id, sequence, log time, publish time, data) with
    the send time as ``publish_time``.
    """

    def write(self, connection: Connection, timestamp: int, data: bytes | memoryview,
              sent: int | None = None) -> None:
        """Write a message received at ``timestamp``, sent at ``sent`` (ns; None: received)."""
        self.message_start_time = min(timestamp, self.message_start_time)
        self.message_end_time = max(timestamp, self.message_end_time)
        self.channel_stats[connection.id] += 1
        self.chunk.message_start_time = min(timestamp, self.chunk.message_start_time)
        self.chunk.message_end_time = max(timestamp, self.chunk.message_end_time)
        self.chunk.msgs[connection.id].append((timestamp, self.chunk.bio.tell()))
        rec = BytesIO()
        write_uint16(rec, connection.id)
        write_uint32(rec, 0)
        write_uint64(rec, timestamp)
        write_uint64(rec, timestamp if sent is None else sent)
        rec.write(data)
        write_record(self.chunk.bio, 0x05, rec)
        if self.chunk.bio.tell() > 2**20:
            self.close_chunk()


class BagWriteError(RuntimeError):
    """The bag cannot be created or written (exists, unwritable, disk full, bad option)."""


@dataclass(frozen=True)
class StoredTopic:
    """A topic as stored in a bag: name, type, ros2msg definition, RIHS01 hash, offered QoS."""

    name: str
    type: str
    msgdef: str
    type_hash: str
    qos: tuple[Qos, ...] = ()


@dataclass
class _FileStats:
    """Messages, first and last receive time (ns) of one split file."""

    path: str
    count: int = 0
    start: int = 2**63 - 1
    end: int = 0


@dataclass
class SplitPolicy:
    """Start a new file after ``duration_ns`` of messages or ``size_bytes`` of data (0: never)."""

    duration_ns: int = 0
    size_bytes: int = 0


@dataclass
class BagWriter:
    """Write one rosbag2 bag directory; see the module docstring.

    ``storage`` is ``mcap`` or ``sqlite3``; ``compression`` ``none`` or ``zstd`` (MCAP chunk
    compression; rosbag2 reads it without a compression entry in metadata.yaml).
    """

    path: Path
    storage: str = 'mcap'
    compression: str = 'none'
    split: SplitPolicy = field(default_factory=SplitPolicy)
    custom_data: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise BagWriteError(f'storage must be one of {STORAGES}, got {self.storage!r}')
        if self.compression not in COMPRESSIONS:
            raise BagWriteError(f'compression must be one of {COMPRESSIONS}, '
                                f'got {self.compression!r}')
        if self.compression == 'zstd' and self.storage != 'mcap':
            raise BagWriteError('zstd compression needs storage mcap (rosbag2 sqlite3 has no '
                                'storage-level compression)')
        self.path = Path(self.path)
        self._topics: list[StoredTopic] = []
        self._connections: list[Connection] = []
        self._counts: list[int] = []
        self._files: list[_FileStats] = []
        self._storage: McapWriter | Sqlite3Writer | None = None
        self._bytes = 0
        try:
            self.path.mkdir(parents=True)
        except OSError as exc:
            raise BagWriteError(f'cannot create bag directory {self.path}: '
                                f'{exc.strerror or exc}') from None
        self._open_file()

    @property
    def message_count(self) -> int:
        """Messages written so far, over all topics and files."""
        return sum(self._counts)

    @property
    def topic_counts(self) -> dict[str, int]:
        """Messages written so far per topic."""
        return {t.name: c for t, c in zip(self._topics, self._counts, strict=True)}

    def add_topic(self, topic: StoredTopic) -> int:
        """Register a topic (also in later split files); return its id for :meth:`write`."""
        if any(t.name == topic.name for t in self._topics):
            raise BagWriteError(f'topic {topic.name} is already in {self.path}')
        connection = Connection(
            id=len(self._connections) + 1, topic=topic.name, msgtype=topic.type,
            msgdef=MessageDefinition(MessageDefinitionFormat.MSG, topic.msgdef),
            digest=topic.type_hash, msgcount=0,
            ext=ConnectionExtRosbag2('cdr', list(topic.qos)), owner=self)
        self._topics.append(topic)
        self._connections.append(connection)
        self._counts.append(0)
        self._guard(self._register, connection)
        return connection.id

    def write(self, topic_id: int, timestamp: int, data: bytes | memoryview,
              sent: int | None = None) -> None:
        """Write one CDR message received at ``timestamp``, sent at ``sent`` (ns since the epoch).

        The send time is kept in MCAP only (see above).
        """
        stats = self._files[-1]
        if stats.count and self._should_split(stats, timestamp):
            self.start_new_file()
            stats = self._files[-1]
        assert self._storage is not None
        connection = self._connections[topic_id - 1]
        if isinstance(self._storage, SentTimeMcapWriter):
            self._guard(self._storage.write, connection, timestamp, data, sent)
        else:
            self._guard(self._storage.write, connection, timestamp, data)
        self._counts[topic_id - 1] += 1
        self._bytes += len(data)
        stats.count += 1
        stats.start = min(stats.start, timestamp)
        stats.end = max(stats.end, timestamp)

    def flush(self) -> None:
        """Make everything written so far durable against a process crash."""
        storage = self._storage
        if isinstance(storage, McapWriter):
            if storage.chunk.bio.tell():
                self._guard(storage.close_chunk)
            self._guard(storage.bio.flush)
        elif isinstance(storage, Sqlite3Writer):
            self._guard(storage.conn.commit)

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Finish the bag (:meth:`close`), or :meth:`abort` it when the block raised."""
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def close(self) -> None:
        """Finish the current file and write metadata.yaml."""
        if self._storage is None:
            return
        self._close_file()
        self.write_metadata()

    def abort(self) -> None:
        """Release the open file without finishing it (after a write error)."""
        storage, self._storage = self._storage, None
        if storage is not None:
            try:
                storage.abort()
            except Exception:
                return

    def metadata(self) -> dict[str, Any]:
        """The ``rosbag2_bagfile_information`` mapping (metadata version 8)."""
        files = [f for f in self._files if f.count or len(self._files) == 1]
        start = min((f.start for f in files), default=2**63 - 1)
        end = max((f.end for f in files), default=0)
        return {
            'version': METADATA_VERSION,
            'storage_identifier': self.storage,
            'duration': {'nanoseconds': max(0, end - start)},
            'starting_time': {'nanoseconds_since_epoch': start},
            'message_count': self.message_count,
            'topics_with_message_count': [
                {'topic_metadata': {'name': t.name, 'type': t.type,
                                    'serialization_format': 'cdr',
                                    'offered_qos_profiles': dump_qos_v8(list(t.qos)),
                                    'type_description_hash': t.type_hash},
                 'message_count': count}
                for t, count in zip(self._topics, self._counts, strict=True)],
            'compression_format': '',
            'compression_mode': '',
            'relative_file_paths': [f.path for f in self._files],
            'files': [{'path': f.path,
                       'starting_time': {'nanoseconds_since_epoch': min(f.start, 2**63 - 1)},
                       'duration': {'nanoseconds': max(0, f.end - f.start)},
                       'message_count': f.count} for f in self._files],
            'custom_data': dict(self.custom_data),
            'ros_distro': os.environ.get('ROS_DISTRO', 'simops'),
        }

    def write_metadata(self) -> None:
        """Write metadata.yaml atomically (temporary file, then rename)."""
        text = dump_yaml({'rosbag2_bagfile_information': self.metadata()})
        target = self.path / 'metadata.yaml'
        tmp = target.with_suffix('.yaml.tmp')
        try:
            tmp.write_text(text)
            os.replace(tmp, target)
        except OSError as exc:
            raise BagWriteError(f'cannot write {target}: {exc.strerror or exc}') from None

    def start_new_file(self) -> None:
        """Finish the current split file and continue in a new one (all topics carried over)."""
        self._close_file()
        self._open_file()
        for connection in self._connections:
            self._guard(self._register, connection)

    # -- internals ------------------------------------------------------------------------

    def _should_split(self, stats: _FileStats, timestamp: int) -> bool:
        return bool((self.split.duration_ns and timestamp - stats.start >= self.split.duration_ns)
                    or (self.split.size_bytes and self._bytes >= self.split.size_bytes))

    def _register(self, connection: Connection) -> None:
        assert self._storage is not None
        if all(c.msgtype != connection.msgtype for c in self._connections[:connection.id - 1]):
            self._storage.add_msgtype(connection)
        self._storage.add_connection(connection, dump_qos_v8(
            list(connection.ext.offered_qos_profiles)))  # type: ignore[union-attr]

    def _open_file(self) -> None:
        index = len(self._files)
        name = f'{self.path.name}_{index}{SUFFIX[self.storage]}'
        mode = CompressionMode.STORAGE if self.compression == 'zstd' else CompressionMode.NONE
        plugin = SentTimeMcapWriter if self.storage == 'mcap' else Sqlite3Writer
        self._storage = self._guard(plugin, self.path, mode)
        self._files.append(_FileStats(name))
        self._bytes = 0

    def _close_file(self) -> None:
        storage = self._storage
        assert storage is not None
        text = dump_yaml(self.metadata())
        self._guard(storage.close, METADATA_VERSION, text.strip())
        self._storage = None
        self._guard(os.replace, storage.path, self.path / self._files[-1].path)

    def _guard(self, func: Any, *args: Any) -> Any:
        """Call ``func``; turn OS and sqlite errors into one-line BagWriteErrors."""
        try:
            return func(*args)
        except BagWriteError:
            raise
        except Exception as exc:
            reason = getattr(exc, 'strerror', None) or str(exc)
            raise BagWriteError(f'writing {self.path} failed: {reason}') from exc


def dump_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML in rosbag2's field order."""
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=False)
