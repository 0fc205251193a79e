"""Stream a rosbag2 directory's messages in receive order, in bounded memory (no rclpy).

:func:`simops_core.bag_reader.read_bag` loads whole topics; an hour of 1 kHz joint states
does not fit that way. :func:`stream_messages` yields one :class:`StoredMessage` at a
time from the storage files themselves (MCAP through its chunk index, sqlite3 through a
cursor), split bags file by file, so memory does not grow with the bag's length. Use
:func:`~simops_core.bag_reader.read_bag` with ``topics=()`` first to list the topics: it
counts every message and checks the counts against ``metadata.yaml``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NamedTuple

from mcap.reader import make_reader

from simops_core.bag_reader import (
    MCAP_ERRORS,
    STORAGE_SUFFIXES,
    BagError,
    bounded_order,
    mcap_error,
    read_metadata,
    storage_files,
)


class StoredMessage(NamedTuple):
    """One stored message.

    ``log_time`` is the recorder's receive time, ``publish_time`` the publisher's send time
    where the storage keeps one (MCAP's publish time: the DDS source timestamp as rosbag2
    Jazzy writes it; sqlite3 has none and repeats the receive time), ns since the epoch.
    """

    topic: str
    log_time: int
    publish_time: int
    data: bytes


def stream_messages(bag: str | Path, topics: Collection[str]) -> Iterator[StoredMessage]:
    """Every message of ``topics`` in ``bag``, file by file, each in receive-time order.

    (A file without a chunk index, from a crashed recording, is read in file order, which
    the recorder wrote in receive order.)

    Raises :class:`~simops_core.bag_reader.BagError` for a missing or unreadable storage
    file (the message names the file and how to repair it).
    """
    path = Path(bag)
    metadata = read_metadata(path)
    wanted = set(topics)
    for file in storage_files(path, metadata):
        kind = STORAGE_SUFFIXES.get(file.suffix)
        if kind == 'mcap':
            yield from _mcap_messages(file, wanted)
        elif kind == 'sqlite3':
            yield from _sqlite3_messages(file, wanted)
        else:
            raise BagError(f'{file}: unknown storage file type {file.suffix!r}; expected .mcap '
                           'or .db3')


def _mcap_messages(file: Path, wanted: set[str]) -> Iterator[StoredMessage]:
    try:
        with file.open('rb') as stream:
            reader = make_reader(stream)
            for _, channel, message in reader.iter_messages(
                    topics=list(wanted), log_time_order=bounded_order(reader)):
                yield StoredMessage(channel.topic, message.log_time, message.publish_time,
                                    message.data)
    except MCAP_ERRORS as exc:
        raise mcap_error(file, exc) from None


def _sqlite3_messages(file: Path, wanted: set[str]) -> Iterator[StoredMessage]:
    try:
        conn = sqlite3.connect(f'file:{file}?mode=ro', uri=True)
    except sqlite3.Error as exc:
        raise BagError(f'{file}: cannot open sqlite3 storage: {exc}') from None
    try:
        names = {topic_id: name for topic_id, name in
                 conn.execute('SELECT id, name FROM topics') if name in wanted}
        if not names:
            return
        marks = ','.join('?' * len(names))
        rows = conn.execute(f'SELECT topic_id, timestamp, data FROM messages WHERE topic_id '
                            f'IN ({marks}) ORDER BY timestamp, id', tuple(names))
        for topic_id, timestamp, data in rows:
            yield StoredMessage(names[topic_id], int(timestamp), int(timestamp), bytes(data))
    except sqlite3.Error as exc:
        raise BagError(f'{file}: cannot read sqlite3 storage: {exc}') from None
    finally:
        conn.close()
