"""A recorder short of CPU receives late; where the bag holds send times, ``fit`` sees the
recording as a recorder that kept up would have written it."""

from __future__ import annotations

import numpy as np
import pytest
from starved_bags import STALLS, starved
from sysid_helpers import SPEC, simulate, write_bag

from simops_core.topics import load_topics
from simops_sysid.recording import Recording, load_recording

TOPICS = load_topics()


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
