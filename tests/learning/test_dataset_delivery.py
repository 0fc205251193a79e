"""A recorder short of CPU receives late; where the bag holds send times, the dataset export
takes every input as from a recorder that kept up, by the rule ``fit`` uses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dataset_helpers import write_episode
from ros_helpers import REPO
from starved_bags import starved

from simops_core.topics import load_topics
from simops_learning.bag_frames import Alignment, bag_episode
from simops_learning.dataset_cli import load_card
from simops_learning.episode_schema import EpisodeFrames, card_schema

CARD = REPO / 'models/policy/fr3_reach.yaml'


def episode(bag: Path) -> EpisodeFrames:
    card, spec = load_card(CARD)
    return bag_episode(bag, card_schema(card), spec, load_topics(), Alignment())


@pytest.fixture(scope='module')
def episodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, EpisodeFrames]:
    folder = tmp_path_factory.mktemp('starved_episode')
    source = folder / 'source'
    write_episode(source, duration=6.0)
    return {'kept_up': episode(starved(source, folder / 'kept_up', True, stalls=())),
            'send_times': episode(starved(source, folder / 'send', True)),
            'receive_only': episode(starved(source, folder / 'recv', False))}


def test_with_send_times_every_frame_is_the_one_a_recorder_that_kept_up_gave(
        episodes: dict[str, EpisodeFrames]) -> None:
    kept, sent = episodes['kept_up'], episodes['send_times']
    assert np.array_equal(kept.timestamp, sent.timestamp)
    assert kept.report['dropped'] == sent.report['dropped']
    compared = [name for name in kept.columns if not name.endswith('.received')]
    assert 'action' in compared and 'source.command.effective' in compared
    for name in compared:
        assert np.array_equal(kept.columns[name], sent.columns[name], equal_nan=True), name
    # the provenance columns keep what the recorder received
    late = sent.columns['source.command.received'] - kept.columns['source.command.received']
    assert late.max() > 0.02 and late.min() >= 0.0


def test_without_them_a_stalled_command_takes_the_late_arm_estimate(
        episodes: dict[str, EpisodeFrames]) -> None:
    """Receive times alone read the stalls as an arm that ran late: a command received in
    one took effect half a joint-state period after the newest state before it, within a
    joint-state period (1 ms) of the truth."""
    kept, late = episodes['kept_up'], episodes['receive_only']
    assert np.array_equal(kept.columns['action'], late.columns['action'], equal_nan=True)
    shift = (late.columns['source.command.effective']
             - kept.columns['source.command.effective'])
    assert np.abs(shift).max() <= 0.001
    stalled = (late.columns['source.command.received']
               - kept.columns['source.command.received'])
    assert stalled.max() > 0.02
