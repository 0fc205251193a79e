"""Bags as a recorder short of CPU would have written them: stalls, then bursts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from simops_core.bag_reader import read_bag
from simops_recorder.bag_writer import BagWriter, StoredTopic

STORE = get_typestore(Stores.ROS2_JAZZY)
STALLS = ((2.0, 0.040), (3.5, 0.025), (5.0, 0.060))   # (s after the first message, s long)


def starved(source: Path, out: Path, send_times: bool,
            stalls: Sequence[tuple[float, float]] = STALLS) -> Path:
    """``source`` as a recorder that stalled for ``stalls`` would have written it.

    Every message received during a stall is taken in a burst when it ends (10 us apart, in
    order, before what came after); with ``send_times`` each keeps its on-time receive time
    as its send time, as DDS stamps it at the publisher and rosbag2 Jazzy stores it (MCAP
    publish time). Without stalls, a copy that kept up. The custom data is kept.
    """
    raw = read_bag(source)
    first = min(t.log_time[0] for t in raw.topics.values() if t.count)
    rows = []
    for name, topic in raw.topics.items():
        rows += [(time, name, data) for time, data in zip(topic.log_time, topic.data,
                                                          strict=True)]
    rows.sort(key=lambda row: row[0])
    received = np.array([row[0] for row in rows], dtype=np.int64)
    for start, length in stalls:
        begin, end = first + round(start * 1e9), first + round((start + length) * 1e9)
        received[(received >= begin) & (received < end)] = end
    for k in range(1, received.size):   # the backlog first, in order, then what came next
        received[k] = max(received[k], received[k - 1] + 10_000)
    with BagWriter(out, 'mcap', custom_data=dict(raw.custom_data)) as writer:
        ids = {name: writer.add_topic(StoredTopic(name, t.type, t.msgdef,
                                                  STORE.hash_rihs01(t.type)))
               for name, t in raw.topics.items()}
        for (sent, name, data), late in zip(rows, received, strict=True):
            writer.write(ids[name], int(late), data, sent if send_times else None)
    return out
