"""Episode bookkeeping without ROS: episode_info parsing, sequence gaps, names, metadata."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from simops_recorder.episode import (
    Episode,
    EpisodeInfo,
    EpisodeInfoError,
    RecorderIdentity,
    SequenceGaps,
    episode_dir_name,
)


def test_episode_info_updates_and_rejects() -> None:
    info = EpisodeInfo()
    info.update_from_json('{"label": "pick", "success": true, "notes": "ok"}')
    assert (info.label, info.success, info.notes) == ('pick', True, 'ok')
    info.update_from_json('{"notes": "later"}')
    assert (info.label, info.success, info.notes) == ('pick', True, 'later')
    for bad, match in [('nope', 'not JSON'), ('[1]', 'JSON object'), ('{"label": ""}', 'label'),
                       ('{"success": "yes"}', 'success'), ('{"colour": 1}', 'unknown keys')]:
        with pytest.raises(EpisodeInfoError, match=match):
            info.update_from_json(bad)
    assert info.label == 'pick'


def test_sequence_gaps_per_publisher() -> None:
    gaps = SequenceGaps()
    assert [gaps.observe('/js', 'a', s) for s in (5, 6, 9, 10)] == [0, 0, 2, 0]
    assert [gaps.observe('/js', 'b', s) for s in (1, 3)] == [0, 1]
    assert gaps.observe('/js', 'a', None) == 0  # rmw without sequence numbers
    assert gaps.observe('/cmd', 'a', 7) == 0
    assert gaps.gaps == {'/js': {'a': 2, 'b': 1}, '/cmd': {'a': 0}}
    assert gaps.total() == 3 and gaps.total('/cmd') == 0


def test_dir_name_and_custom_data() -> None:
    start = datetime(2026, 11, 21, 6, 0, 1, 250000, tzinfo=timezone.utc)
    assert episode_dir_name(start, 'pick cube/2') == '20261121T060001.250Z_pick-cube-2'
    assert episode_dir_name(start, '///') == '20261121T060001.250Z_episode'
    episode = Episode(RecorderIdentity('fr3', 'real', 'ab', 'cd'), EpisodeInfo('pick', False),
                      start)
    episode.gaps.observe('/js', 'g', 1)
    episode.gaps.observe('/js', 'g', 4)
    data = episode.custom_data({'/js': 2})
    assert data['simops.success'] == 'false' and data['simops.stop_time'] == ''
    assert data['simops.messages_lost'] == '2'
    assert data['simops.sequence_gaps'] == '{"/js": {"g": 2}}'
    assert all(isinstance(v, str) for v in data.values())


def test_a_sequence_counts_only_where_its_publisher_is_known() -> None:
    """rclpy 7 (Jazzy) gives no publisher GID: two publishers' numbers would interleave."""
    from simops_ros.rclpy_compat import publication

    def never() -> int:
        raise AssertionError('a message with its GID never asks for the publisher count')

    gid = {'implementation_identifier': 'rmw_fastrtps_cpp', 'data': bytes(range(16))}
    assert publication({'publisher_gid': gid, 'publication_sequence_number': 7}, never) == (
        bytes(range(16)).hex(), 7)
    assert publication({'publication_sequence_number': 7}, lambda: 1) == ('unknown', 7)
    assert publication({'publication_sequence_number': 7}, lambda: 2) == ('unknown', None)
    gaps = SequenceGaps()
    for sequence in (5, 100, 6, 101):   # two publishers, one unknown key: nothing counted
        info = {'publication_sequence_number': sequence}
        gaps.observe('/diagnostics', *publication(info, lambda: 2))
    assert gaps.total() == 0
