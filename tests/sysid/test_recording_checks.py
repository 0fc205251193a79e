"""Checks of the model against a recording: the flange load and the command stream's rate."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysid_helpers import HIDDEN, MODEL, SPEC, simulate, write_bag

from simops_core.sim_params import SimParams, load_sim_params, merge_sim_params
from simops_core.topics import load_topics
from simops_sysid.recording import States, load_recording, load_states
from simops_sysid.recording_checks import command_rate, flange_load, own_tracking, tracking

TOPICS = load_topics()


@pytest.fixture(scope='module')
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, States]:
    """Efforts-only bags of the stand-in with its hand and without it (8 s each)."""
    folder = tmp_path_factory.mktemp('checks')
    bare = merge_sim_params(load_sim_params(HIDDEN), SimParams(end_effector='none'))
    out = {}
    for name, params in (('franka_hand', None), ('none', bare)):
        bag = write_bag(folder / name, simulate(8.0, seed=5, params=params), commands=False)
        out[name] = load_states(bag, SPEC, TOPICS)
    return out


@pytest.mark.parametrize('carried', ['franka_hand', 'none'])
def test_efforts_of_the_other_end_effector_get_one_line_naming_the_flag(
        recorded: dict[str, States], carried: str) -> None:
    other = 'none' if carried == 'franka_hand' else 'franka_hand'
    assert flange_load(MODEL, SPEC, [recorded[carried]], carried) is None
    line = flange_load(MODEL, SPEC, [recorded[carried]], other)
    assert line is not None and line.endswith(f'fit with --end-effector {carried}'), line
    assert '\n' not in line


def test_a_stream_far_faster_than_the_control_period_is_named(tmp_path: Path) -> None:
    fast = load_recording(write_bag(tmp_path / 'fast', simulate(12.0, rate=1000.0)), SPEC,
                          TOPICS)
    line = command_rate([fast])
    assert line is not None and line.startswith('commands stream at 10'), line
    policy = load_recording(write_bag(tmp_path / 'policy', simulate(12.0, rate=20.0)), SPEC,
                            TOPICS)
    assert command_rate([policy]) is None


def test_an_arm_that_tracks_far_closer_than_the_effort_law_replays_is_named(
        tmp_path: Path) -> None:
    """The arm's own tracking of a 1 kHz stream (best lag, less offsets) against the effort
    JTC's best replay: a replay error of 3x it names --controller joint_impedance; one of
    1.5x (within what the law explains) says nothing; the stand-in's own JTC, tracking with
    the law's lag, is not named against its replay's noise-level error."""
    rec = load_recording(write_bag(tmp_path / 'fast', simulate(8.0, rate=1000.0),
                                   stream='/joint_commands'), SPEC, TOPICS)
    own = own_tracking(rec, 0.05)
    assert own is not None
    line = tracking([rec], 3.0 * own[0], 0.05)
    assert line is not None and line.endswith('fit with --controller joint_impedance'), line
    assert tracking([rec], 1.5 * own[0], 0.05) is None
    assert tracking([rec], 1e-4, 0.05) is None   # the stand-in's replay: at its noise
