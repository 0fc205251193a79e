"""Fuzz the file inputs: bags into ``fit`` and ``repair``, SimParams files into the loader and
the sim node, policy cards into the loader and the policy node.

Every case must end with a documented exit code, one ``prog: error:`` line on failure, no
traceback, and its input files untouched. Budget and reproduction: tests/fuzz_helpers.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from fuzz_helpers import (
    ODD_FLOATS,
    PATHS,
    YAML_VALUES,
    assert_clean_exit,
    budget,
    mutate,
    start_or_refuse,
    tree_digest,
)
from hypothesis import example, given
from hypothesis import strategies as st
from ros_helpers import REPO, installed_executable
from sysid_helpers import SPEC, StandinData, simulate, write_bag

from simops_core.command_line import EXIT_DATA
from simops_core.paths import resolve_resource
from simops_core.policy_card import CardError, load_policy_card
from simops_core.sim_params import SimParamsError, load_sim_params
from simops_sysid.fit_cli import EXIT_FIT

FIELDS = ('q', 'qd', 'effort', 'commands', 't')
FAST_FIT = ('--params', 'kp', '--joints', 'fr3_joint2', '--grouped-iters', '0',
            '--full-iters', '1', '--threads', '1')

BAG_MUTATIONS = st.one_of(
    st.tuples(st.just('truncate'), st.floats(0.0, 1.0)),
    st.tuples(st.just('flip'), st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)),
                                        min_size=1, max_size=20)),
    st.tuples(st.just('metadata'), PATHS, YAML_VALUES),
    st.tuples(st.just('values'), st.sampled_from(FIELDS), st.floats(0.0, 1.0),
              st.integers(0, 8), st.lists(st.one_of(ODD_FLOATS, st.floats(-10, 10)),
                                          min_size=1, max_size=30)),
    st.tuples(st.just('names'), st.integers(0, 8), st.text(max_size=10)),
)


@pytest.fixture(scope='module')
def data() -> StandinData:
    return simulate(8.0)


def fuzzed_bag(folder: Path, data: StandinData, mutation: tuple[Any, ...]) -> Path:
    """A bag in ``folder/bag``: ``data`` written, then damaged as ``mutation`` says."""
    bag = folder / 'bag'
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    kind = mutation[0]
    if kind == 'values':
        _, field, where, column, values = mutation
        arrays = {k: getattr(data, k).copy() for k in ('q', 'qd', 'effort', 'commands')}
        stamps = data.t.copy()
        if field == 't':   # stamps are whole nanoseconds: only finite, representable ones
            values = list(np.clip(np.nan_to_num(values, posinf=1e9, neginf=0.0), 0.0, 1e9))
        target = stamps if field == 't' else arrays[field]
        row = int(where * (len(target) - len(values)))
        if target.ndim == 1:
            target[row:row + len(values)] = values
        else:
            target[row:row + len(values), column % target.shape[1]] = values
        data = StandinData(data.t, arrays['q'], arrays['qd'], arrays['effort'], data.arrival,
                           arrays['commands'], data.period, data.stamps)
        return write_bag(bag, data, stamps=stamps)
    if kind == 'names':
        names = list(SPEC.joint_names)
        names[mutation[1]] = mutation[2]
        return write_bag(bag, data, names=names)
    write_bag(bag, data)
    storage = next(bag.glob('*.mcap'))
    if kind == 'truncate':
        raw = storage.read_bytes()
        storage.write_bytes(raw[:int(mutation[1] * len(raw))])
    elif kind == 'flip':
        raw = bytearray(storage.read_bytes())
        for where, value in mutation[1]:
            raw[min(int(where * len(raw)), len(raw) - 1)] = value
        storage.write_bytes(bytes(raw))
    else:
        meta = bag / 'metadata.yaml'
        doc = yaml.safe_load(meta.read_text())
        meta.write_text(yaml.safe_dump(mutate(doc, ['rosbag2_bagfile_information',
                                                    *mutation[1]], mutation[2])))
    return bag


def run(executable: tuple[str, str], *args: str | Path,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    command = [str(installed_executable(*executable)), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO)


@pytest.mark.slow   # about 70 s: fit on 12 fuzzed bags
@budget(12)
@given(mutation=BAG_MUTATIONS)
@example(mutation=('flip', [(0.1875, 128)]))     # found: a corrupt CDR string (SerdeError)
@example(mutation=('flip', [(0.14915683928475823, 0)]))   # found: KeyError in mcap's reader
@example(mutation=('truncate', 0.9375))           # found: struct.error inside a record
@example(mutation=('names', 7, ''))               # found: no finger joints (as on a real FR3)
@pytest.mark.ros_free
def test_fit_on_fuzzed_bags(tmp_path_factory: pytest.TempPathFactory, data: StandinData,
                            mutation: tuple[Any, ...]) -> None:
    folder = tmp_path_factory.mktemp('fit')
    bag = fuzzed_bag(folder / 'in', data, mutation)
    before = tree_digest(bag)
    out = folder / 'p.yaml'
    result = run(('simops_sysid', 'fit'), '--bag', bag, '--out', out, *FAST_FIT)
    assert_clean_exit(result, 'fit', {0, EXIT_DATA, EXIT_FIT})
    assert tree_digest(bag) == before
    assert out.is_file() == (result.returncode == 0)
    if out.is_file():
        load_sim_params(out)   # whatever fit writes, the loader accepts


@budget(15)
@given(mutation=BAG_MUTATIONS)
@example(mutation=('truncate', 0.9375))           # found: struct.error inside a record
@pytest.mark.ros_free
def test_repair_on_fuzzed_bags(tmp_path_factory: pytest.TempPathFactory, data: StandinData,
                               mutation: tuple[Any, ...]) -> None:
    folder = tmp_path_factory.mktemp('repair')
    bag = fuzzed_bag(folder / 'in', data, mutation)
    before = tree_digest(bag)
    result = run(('simops_recorder', 'repair'), bag, timeout=120)
    assert_clean_exit(result, 'repair', {0, EXIT_DATA})
    kept = bag.parent / f'.{bag.name}.damaged'
    assert tree_digest(kept if kept.exists() else bag) == before   # the original bytes
    assert not (bag.parent / f'.{bag.name}.repair').exists()


# --- SimParams files -------------------------------------------------------------------------

NOMINAL = yaml.safe_load(resolve_resource('config/sim_params/fr3_nominal.yaml').read_text())
SIM_PARAMS_DOCS = st.one_of(
    st.tuples(PATHS, YAML_VALUES).map(lambda pv: mutate(NOMINAL, *pv)),
    YAML_VALUES,
    st.builds(lambda joint, field, value: {'version': 1, 'joints': {joint: {field: value}}},
              st.sampled_from(SPEC.joint_names), st.sampled_from(
                  ('damping', 'armature', 'frictionloss', 'kp', 'kv')),
              st.one_of(ODD_FLOATS, st.floats(-1e6, 1e7), YAML_VALUES)),
    st.builds(lambda value: {'version': 1, 'command_delay': value},
              st.one_of(ODD_FLOATS, st.floats(-5, 5))),
    st.builds(lambda body, value: {'version': 1, 'body_mass_scale': {body: value}},
              st.sampled_from(('fr3_link3', 'fr3_link7', 'nowhere')),
              st.one_of(ODD_FLOATS, st.floats(-5, 50))),
)


@budget(300)
@given(doc=SIM_PARAMS_DOCS)
def test_sim_params_loader_raises_only_its_error(tmp_path_factory: pytest.TempPathFactory,
                                                 doc: Any) -> None:
    path = tmp_path_factory.getbasetemp() / 'fuzzed_params.yaml'
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    try:
        load_sim_params(path)
    except SimParamsError as exc:
        assert '\n' not in str(exc)


@budget(5)
@given(doc=SIM_PARAMS_DOCS)
def test_sim_node_on_fuzzed_sim_params(tmp_path_factory: pytest.TempPathFactory,
                                       doc: Any) -> None:
    """Refused with one line (exit 2), or started and stopped cleanly by Ctrl-C (exit 0)."""
    folder = tmp_path_factory.mktemp('simparams')
    path = folder / 'params.yaml'
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    written = path.read_bytes()
    argv = [str(installed_executable('simops_sim', 'sim')), '--ros-args', '-p',
            f'sim_params_file:={path}', '-p', 'publish_clock:=false']
    output = start_or_refuse(argv, folder / 'sim.log', 'joint_states at', 'sim', hold=1.0)
    assert 'diverged' not in output or 'reset to keyframe' in output
    assert path.read_bytes() == written


# --- policy cards ----------------------------------------------------------------------------

CARD_PATH = resolve_resource('models/policy/fr3_reach.yaml')
CARD = yaml.safe_load(CARD_PATH.read_text())


@budget(300)
@given(path=PATHS, value=YAML_VALUES)
@example(path=[11, 2, 0, 1, 0], value=[])          # found: a list among field names
def test_policy_card_loader_raises_only_its_error(tmp_path_factory: pytest.TempPathFactory,
                                                  path: list[Any], value: Any) -> None:
    card = tmp_path_factory.getbasetemp() / 'fuzzed_card.yaml'
    card.write_text(yaml.safe_dump(mutate(CARD, path, value), allow_unicode=True))
    try:
        load_policy_card(card, SPEC.joint_names, SPEC.arm_joints)
    except CardError as exc:
        assert '\n' not in str(exc)


@budget(4)
@given(path=PATHS, value=YAML_VALUES)
def test_policy_node_on_fuzzed_cards(tmp_path_factory: pytest.TempPathFactory,
                                     path: list[Any], value: Any) -> None:
    folder = tmp_path_factory.mktemp('card')
    model = folder / 'fr3_reach.pt'
    shutil.copy(resolve_resource('models/policy/fr3_reach.pt'), model)
    card = folder / 'fr3_reach.yaml'
    card.write_text(yaml.safe_dump(mutate(CARD, path, value), allow_unicode=True))
    before = tree_digest(folder)
    argv = [str(installed_executable('simops_policy', 'policy')), '--ros-args', '-p',
            f'model_path:={model}', '-p', 'start_enabled:=false']
    start_or_refuse(argv, folder / 'policy.log', 'DISABLED', 'policy')
    (folder / 'policy.log').unlink()
    assert tree_digest(folder) == before

