"""``ros2 run simops_recorder repair DIR``: rebuild a bag that a crash left unfinished.

A killed recorder leaves its last storage file without footer, summary and index (MCAP) or
with an uncommitted transaction (sqlite3), and no metadata.yaml. Everything up to the last
flush is on disk: MCAP chunks are read back with the ``mcap`` stream reader (which needs
no footer), sqlite3 rows with sqlite. Every message is rewritten, file by file, into a fresh
bag of the same storage with footer, index and metadata.yaml; the episode metadata comes
from the recorder's journal. The original directory is kept as ``.<name>.damaged``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

from mcap.exceptions import McapError
from mcap.records import Channel, Message, Schema
from mcap.stream_reader import StreamReader
from rosbags.rosbag2.metadata import parse_qos
from rosbags.typesys import Stores, get_typestore

from simops_core.bag_reader import BagError, read_bag
from simops_core.command_line import (
    EXIT_DATA,
    EXIT_OK,
    EXIT_OUTPUT,
    EXIT_USAGE,
    CommandLineParser,
    exit_codes,
    fail,
)
from simops_recorder.bag_writer import SUFFIX, BagWriteError, BagWriter, StoredTopic
from simops_recorder.episode import JOURNAL_FILE, KEY_PREFIX

TOOL = 'repair'
EXIT_CODES = {
    EXIT_OK: 'repaired (the original kept as .<name>.damaged), or already complete',
    EXIT_USAGE: 'bad command line, not a directory, or a leftover .<name>.repair to remove',
    EXIT_DATA: 'not a bag: no .mcap or .db3 file, mixed formats, or nothing readable in it '
               '(left untouched)',
    EXIT_OUTPUT: 'the repaired bag could not be written (the original is left untouched)',
}


class RepairError(RuntimeError):
    """The directory cannot be repaired as asked; the message says why."""


class NotABagError(RepairError):
    """The directory's storage files hold no readable rosbag2 content."""


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair` did: the rebuilt bag, message counts and the kept original."""

    bag: Path
    messages: int
    topics: dict[str, int]
    files: int
    original: Path | None


@dataclass(frozen=True)
class _Salvage:
    """Topics and messages (topic, receive ns, CDR, send ns or None) recovered from a file."""

    topics: list[StoredTopic]
    messages: list[tuple[str, int, bytes, int | None]]


def repair(bag: Path) -> RepairReport:
    """Rebuild ``bag`` in place; return a report. A bag that reads fine is left untouched."""
    bag = Path(bag)
    if not bag.is_dir():
        raise RepairError(f'{bag} is not a directory; pass a bag directory')
    if (bag / 'metadata.yaml').is_file() and not (bag / JOURNAL_FILE).exists():
        try:
            raw = read_bag(bag)
        except BagError:
            pass
        else:
            counts = {name: info.count for name, info in raw.info().items()}
            return RepairReport(bag, sum(counts.values()), counts,
                                len(raw.metadata.get('relative_file_paths', [])), None)
    files = _storage_files(bag)
    storage = 'mcap' if files[0].suffix == SUFFIX['mcap'] else 'sqlite3'
    salvaged = [_salvage_mcap(f) if storage == 'mcap' else _salvage_sqlite3(f) for f in files]
    if not any(part.topics for part in salvaged):
        names = ', '.join(f.name for f in files)
        raise NotABagError(f'{bag}: {names} holds no rosbag2 topic or message; it is not a '
                           f'{storage} bag, or nothing of it reached the disk')

    staging = bag.parent / f'.{bag.name}.repair'
    if staging.exists():
        raise RepairError(f'{staging} exists from an earlier attempt; remove it and retry')
    try:
        with BagWriter(staging / bag.name, storage) as writer:
            ids: dict[str, int] = {}
            for index, part in enumerate(salvaged):
                if index:
                    writer.start_new_file()
                for topic in part.topics:
                    if topic.name not in ids:
                        ids[topic.name] = writer.add_topic(topic)
                for name, timestamp, data, sent in part.messages:
                    writer.write(ids[name], timestamp, data, sent)
            writer.custom_data.update(_episode_metadata(bag, writer.topic_counts))
    except (BagWriteError, OSError):
        shutil.rmtree(staging, ignore_errors=True)
        raise

    original = bag.parent / f'.{bag.name}.damaged'
    os.replace(bag, original)
    os.replace(staging / bag.name, bag)
    staging.rmdir()
    return RepairReport(bag, writer.message_count, writer.topic_counts, len(salvaged), original)


def _storage_files(bag: Path) -> list[Path]:
    """Split files ``<bag>_<n>`` in order, then the file that was open (``<bag>.<ext>``)."""
    found = [p for p in bag.iterdir() if p.suffix in SUFFIX.values() and p.is_file()]
    if not found:
        raise NotABagError(f'{bag} holds no .mcap or .db3 file (found '
                          f'{sorted(p.name for p in bag.iterdir())}); nothing to repair')
    suffixes = {p.suffix for p in found}
    if len(suffixes) > 1:
        raise NotABagError(f'{bag} mixes storage formats {sorted(suffixes)}')
    pattern = re.compile(rf'^{re.escape(bag.name)}_(\d+)$')

    def order(path: Path) -> tuple[int, str]:
        match = pattern.match(path.stem)
        return (int(match.group(1)) if match else sys.maxsize, path.name)

    return sorted(found, key=order)


def _salvage_mcap(file: Path) -> _Salvage:
    schemas: dict[int, Schema] = {}
    channels: dict[int, Channel] = {}
    topics: list[StoredTopic] = []
    messages: list[tuple[str, int, bytes, int | None]] = []
    typestore = get_typestore(Stores.ROS2_JAZZY)
    with file.open('rb') as stream:
        records = StreamReader(stream).records
        while True:
            try:
                record = next(records)
            except StopIteration:
                break
            except (McapError, EOFError, ValueError, IndexError, KeyError, struct.error):
                break  # the tail that was never flushed
            if isinstance(record, Schema):
                schemas[record.id] = record
            elif isinstance(record, Channel):
                schema = schemas.get(record.schema_id)
                if schema is None:
                    break  # a channel without its schema: the rest is not trustworthy
                channels[record.id] = record
                type_hash = record.metadata.get('topic_type_hash', '')
                if not type_hash and schema.name in typestore.fielddefs:
                    type_hash = typestore.hash_rihs01(schema.name)
                qos = parse_qos(record.metadata.get('offered_qos_profiles', ''))
                topics.append(StoredTopic(record.topic, schema.name, schema.data.decode(),
                                          type_hash, tuple(qos)))
            elif isinstance(record, Message) and record.channel_id in channels:
                messages.append((channels[record.channel_id].topic, record.log_time,
                                 bytes(record.data), record.publish_time))
    return _Salvage(topics, messages)


def _salvage_sqlite3(file: Path) -> _Salvage:
    try:
        conn = sqlite3.connect(file)  # read-write: a hot journal is rolled back on open
        definitions = dict(conn.execute(
            'SELECT topic_type, encoded_message_definition FROM message_definitions'))
        rows = conn.execute('SELECT id, name, type, offered_qos_profiles, '
                            'type_description_hash FROM topics ORDER BY id').fetchall()
        names = {row[0]: row[1] for row in rows}
        topics = [StoredTopic(name, msgtype, definitions.get(msgtype, ''), type_hash,
                              tuple(parse_qos(qos)))
                  for _, name, msgtype, qos, type_hash in rows]
        messages = [(names[topic_id], int(timestamp), bytes(data), None)
                    for topic_id, timestamp, data in conn.execute(
                        'SELECT topic_id, timestamp, data FROM messages ORDER BY id')]
        conn.close()
    except sqlite3.Error as exc:
        raise NotABagError(f'{file}: sqlite3 storage is unreadable: {exc}') from None
    return _Salvage(topics, messages)


def _episode_metadata(bag: Path, counts: dict[str, int]) -> dict[str, str]:
    """The journal's episode metadata, marked as repaired, with the salvaged counts."""
    journal = bag / JOURNAL_FILE
    data: dict[str, str] = {}
    if journal.is_file():
        try:
            loaded = json.loads(journal.read_text())
        except (OSError, json.JSONDecodeError):
            loaded = {}
        data = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
    data[KEY_PREFIX + 'message_counts'] = json.dumps(counts, sort_keys=True)
    data[KEY_PREFIX + 'end_reason'] = data.get(KEY_PREFIX + 'end_reason') or 'crashed'
    data[KEY_PREFIX + 'repaired'] = 'true'
    return data


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ros2 run simops_recorder repair DIR``; returns an exit code."""
    parser = CommandLineParser(TOOL, __doc__.splitlines()[0], exit_codes(EXIT_CODES))
    parser.add_argument('bag', type=Path, help='bag directory left by a crashed recorder')
    args = parser.parse_args(argv)
    try:
        report = repair(args.bag)
    except NotABagError as exc:
        return fail(TOOL, EXIT_DATA, str(exc))
    except RepairError as exc:
        return fail(TOOL, EXIT_USAGE, str(exc))
    except (BagWriteError, OSError) as exc:
        return fail(TOOL, EXIT_OUTPUT, f'{exc}; the original is left untouched')
    if report.original is None:
        print(f'{report.bag} is complete ({report.messages} messages); nothing to repair')
        return EXIT_OK
    print(f'repaired {report.bag}: {report.messages} messages in {report.files} file(s); '
          f'original kept in {report.original}')
    for name, count in sorted(report.topics.items()):
        print(f'  {name}: {count}')
    return EXIT_OK


def cli() -> None:
    """Console-script entry point."""
    sys.exit(main())
