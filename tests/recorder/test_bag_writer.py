"""BagWriter as a context manager: finished when the block ends, aborted when it raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from rosbags.typesys import Stores, get_typestore

from simops_core.bag_reader import BagError, read_bag
from simops_recorder.bag_writer import BagWriter, StoredTopic

STORE = get_typestore(Stores.ROS2_JAZZY)
TYPE = 'std_msgs/msg/String'


def topic() -> StoredTopic:
    msgdef, _ = STORE.generate_msgdef(TYPE, ros_version=2)
    return StoredTopic('/chatter', TYPE, msgdef, STORE.hash_rihs01(TYPE))


def payload(text: str) -> bytes:
    return bytes(STORE.serialize_cdr(STORE.types[TYPE](data=text), TYPE))


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_the_block_finishes_the_bag(tmp_path: Path, storage: str) -> None:
    with BagWriter(tmp_path / 'bag', storage) as writer:
        ident = writer.add_topic(topic())
        for k in range(5):
            writer.write(ident, 1_000 + k, payload(f'hello {k}'))
    bag = read_bag(tmp_path / 'bag')
    assert bag.info()['/chatter'].count == 5
    assert [m.data for m in bag.decode('/chatter')] == [f'hello {k}' for k in range(5)]


def test_a_raising_block_aborts_without_metadata(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), BagWriter(tmp_path / 'bag') as writer:
        writer.write(writer.add_topic(topic()), 1_000, payload('lost?'))
        raise RuntimeError('the caller failed')
    assert not (tmp_path / 'bag' / 'metadata.yaml').exists()   # left for `repair`
    with pytest.raises(BagError, match='repair'):
        read_bag(tmp_path / 'bag')


def test_mcap_keeps_each_send_time_as_its_publish_time(tmp_path: Path) -> None:
    """As rosbag2 Jazzy writes MCAP: log time = receive time, publish time = the DDS source
    timestamp; a message without one repeats its receive time. Read with mcap's own reader,
    and the split files too."""
    from mcap.reader import make_reader

    sent = {1_000: 900, 1_100: 1_050, 1_200: None, 1_300: 1_299}
    with BagWriter(tmp_path / 'bag', 'mcap') as writer:
        ident = writer.add_topic(topic())
        for k, (received, when) in enumerate(sent.items()):
            if k == 2:
                writer.start_new_file()
            writer.write(ident, received, payload(f'hello {k}'), when)
    found = {}
    for file in sorted((tmp_path / 'bag').glob('*.mcap')):
        with file.open('rb') as stream:
            for _, _, message in make_reader(stream).iter_messages():
                found[message.log_time] = message.publish_time
    assert found == {received: received if when is None else when
                     for received, when in sent.items()}
    raw = read_bag(tmp_path / 'bag').topics['/chatter']
    assert raw.log_time == list(sent) and raw.publish_time == list(found.values())


def test_sqlite3_has_no_send_time_and_reads_its_receive_time(tmp_path: Path) -> None:
    with BagWriter(tmp_path / 'bag', 'sqlite3') as writer:
        writer.write(writer.add_topic(topic()), 1_000, payload('hello'), 900)
    raw = read_bag(tmp_path / 'bag').topics['/chatter']
    assert raw.log_time == raw.publish_time == [1_000]
