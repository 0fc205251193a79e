"""Acceptance: 60 s of 1 kHz joint states, 20 Hz commands and 100 Hz poses, nothing lost."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from recorder_helpers import (
    check_streams,
    episodes,
    foxglove_counts,
    metadata,
    output,
    published_counts,
    read,
    start_publisher,
    start_recorder,
)
from ros_helpers import wait_until


@pytest.mark.slow
def test_sixty_seconds_lossless(tmp_path: Path) -> None:
    root = tmp_path / 'episodes'
    with start_recorder(tmp_path / 'rec.log', f'root:={root}', 'mode:=continuous') as rec:
        with start_publisher(tmp_path / 'pub.log', '--duration', '60') as pub:
            assert wait_until(lambda: 'publishing' in output(pub), 30), output(pub)
            assert pub.wait(120) == 0, output(pub)
        assert rec.stop() == 0, output(rec)

    sent = published_counts(output(pub))
    assert sent['/joint_states'] == 60000 and sent['/joint_commands'] == 1200
    (bag_dir,) = episodes(root)
    bag = read(bag_dir)
    ks = check_streams(bag)  # exact content, unbroken k
    for topic, count in sent.items():
        assert bag.info()[topic].count == count, (topic, bag.info()[topic].count, count)
        np.testing.assert_array_equal(ks[topic], np.arange(count))
    data = metadata(bag_dir)['custom_data']
    assert data['simops.messages_lost'] == '0'
    gaps = json.loads(data['simops.sequence_gaps'])
    for topic in sent:  # one publisher per topic, identified by its GID, nothing lost
        ((gid, lost),) = gaps[topic].items()
        assert len(gid) >= 32 and lost == 0
    fox = foxglove_counts(bag_dir)
    assert fox['/joint_states'] == list(ks['/joint_states'])
