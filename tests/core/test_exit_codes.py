"""Exit codes: the shared ones defined once, and docs/interfaces.md's table is every --help's."""

from __future__ import annotations

import re
from pathlib import Path

from simops_bringup.exit_code_table import (
    executables,
    help_text,
    parse_exit_codes,
    with_exit_code_table,
)
from simops_core.command_line import EXIT_CONFIG, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted(REPO.glob('src/*/simops_*/**/*.py'))


def definitions(pattern: str) -> list[str]:
    """The source files (relative) with a line matching ``pattern``."""
    regex = re.compile(pattern, re.MULTILINE)
    return [str(p.relative_to(REPO)) for p in SOURCES if regex.search(p.read_text())]


def test_each_shared_code_and_error_is_defined_once() -> None:
    home = ['src/simops_core/simops_core/command_line.py']
    for name in ('EXIT_OK', 'EXIT_FAILED', 'EXIT_USAGE', 'EXIT_CONFIG', 'EXIT_DATA',
                 'EXIT_OUTPUT', 'EXIT_INTERRUPTED'):
        assert definitions(rf'^{name}\b[^=\n]*=(?!=)') == home, name
    assert definitions(r'^class UsageError\b') == home
    assert definitions(r'^class ConfigError\b') == home
    assert definitions(r'^\s*return 130\b') == []   # EXIT_INTERRUPTED
    assert EXIT_CONFIG == EXIT_USAGE


def test_the_docs_table_is_what_every_executable_prints() -> None:
    text = (REPO / 'docs/interfaces.md').read_text()
    assert with_exit_code_table(text) == text, 'run `make docs` to regenerate the table'


def test_every_executable_documents_0_and_2() -> None:
    found = executables()
    names = {alias for row in found for alias in row.split('`, `')}
    assert {'sim', 'policy', 'record', 'excite', 'arm_setup', 'fit', 'fit-fleet', 'repair',
            'simops-launch', 'simops-demo', 'simops-recover', 'simops-validate',
            'simops-train', 'simops-rollout', 'simops-dataset', 'dataset', 'teleop'} <= names
    for name, main in found.items():
        codes = parse_exit_codes(name, help_text(name, main))
        assert {'0', '2'} <= set(codes), (name, codes)
        assert 'bad command line' in codes['2'], (name, codes['2'])
