"""Each node's parameters, declared once in ``config/parameters/<node>.yaml`` (no rclpy here).

A schema entry, in the manner of mujoco_ros2_control's parameter file::

    realtime_factor:
      type: double            # bool, int, double, string or string_array
      default_value: 1.0      # absent: the node computes it (``default_text`` says how)
      unit: sim s / wall s
      description: sim seconds per wall second; 0 = as fast as possible
      range: [0.0, 1000.0]    # inclusive, numbers only
      choices: [a, b]         # strings only
      read_only: true         # false: ``ros2 param set`` applies it to the running node

From one schema come the node's declarations (:mod:`simops_ros.declarations`), its
settings object (:func:`make_settings`) and its table in docs/interfaces.md
(:func:`markdown_table`, checked by a test).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, make_dataclass
from typing import Any

from simops_core.command_line import ConfigError
from simops_core.yaml_fields import Fields, is_number, read_yaml

SCHEMA_DIR = 'config/parameters'
TYPES: dict[str, type] = {'bool': bool, 'int': int, 'double': float, 'string': str,
                          'string_array': list}
ENTRY_KEYS = ('type', 'default_value', 'default_text', 'unit', 'description', 'range',
              'choices', 'read_only')


class SchemaError(ConfigError):
    """A parameter schema file is missing or malformed."""

    hint = 'restore the file from the repository'


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter: its type name, default (None: computed by the node) and limits."""

    name: str
    type: str
    default: Any
    description: str
    unit: str = ''
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = True
    default_text: str = ''

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not allowed, as ``<value>, outside [low, high]`` or None."""
        if self.range is not None and not (self.range[0] <= value <= self.range[1]):
            return (f'{value!r}, outside [{_number(self.range[0])}, {_number(self.range[1])}]'
                    f'{" " + self.unit if self.unit else ""}')
        if self.choices and value not in self.choices:
            return f'{value!r}, not one of {", ".join(self.choices)}'
        return None


Schema = tuple[ParameterSpec, ...]


def load_parameter_schema(node: str) -> Schema:
    """The schema of ``node`` (``sim``, ``policy``, ``recorder``, ``excite``, ``teleop``...).

    Raises :class:`SchemaError` naming the file and the field.
    """
    path, raw = read_yaml(f'{SCHEMA_DIR}/{node}.yaml', SchemaError, 'parameter schema')
    fields = Fields(str(path), SchemaError)
    return tuple(_entry(fields, name, entry)
                 for name, entry in fields.mapping(raw, '').items())


def _entry(fields: Fields, name: str, raw: Any) -> ParameterSpec:
    entry = fields.mapping(raw, name)
    fields.known(entry, ENTRY_KEYS, name)
    kind = fields.choice(entry, 'type', tuple(TYPES), f'{name}.type')
    description = fields.get(entry, 'description', str, f'{name}.description')
    default = entry.get('default_value')
    if default is None and not entry.get('default_text'):
        fields.fail(f'{name}.default_value', 'is missing (or give default_text)')
    expected = TYPES[kind]
    if default is not None and not _has_type(default, expected):
        fields.fail(f'{name}.default_value', f'must be a {kind}, got {default!r}')
    bounds = entry.get('range')
    if bounds is not None:
        if (kind not in ('int', 'double') or not isinstance(bounds, list) or len(bounds) != 2
                or not all(is_number(b) and math.isfinite(b) for b in bounds)
                or bounds[0] > bounds[1]):
            fields.fail(f'{name}.range', f'must be [low, high] for a number, got {bounds!r}')
        bounds = (bounds[0], bounds[1])
    choices = entry.get('choices', [])
    if choices and (kind != 'string' or not all(isinstance(c, str) for c in choices)):
        fields.fail(f'{name}.choices', f'must list strings for a string, got {choices!r}')
    spec = ParameterSpec(name, kind, default, description, str(entry.get('unit', '')),
                         bounds, tuple(choices), bool(entry.get('read_only', True)),
                         str(entry.get('default_text', '')))
    if default is not None and spec.problem(default) is not None:
        fields.fail(f'{name}.default_value', str(spec.problem(default)))
    return spec


def _has_type(value: Any, expected: type) -> bool:
    if expected is float:
        return is_number(value)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, expected)


def make_settings(name: str, schema: Schema, values: Mapping[str, Any]) -> Any:
    """A frozen settings object of class ``name`` with one attribute per schema entry."""
    cls = make_dataclass(name, [(p.name, TYPES[p.type]) for p in schema], frozen=True)
    return cls(**{p.name: float(values[p.name]) if p.type == 'double' else values[p.name]
                  for p in schema})


def defaults(schema: Schema) -> dict[str, Any]:
    """The schema's default values by name (computed defaults left out)."""
    return {p.name: p.default for p in schema if p.default is not None}


def markdown_table(schema: Schema) -> str:
    """The node's parameter table for docs/interfaces.md (GitHub-flavoured Markdown)."""
    rows = ['| parameter | type | default | unit | range | set at run time | meaning |',
            '|---|---|---|---|---|---|---|']
    for p in schema:
        default = p.default_text or _literal(p.default)
        limits = (f'{_number(p.range[0])} – {_number(p.range[1])}' if p.range is not None
                  else ', '.join(f'`{c}`' for c in p.choices))
        rows.append(f'| `{p.name}` | {p.type} | {default} | {p.unit} | {limits} | '
                    f'{"no" if p.read_only else "yes"} | {p.description} |')
    return '\n'.join(rows) + '\n'


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) else f'{value:g}'


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return f'`{str(value).lower()}`'
    if isinstance(value, str):
        return f'`{value}`' if value else "`''`"
    if isinstance(value, list):
        return f'`{value}`'
    return f'`{value!r}`'


NODES = ('sim', 'policy', 'recorder', 'excite', 'arm_setup', 'teleop')
TABLE_END = '<!-- end of generated table -->'


def table_start(node: str) -> str:
    """The marker line that opens ``node``'s generated table in a Markdown file."""
    return f'<!-- parameters of {node}: generated from {SCHEMA_DIR}/{node}.yaml -->'


def with_tables(text: str) -> str:
    """``text`` with every marked parameter table regenerated from its schema.

    A table sits between :func:`table_start` and :data:`TABLE_END` lines; ``make docs``
    writes docs/interfaces.md through this, and a test checks the file is unchanged by it.
    """
    for node in NODES:
        start = table_start(node)
        if start not in text:
            raise SchemaError(f'no line {start!r}; add it and {TABLE_END!r} where the table goes')
        head, rest = text.split(start + '\n', 1)
        _, tail = rest.split(TABLE_END, 1)
        text = f'{head}{start}\n{markdown_table(load_parameter_schema(node))}{TABLE_END}{tail}'
    return text
