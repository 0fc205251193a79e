"""Read any rosbag2 directory (MCAP or sqlite3, split or not) without trusting its QoS.

The rosbags ``AnyReader`` matches the storage's connections against ``metadata.yaml`` by
topic, type *and* serialized QoS; real rosbag2 bags whose two QoS strings differ then yield
zero messages. This reader takes topics and messages from the storage files themselves
(MCAP channels, sqlite3 ``topics`` table), uses ``metadata.yaml`` only to list the files,
and checks its per-topic counts against the metadata afterwards, so it never silently
returns nothing for a non-empty bag.

No rclpy here: messages are decoded with the rosbags typestore (CDR).
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from mcap.exceptions import McapError
from mcap.reader import McapReader, NonSeekingReader, make_reader
from mcap.records import Schema
from rosbags.serde import SerdeError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

METADATA_FILE = 'metadata.yaml'
STORAGE_SUFFIXES = {'.mcap': 'mcap', '.db3': 'sqlite3'}


class BagError(ValueError):
    """A bag directory is missing, unreadable, inconsistent or lacks what was asked for."""


# What the mcap library raises reading a torn, truncated or foreign file.
MCAP_ERRORS = (McapError, OSError, EOFError, ValueError, IndexError, KeyError, struct.error)


def mcap_error(file: Path, exc: Exception) -> BagError:
    """The one line for an MCAP ``file`` that ``exc`` (of :data:`MCAP_ERRORS`) stopped."""
    return BagError(f'{file}: cannot read MCAP ({type(exc).__name__}: {exc}); if the recorder '
                    'crashed, run `ros2 run simops_recorder repair` on the bag directory')


class MissingTopicsError(BagError):
    """The bag lacks topics the caller needs; the message names them and what it has."""

    def __init__(self, bag: Path, missing: Iterable[str], found: dict[str, TopicInfo]) -> None:
        self.missing = tuple(missing)
        self.found = dict(found)
        have = ', '.join(f'{t.name} ({t.type}, {t.count})' for t in found.values()) or 'none'
        super().__init__(f'{bag}: no messages on {", ".join(self.missing)}; '
                         f'the bag has topics: {have}')


@dataclass(frozen=True)
class TopicInfo:
    """A topic stored in a bag: name, ROS 2 type (``pkg/msg/Name``) and message count."""

    name: str
    type: str
    count: int


@dataclass
class RawTopic:
    """One topic of a bag: its message count and, if loaded, every message in receive order.

    ``count`` is the number of messages in the storage; ``loaded`` tells whether ``log_time``
    (receive timestamps, ns since the epoch), ``publish_time`` (send timestamps, ns: MCAP's
    publish time, which rosbag2 Jazzy and the SimOps recorder fill with the publisher's DDS
    source timestamp; the receive time where the bag has none) and ``data`` (CDR payloads)
    were read.
    ``msgdef`` is the message definition stored in the bag (``''`` when absent).
    """

    name: str
    type: str
    msgdef: str = ''
    loaded: bool = True
    count: int = 0
    log_time: list[int] = field(default_factory=list)
    publish_time: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)


@dataclass
class RawBag:
    """The raw content of a rosbag2 directory, keyed by topic name.

    ``metadata`` is the parsed ``rosbag2_bagfile_information`` mapping, ``custom_data`` its
    ``custom_data`` (empty when absent).
    """

    path: Path
    storage: str
    metadata: dict[str, Any]
    topics: dict[str, RawTopic]

    @property
    def custom_data(self) -> dict[str, str]:
        """``custom_data`` from metadata.yaml (rosbag2 metadata version >= 6), or {}."""
        data = self.metadata.get('custom_data') or {}
        if not isinstance(data, dict):
            raise BagError(f'{self.path / METADATA_FILE}: custom_data must be a mapping, got '
                           f'{type(data).__name__}')
        return {str(k): str(v) for k, v in data.items()}

    def info(self) -> dict[str, TopicInfo]:
        """Per-topic type and message count, as read from the storage files."""
        return {name: TopicInfo(name, t.type, t.count) for name, t in self.topics.items()}

    def require(self, *names: str) -> None:
        """Raise :class:`MissingTopicsError` unless every topic in ``names`` has messages."""
        missing = [n for n in names if n not in self.topics or not self.topics[n].count]
        if missing:
            raise MissingTopicsError(self.path, missing, self.info())

    def decode(self, topic: str, typestore: Typestore | None = None) -> Iterator[Any]:
        """Deserialize every message of ``topic`` with the rosbags typestore."""
        raw = self.topics[topic]
        if not raw.loaded:
            raise BagError(f'{self.path}: topic {topic} was not loaded; pass it to read_bag')
        store = typestore or message_typestore(self)
        for index, payload in enumerate(raw.data):
            try:
                yield store.deserialize_cdr(payload, raw.type)
            except SerdeError as exc:
                raise BagError(f'{self.path}: {topic} message {index} is not a valid '
                               f'{raw.type}: {exc}; the storage is corrupt') from None


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> RawBag:
    """Read a rosbag2 directory written by ``ros2 bag record`` or by SimOps.

    ``topics`` limits which messages are loaded (default: every topic); every topic is
    still listed and counted. Raises :class:`BagError` when
    the directory or its metadata is missing or malformed, a storage file is missing or
    unreadable, the storage is compressed per file or per message, or the counts read
    differ from those in metadata.yaml.
    """
    bag = Path(path)
    metadata = read_metadata(bag)
    storage = str(metadata.get('storage_identifier', ''))
    if metadata.get('compression_mode') or metadata.get('compression_format'):
        raise BagError(f'{bag}: {metadata.get("compression_mode")} compression with '
                       f'{metadata.get("compression_format")} is not supported; decompress '
                       'it with `ros2 bag convert` first')
    wanted = None if topics is None else set(topics)
    result: dict[str, RawTopic] = {}
    for file in storage_files(bag, metadata):
        kind = STORAGE_SUFFIXES.get(file.suffix)
        if kind == 'mcap':
            _read_mcap(file, wanted, result)
        elif kind == 'sqlite3':
            _read_sqlite3(file, wanted, result)
        else:
            raise BagError(f'{file}: unknown storage file type {file.suffix!r} '
                           f'(storage_identifier {storage!r}); expected .mcap or .db3')
    raw = RawBag(bag, storage, metadata, result)
    _check_counts(raw, metadata)
    return raw


def read_metadata(bag: Path) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` mapping of ``bag/metadata.yaml``."""
    if not bag.is_dir():
        raise BagError(f'{bag} is not a directory; pass a rosbag2 bag directory')
    meta_file = bag / METADATA_FILE
    if not meta_file.is_file():
        files = sorted(p.name for p in bag.iterdir())
        raise BagError(f'{bag}: no {METADATA_FILE} (found {files}); if the recorder crashed, '
                       f'run `ros2 run simops_recorder repair {bag}`')
    try:
        doc = yaml.safe_load(meta_file.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BagError(f'{meta_file}: cannot parse: {exc}') from None
    info = doc.get('rosbag2_bagfile_information') if isinstance(doc, dict) else None
    if not isinstance(info, dict):
        raise BagError(f'{meta_file}: no rosbag2_bagfile_information mapping')
    return info


def storage_files(bag: Path, metadata: dict[str, Any]) -> list[Path]:
    """The bag's storage files in recording order, from ``relative_file_paths``."""
    names = metadata.get('relative_file_paths')
    if not isinstance(names, list) or not names:
        raise BagError(f'{bag / METADATA_FILE}: relative_file_paths is missing or empty')
    # Old rosbag2 versions prefixed each path with the bag's directory name.
    files = [bag / str(name) if (bag / str(name)).is_file() else bag / Path(str(name)).name
             for name in names]
    absent = [f.name for f in files if not f.is_file()]
    if absent:
        raise BagError(f'{bag}: storage files {absent} listed in {METADATA_FILE} are missing '
                       f'(found {sorted(p.name for p in bag.iterdir())})')
    return files


def bag_sha256(bag: Path) -> str:
    """SHA-256 over a bag's storage files, in recording order.

    metadata.yaml names the bag's folder, so it is left out: a recording hashes the same
    wherever it lies.
    """
    digest = hashlib.sha256()
    for file in storage_files(bag, read_metadata(bag)):
        with file.open('rb') as stream:
            for block in iter(lambda: stream.read(1 << 20), b''):
                digest.update(block)
    return digest.hexdigest()


def message_typestore(bag: RawBag | None = None) -> Typestore:
    """A Jazzy typestore, extended with the definitions stored in ``bag`` (ros2msg only)."""
    store = get_typestore(Stores.ROS2_JAZZY)
    if bag is None:
        return store
    extra: dict[str, Any] = {}
    for topic in bag.topics.values():
        if topic.type not in store.fielddefs and topic.msgdef and '\nIDL: ' not in topic.msgdef:
            extra.update(_types_from_definition(topic.msgdef, topic.type))
    if extra:
        store.register(extra)
    return store


def _types_from_definition(msgdef: str, msgtype: str) -> dict[str, Any]:
    """Parse a concatenated ros2msg definition (main type, then ``MSG: pkg/Name`` blocks)."""
    types: dict[str, Any] = {}
    name = msgtype
    for block in msgdef.split('=' * 80 + '\n'):
        if block.startswith('MSG: '):
            header, _, body = block.partition('\n')
            name = header[5:].strip()
            if '/msg/' not in name:
                name = name.replace('/', '/msg/', 1)
        else:
            body = block
        types.update(get_types_from_msg(body, name))
    return types


def _read_mcap(file: Path, wanted: set[str] | None, out: dict[str, RawTopic]) -> None:
    """Load ``file``'s messages into ``out``.

    Read in file order, then each topic's new messages put in receive-time order
    (:func:`_in_log_time_order`).
    """
    starts = {name: len(topic.log_time) for name, topic in out.items()}
    try:
        with file.open('rb') as stream:
            reader = make_reader(stream)
            if wanted is not None and not wanted and _count_from_summary(reader, out):
                return   # a listing: the summary's statistics count every channel
            summary = reader.get_summary()   # read before the messages: a torn file fails here
            stream.seek(0)
            for schema, channel, message in NonSeekingReader(stream).iter_messages(
                    log_time_order=False):
                topic = out.get(channel.topic)
                if topic is None:
                    topic = out[channel.topic] = _mcap_topic(channel.topic, schema, wanted)
                topic.count += 1
                if topic.loaded:
                    topic.log_time.append(message.log_time)
                    topic.publish_time.append(message.publish_time)
                    topic.data.append(message.data)
    except MCAP_ERRORS as exc:
        raise mcap_error(file, exc) from None
    for name, topic in out.items():
        _in_log_time_order(topic, starts.get(name, 0))
    if summary is not None:  # topics with no messages still belong to the bag
        for channel in summary.channels.values():
            if channel.topic not in out:
                schema = summary.schemas.get(channel.schema_id)
                out[channel.topic] = _mcap_topic(channel.topic, schema, wanted)


def _in_log_time_order(topic: RawTopic, start: int) -> None:
    """Sort ``topic``'s messages from index ``start`` on by receive time, stably.

    The MCAP reader's own time order (a heap over the chunks) costs more than decoding the
    messages; this gives the same order for each topic (ties keep their file order, as there),
    and costs nothing when the file holds them in order already, as rosbag2 writes them.
    """
    times = np.asarray(topic.log_time[start:], dtype=np.int64)
    if times.size < 2 or bool(np.all(times[1:] >= times[:-1])):
        return
    order = np.argsort(times, kind='stable')
    for values in (topic.log_time, topic.publish_time, topic.data):
        values[start:] = [values[start + int(i)] for i in order]


def _count_from_summary(reader: McapReader, out: dict[str, RawTopic]) -> bool:
    """List ``reader``'s channels with the message counts of its summary, if it has them.

    Returns whether it did (a file without statistics, e.g. a crashed recording, is read).
    """
    try:
        summary = reader.get_summary()
    except McapError:
        return False
    if summary is None or summary.statistics is None:
        return False
    counts = summary.statistics.channel_message_counts
    for channel_id, channel in summary.channels.items():
        topic = out.get(channel.topic)
        if topic is None:
            topic = out[channel.topic] = _mcap_topic(
                channel.topic, summary.schemas.get(channel.schema_id), set())
        topic.count += counts.get(channel_id, 0)
    return True


def bounded_order(reader: McapReader) -> bool:
    """The ``log_time_order`` under which ``reader`` holds one chunk at a time.

    Indexed files: time order (a heap of chunks; unordered, the mcap reader queues every
    chunk's messages before it yields the first). Files without a chunk index (a crashed
    recording): file order, which is read as a stream (time order would sort it all).
    """
    try:
        summary = reader.get_summary()
    except McapError:
        return False
    return bool(summary is not None and summary.chunk_indexes)


def _mcap_topic(name: str, schema: Schema | None, wanted: set[str] | None) -> RawTopic:
    loaded = wanted is None or name in wanted
    if schema is None:
        return RawTopic(name, '', '', loaded)
    return RawTopic(name, schema.name, schema.data.decode(), loaded)


def _read_sqlite3(file: Path, wanted: set[str] | None, out: dict[str, RawTopic]) -> None:
    try:
        conn = sqlite3.connect(f'file:{file}?mode=ro', uri=True)
    except sqlite3.Error as exc:
        raise BagError(f'{file}: cannot open sqlite3 storage: {exc}') from None
    try:
        tables = {row[0] for row in conn.execute('SELECT name FROM sqlite_master')}
        definitions: dict[str, str] = {}
        if 'message_definitions' in tables:
            definitions = dict(conn.execute(
                'SELECT topic_type, encoded_message_definition FROM message_definitions '
                "WHERE encoding = 'ros2msg'"))
        names = {}
        for topic_id, name, msgtype in conn.execute('SELECT id, name, type FROM topics'):
            names[topic_id] = name
            out.setdefault(name, RawTopic(name, msgtype, definitions.get(msgtype, ''),
                                          wanted is None or name in wanted))
        counts = conn.execute('SELECT topic_id, COUNT(*) FROM messages GROUP BY topic_id')
        for topic_id, count in counts:
            out[names[topic_id]].count += count
        rows = conn.execute('SELECT topic_id, timestamp, data FROM messages ORDER BY id')
        for topic_id, timestamp, data in rows:
            topic = out[names[topic_id]]
            if topic.loaded:
                topic.log_time.append(int(timestamp))
                topic.publish_time.append(int(timestamp))
                topic.data.append(bytes(data))
    except sqlite3.Error as exc:
        raise BagError(f'{file}: cannot read sqlite3 storage: {exc}') from None
    finally:
        conn.close()


def _check_counts(raw: RawBag, metadata: dict[str, Any]) -> None:
    """Raise BagError when the storage holds other counts than metadata.yaml lists."""
    expected: dict[str, int] = defaultdict(int)
    for name, count in _listed_counts(raw.path / METADATA_FILE, metadata):
        expected[name] += count
    found = {name: t.count for name, t in raw.topics.items()}
    wrong = {name: (count, found.get(name, 0)) for name, count in expected.items()
             if found.get(name, 0) != count}
    if wrong:
        detail = ', '.join(f'{name}: metadata {want}, storage {got}'
                           for name, (want, got) in sorted(wrong.items()))
        raise BagError(f'{raw.path}: message counts differ from {METADATA_FILE} ({detail}); '
                       'the bag is incomplete or its metadata is stale; run '
                       '`ros2 run simops_recorder repair` on it')


def _listed_counts(meta_file: Path, metadata: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """(topic, message_count) of each ``topics_with_message_count`` entry, validated."""
    entries = metadata.get('topics_with_message_count') or []
    if not isinstance(entries, list):
        raise BagError(f'{meta_file}: topics_with_message_count must be a list, got '
                       f'{type(entries).__name__}; run `ros2 run simops_recorder repair` on '
                       'the bag')
    for index, entry in enumerate(entries):
        where = f'{meta_file}: topics_with_message_count[{index}]'
        topic = entry.get('topic_metadata') if isinstance(entry, dict) else None
        name = topic.get('name') if isinstance(topic, dict) else None
        if not isinstance(name, str):
            raise BagError(f'{where} has no topic_metadata.name; run `ros2 run '
                           'simops_recorder repair` on the bag')
        count = entry.get('message_count', 0)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise BagError(f'{where}.message_count is {count!r}, not a whole number >= 0; '
                           'run `ros2 run simops_recorder repair` on the bag')
        yield name, count
