"""A recorder short of CPU receives late; where the bag holds send times, ``fit`` sees the
recording as a recorder that kept up would have written it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sysid_helpers import SPEC, STORE, simulate, write_bag

from simops_core.bag_reader import read_bag
from simops_core.topics import load_topics
from simops_recorder.bag_writer import BagWriter, StoredTopic
from simops_sysid.recording import Recording, load_recording

TOPICS = load_topics()
STALLS = ((2.0, 0.040), (3.5, 0.025), (5.0, 0.060))   # (s after the first message, s long)


def starved(source: Path, out: Path, send_times: bool) -> Path:
    """``source`` as a recorder that stalled for :data:`STALLS` would have written it.

    Every message received during a stall is taken in a burst when it ends (10 us apart, in
    order, before what came after); with
    ``send_times`` each keeps its on-time receive time as its send time, as DDS stamps it at
    the publisher and rosbag2 Jazzy stores it (MCAP publish time).
    """
    raw = read_bag(source)
    first = min(t.log_time[0] for t in raw.topics.values())
    rows = []
    for name, topic in raw.topics.items():
        rows += [(time, name, data) for time, data in zip(topic.log_time, topic.data,
                                                          strict=True)]
    rows.sort(key=lambda row: row[0])
    received = np.array([row[0] for row in rows], dtype=np.int64)
    for start, length in STALLS:
        begin, end = first + round(start * 1e9), first + round((start + length) * 1e9)
        received[(received >= begin) & (received < end)] = end
    for k in range(1, received.size):   # the backlog first, in order, then what came next
        received[k] = max(received[k], received[k - 1] + 10_000)
    with BagWriter(out, 'mcap') as writer:
        ids = {name: writer.add_topic(StoredTopic(name, t.type, t.msgdef,
                                                  STORE.hash_rihs01(t.type)))
               for name, t in raw.topics.items()}
        for (sent, name, data), late in zip(rows, received, strict=True):
            writer.write(ids[name], int(late), data, sent if send_times else None)
    return out


@pytest.fixture(scope='module')
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recording]:
    folder = tmp_path_factory.mktemp('starved')
    kept_up = write_bag(folder / 'kept_up', simulate(8.0, seed=3))
    return {'kept_up': load_recording(kept_up, SPEC, TOPICS),
            'send_times': load_recording(starved(kept_up, folder / 'send', True), SPEC,
                                         TOPICS),
            'receive_only': load_recording(starved(kept_up, folder / 'recv', False), SPEC,
                                           TOPICS)}


def test_with_send_times_the_recording_is_the_one_a_recorder_that_kept_up_made(
        bags: dict[str, Recording]) -> None:
    kept, sent = bags['kept_up'], bags['send_times']
    assert np.array_equal(kept.t, sent.t)
    assert np.abs(kept.commands.t - sent.commands.t).max() < 1e-9
    assert np.abs(kept.lag - sent.lag).max() < 1e-9 and sent.lag.max() < 1e-3
    assert kept.untimed.size == sent.untimed.size == 0


def test_without_them_the_stalls_read_as_an_arm_that_ran_late(
        bags: dict[str, Recording]) -> None:
    """Humble's MCAP and sqlite3 hold receive times only: the stalls show as joint states
    up to 60 ms late and commands whose effect the recording cannot time."""
    late = bags['receive_only']
    assert late.lag.max() > 0.05
    assert late.untimed.size >= len(STALLS)
