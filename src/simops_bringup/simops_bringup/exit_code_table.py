"""The exit-code table of docs/interfaces.md, generated from what each executable's ``--help`` says.

Every SimOps executable prints its exit codes at the end of ``--help``
(:func:`simops_core.command_line.exit_codes`, from the codes its module declares), so that
epilog is the one source: :func:`exit_code_table` runs ``--help`` of every console script the
SimOps packages install and lays the codes out, one row per executable. ``make docs`` writes
the table through :func:`with_exit_code_table`; a test checks the file is unchanged by it.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

TABLE_START = '<!-- exit codes: generated from each executable\'s --help by `make docs` -->'
TABLE_END = '<!-- end of exit codes -->'
PACKAGE_PREFIX = 'simops_'
EPILOG_START = 'exit codes:'
INDENT = '  '   # exit_codes() puts each code's line two spaces in; longer ones continue deeper


class ExitCodeTableError(RuntimeError):
    """An executable's ``--help`` has no exit codes, or the docs have no place for the table."""


def executables() -> dict[str, Callable[[], object]]:
    """The SimOps console scripts by name; aliases of one function share a row (``a``, ``b``)."""
    names: dict[str, list[str]] = {}
    loaded: dict[str, Callable[[], object]] = {}
    for point in sorted(entry_points(group='console_scripts'), key=lambda p: p.name):
        if point.value.startswith(PACKAGE_PREFIX):
            names.setdefault(point.value, []).append(point.name)
            loaded[point.value] = point.load()
    return {'`, `'.join(sorted(aliases, key=len, reverse=True)): loaded[value]
            for value, aliases in sorted(names.items(), key=lambda item: min(item[1]))}


def help_text(name: str, main: Callable[[], object]) -> str:
    """What ``name --help`` prints (run in this process, as its console script runs it)."""
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [name.split('`')[0], '--help']
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main()
    finally:
        sys.argv = argv
    return out.getvalue()


def parse_exit_codes(name: str, text: str) -> dict[str, str]:
    """The ``exit codes:`` section of a ``--help`` text: code (as printed) -> meaning."""
    if EPILOG_START not in text:
        raise ExitCodeTableError(f'{name} --help lists no exit codes; give its parser an '
                                 'epilog from simops_core.command_line.exit_codes')
    codes: dict[str, str] = {}
    code = ''
    for line in text.split(EPILOG_START, 1)[1].splitlines()[1:]:
        if not line.strip():
            break
        head = line[len(INDENT):]
        if line.startswith(INDENT) and not head.startswith(' '):
            code, _, meaning = head.partition(INDENT)
            codes[code] = meaning.strip()
        elif code:
            codes[code] += ' ' + line.strip()
    return codes


def _order(code: str) -> tuple[int, int]:
    return (0, int(code)) if code.isdigit() else (1, 0)


def exit_code_table() -> str:
    """The markdown table: one row per executable, one column per code any of them uses."""
    rows = {name: parse_exit_codes(name, help_text(name, main))
            for name, main in executables().items()}
    columns = sorted({code for codes in rows.values() for code in codes}, key=_order)
    lines = ['| executable | ' + ' | '.join(columns) + ' |',
             '|---|' + '---|' * len(columns)]
    for name, codes in rows.items():
        cells = [codes.get(code, '').replace('|', '\\|') for code in columns]
        lines.append(f'| `{name}` | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def with_exit_code_table(text: str) -> str:
    """``text`` with the table between :data:`TABLE_START` and :data:`TABLE_END` regenerated."""
    if TABLE_START not in text or TABLE_END not in text:
        raise ExitCodeTableError(f'no lines {TABLE_START!r} ... {TABLE_END!r}; add them where '
                                 'the exit-code table goes')
    head, rest = text.split(TABLE_START + '\n', 1)
    _, tail = rest.split(TABLE_END, 1)
    return f'{head}{TABLE_START}\n{exit_code_table()}{TABLE_END}{tail}'
