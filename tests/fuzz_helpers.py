"""Shared pieces of the fuzz suite (tests/test_fuzz_*.py): budgets, value strategies, checks.

Budget: ``SIMOPS_FUZZ=ci`` (the default) runs a bounded number of deterministic examples per
target, so CI stays inside its time and a red run names a reproducible case;
``SIMOPS_FUZZ=long`` runs ten times more, with fresh random examples on every run::

    SIMOPS_FUZZ=long .venv/bin/python -m pytest tests/test_fuzz_*.py
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from ros_helpers import REPO, NodeProcess

LONG = os.environ.get('SIMOPS_FUZZ', 'ci') == 'long'


def budget(examples: int) -> settings:
    """Hypothesis settings for a target whose CI budget is ``examples`` cases."""
    return settings(max_examples=examples * (10 if LONG else 1), deadline=None,
                    derandomize=not LONG, database=None, print_blob=True,
                    suppress_health_check=list(HealthCheck))


ODD_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 1e400, -0.0,
                              5e-324, 1e9, -1e9, 0.0, -1.0])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), ODD_FLOATS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.sampled_from(['', 'abc', '1e400', 'nan', '~', '[1', '{a']))
YAML_VALUES = st.recursive(
    SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                     st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=8)


def tree_digest(path: Path) -> str:
    """SHA-256 over every file below ``path`` (names and bytes), to prove nothing changed."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob('*') if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def assert_clean_exit(result: subprocess.CompletedProcess[str], prog: str,
                      codes: set[int]) -> None:
    """A documented exit code, no traceback, and a failure is one ``prog: error:`` line."""
    text = result.stdout + result.stderr
    assert 'Traceback' not in text, text[-3000:]
    assert result.returncode in codes, (result.returncode, text[-3000:])
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f'{prog}: error: '), result.stderr


def start_or_refuse(argv: list[str], log: Path, ready: str, prog: str,
                    hold: float = 0.0) -> str:
    """Run a node until it prints ``ready`` (then ``hold`` s more and Ctrl-C) or exits.

    Either way it must end cleanly: exit 0 after Ctrl-C, or exit 2 with exactly one
    ``prog: error:`` line among its output; never a traceback. Returns the output.
    """

    with NodeProcess(argv, log, cwd=REPO) as node:
        deadline = time.monotonic() + 60
        while node.proc.poll() is None and ready not in node.output:
            assert time.monotonic() < deadline, node.output
            time.sleep(0.1)
        if node.proc.poll() is None:
            time.sleep(hold)
        code = node.stop() if node.proc.poll() is None else node.proc.returncode
    output = node.output
    assert 'Traceback' not in output, output
    if code != 0:
        lines = [line for line in output.strip().splitlines() if line]
        assert code == 2 and lines[-1].startswith(f'{prog}: error: '), output
        assert len([line for line in lines if 'error' in line.lower()]) == 1, output
    return output


def mutate(tree: Any, path: list[Any], value: Any) -> Any:
    """``tree`` (YAML data) with the node at ``path`` (keys/indices, wrapped) set to ``value``.

    An empty path replaces the whole tree; a path through a scalar replaces that scalar.
    """
    if not path or not isinstance(tree, (dict, list)) or not tree:
        return value
    if isinstance(tree, dict):
        keys = list(tree)
        key = path[0] if path[0] in tree else keys[_pick(path[0], len(keys))]
        return {**tree, key: mutate(tree[key], path[1:], value)}
    index = _pick(path[0], len(tree))
    return [*tree[:index], mutate(tree[index], path[1:], value), *tree[index + 1:]]


def _pick(step: Any, count: int) -> int:
    """A deterministic index in [0, count) for a path step (an int or any text)."""
    return step % count if isinstance(step, int) else zlib.crc32(str(step).encode()) % count


PATHS = st.lists(st.one_of(st.integers(0, 50), st.text(max_size=6)), max_size=5)
