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
