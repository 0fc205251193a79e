"""The one checker of YAML fields: every config file's errors name the file and the field."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

from simops_core.paths import resolve_resource

T = TypeVar('T')


def is_number(value: Any) -> bool:
    """True for an int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Fields:
    """Field accessors raising ``error`` as ``<source>: field '<dotted.path>' <problem>``."""

    def __init__(self, source: str, error: type[Exception]) -> None:
        self.source = source
        self.error = error

    def fail(self, field: str, problem: str) -> NoReturn:
        """Raise the error for ``field`` (``''`` is the file's root)."""
        raise self.error(f'{self.source}: field {field or "<root>"!r} {problem}')

    def mapping(self, value: Any, field: str) -> dict[Any, Any]:
        """``value`` if it is a mapping."""
        if not isinstance(value, dict):
            self.fail(field, f'must be a mapping, got {value!r}')
        return value

    def known(self, table: dict[Any, Any], allowed: tuple[str, ...], where: str) -> None:
        """Refuse keys of ``table`` outside ``allowed``."""
        for key in table:
            if key not in allowed:
                self.fail(f'{where}.{key}' if where else str(key),
                          f'is not a known field (expected one of {", ".join(allowed)})')

    def get(self, table: dict[str, Any], key: str, kind: type, field: str | None = None
            ) -> Any:
        """``table[key]``, which must exist and be a ``kind`` (a bool only if ``kind`` is)."""
        field = field or key
        if key not in table:
            self.fail(field, 'is missing')
        value = table[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            self.fail(field, f'must be a {kind.__name__}, got {value!r}')
        return value

    def choice(self, table: dict[str, Any], key: str, choices: tuple[str, ...],
               field: str | None = None) -> str:
        """``table[key]``, which must be one of ``choices``."""
        value = self.get(table, key, str, field)
        if value not in choices:
            self.fail(field or key, f'must be one of {", ".join(choices)}, got {value!r}')
        return value

    def number(self, table: dict[str, Any], key: str, field: str | None = None,
               minimum: float = -math.inf, strict: bool = False) -> float:
        """A finite ``table[key]`` >= ``minimum`` (> when ``strict``)."""
        field = field or key
        if key not in table:
            self.fail(field, 'is missing')
        value = table[key]
        if not is_number(value) or not math.isfinite(value):
            self.fail(field, f'must be a finite number, got {value!r}')
        if value < minimum or (strict and value == minimum):
            self.fail(field, f'must be {">" if strict else ">="} {minimum:g}, got {value!r}')
        return float(value)


def read_yaml(path: str | Path, error: type[Exception], what: str,
              version: int | None = None) -> tuple[Path, Any]:
    """The resolved file and parsed YAML of config ``path`` (``what`` names it in errors).

    With ``version``, the root must be a mapping whose ``version`` field equals it.
    """
    try:
        file = resolve_resource(path)
        raw = yaml.safe_load(file.read_text())
    except (FileNotFoundError, OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        message = ' '.join(str(exc).split())
        raise error(f'cannot read {what} {path}: {message}') from None
    if version is not None and (not isinstance(raw, dict) or raw.get('version') != version):
        raise error(f'{file}: field "version" must be {version}')
    return file, raw



def named_tables(path: str | Path, error: type[Exception], what: str, key: str,
                 fields: tuple[str, ...], parse: Callable[[Fields, str, str, dict[str, Any]], T],
                 version: int = 1) -> tuple[Fields, dict[str, T]]:
    """The ``key`` section of a versioned config file, each table parsed: name → value.

    The root holds only ``version`` and ``key``; each table must be a mapping of ``fields``,
    which ``parse(check, name, where, table)`` turns into its value (``where``: the table's
    dotted path for errors). Returns the checker too, for checks across the tables.
    """
    file, raw = read_yaml(path, error, what, version=version)
    check = Fields(str(file), error)
    check.known(raw, ('version', key), '')
    out = {}
    for name, table in check.mapping(raw.get(key), key).items():
        where = f'{key}.{name}'
        check.known(check.mapping(table, where), fields, where)
        out[str(name)] = parse(check, str(name), where, table)
    return check, out
