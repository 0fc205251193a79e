"""The recorder's bags, field by field, against rosbag2's own format definition.

``ros2 bag`` cannot run here, so this encodes what rosbag2 reads (ros2/rosbag2 sources):

- rosbag2_storage/include/rosbag2_storage/yaml.hpp, ``convert<BagMetadata>::decode``: for
  version 8 it requires version, storage_identifier, duration.nanoseconds,
  starting_time.nanoseconds_since_epoch, message_count, topics_with_message_count (name,
  type, serialization_format, offered_qos_profiles as a *string*, type_description_hash from
  version 7), relative_file_paths, compression_format and compression_mode (version >= 3),
  files with path/starting_time/duration/message_count (>= 5), custom_data as a map of
  strings (>= 6) and ros_distro (>= 8). Humble, Jazzy and Kilted gate fields with
  ``version >=`` only, so version 8 is read by all three.
- rosbag2_storage/src/rosbag2_storage/qos.cpp, ``convert<Rosbag2QoS>::decode``: for version
  <= 8 history, reliability, durability and liveliness are integers (rmw enum values), depth
  an integer, deadline/lifespan/liveliness_lease_duration {sec, nsec}, and
  avoid_ros_namespace_conventions a bool. Version 9 switched to strings, which Humble and
  Jazzy cannot read.
- rosbag2_storage_mcap/src/mcap_storage.cpp, ``read_metadata`` and ``create_topic``: profile
  ``ros2``; a Statistics record (message and per-channel counts, start and end time); every
  channel has a schema named like the type with encoding ``ros2msg``; channel message
  encoding = serialization_format (``cdr``); channel metadata ``offered_qos_profiles`` (the
  same string) and optionally ``topic_type_hash``; a ``rosbag2`` Metadata record with
  ``serialized_metadata`` decoded like metadata.yaml.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from mcap.reader import make_reader
from mcap.records import Header
from mcap.stream_reader import StreamReader
from recorder_helpers import (
    QOS_INT_KEYS,
    check_bag_metadata,
    episodes,
    metadata,
    start_publisher,
    start_recorder,
)
from ros_helpers import RosProbe, wait_until
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore


@pytest.mark.parametrize('compression', ['none', 'zstd'])
def test_recorded_bag_matches_rosbag2_format(ros_probe: RosProbe, tmp_path: Path,
                                             compression: str) -> None:
    root = tmp_path / 'episodes'
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=continuous',
                        f'compression:={compression}', 'split_size:=200000') as rec, \
         start_publisher(tmp_path / 'pub.log', '--duration', '2') as pub:
        assert wait_until(lambda: 'publishing' in pub.log_path.read_text(), 30)
        offered = {}
        for topic in ('/joint_states', '/goal_pose', '/joint_commands'):
            assert wait_until(lambda t=topic: len(
                ros_probe.node.get_publishers_info_by_topic(t)) == 1, 10), topic
            (endpoint,) = ros_probe.node.get_publishers_info_by_topic(topic)
            offered[topic] = str(endpoint.topic_type_hash)
        assert pub.wait(30) == 0
        time.sleep(0.3)
        assert rec.stop() == 0
    (bag,) = episodes(root)
    info = metadata(bag)
    check_bag_metadata(info, bag)
    assert len(info['files']) >= 2  # split by size
    topics = {t['topic_metadata']['name']: t for t in info['topics_with_message_count']}
    store = get_typestore(Stores.ROS2_JAZZY)
    for name, type_hash in offered.items():
        meta = topics[name]['topic_metadata']
        # The hash stored is the one the publisher announced, and rosbags computes the same.
        assert meta['type_description_hash'] == type_hash == store.hash_rihs01(meta['type'])
    goal_qos = yaml.safe_load(topics['/goal_pose']['topic_metadata']['offered_qos_profiles'])
    assert goal_qos[0]['durability'] == 1 and goal_qos[0]['reliability'] == 1  # latched
    js_qos = yaml.safe_load(topics['/joint_states']['topic_metadata']['offered_qos_profiles'])
    assert js_qos[0]['reliability'] == 1 and js_qos[0]['durability'] == 2  # reliable, volatile
    # Discovery does not carry history/depth; rosbag2's own bags store history 3 (unknown),
    # depth 0 likewise (shared testdata talker bags).
    assert (js_qos[0]['history'], js_qos[0]['depth']) in ((3, 0), (1, 10))

    counts: dict[str, int] = {}
    for entry in info['files']:
        with (bag / entry['path']).open('rb') as stream:
            header = next(StreamReader(stream).records)
            stream.seek(0)
            assert isinstance(header, Header) and header.profile == 'ros2'
            reader = make_reader(stream)
            summary = reader.get_summary()
            assert summary is not None and summary.statistics is not None
            stats = summary.statistics
            assert stats.message_count == entry['message_count']
            assert stats.message_start_time == entry['starting_time']['nanoseconds_since_epoch']
            assert stats.message_end_time - stats.message_start_time == \
                entry['duration']['nanoseconds']
            for channel in summary.channels.values():
                schema = summary.schemas[channel.schema_id]
                meta = topics[channel.topic]['topic_metadata']
                assert schema.name == meta['type'] and schema.encoding == 'ros2msg'
                assert schema.data.decode() == store.generate_msgdef(meta['type'], ros_version=2)[0]
                assert channel.message_encoding == meta['serialization_format']
                assert channel.metadata['offered_qos_profiles'] == meta['offered_qos_profiles']
                counts[channel.topic] = (counts.get(channel.topic, 0)
                                         + stats.channel_message_counts.get(channel.id, 0))
            for chunk in summary.chunk_indexes:
                assert chunk.compression == ('' if compression == 'none' else 'zstd')
            records = [m for m in reader.iter_metadata() if m.name == 'rosbag2']
            assert len(records) == 1
            embedded = yaml.safe_load(records[0].metadata['serialized_metadata'])
            assert embedded['version'] == 8
            assert embedded['storage_identifier'] == 'mcap'
    assert counts == {name: t['message_count'] for name, t in topics.items()}
    # metadata.yaml and the files agree on QoS, so even rosbags' AnyReader sees everything.
    with AnyReader([bag], default_typestore=store) as reader:
        assert sum(1 for _ in reader.messages()) == info['message_count'] > 0


def test_shared_testdata_v7_metadata_passes_the_same_topic_checks() -> None:
    """The checker accepts what real rosbag2 wrote (cdr_test, version 7 + hash field)."""
    from ros_helpers import REPO

    real = yaml.safe_load((REPO.parent / 'shared/testdata/rosbag2/cdr_test_mcap/metadata.yaml')
                          .read_text())['rosbag2_bagfile_information']
    for entry in real['topics_with_message_count']:
        profiles = yaml.safe_load(entry['topic_metadata']['offered_qos_profiles'])
        for qos in profiles:
            assert all(type(qos[key]) is int for key in QOS_INT_KEYS)
            assert type(qos['avoid_ros_namespace_conventions']) is bool
