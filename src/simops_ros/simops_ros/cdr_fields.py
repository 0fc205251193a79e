"""A few fields of a serialised ROS message, read without building the whole message.

rclpy turns CDR bytes into a message by building every nested message as a Python object:
a ``franka_msgs/FrankaRobotState`` (1.6 kB, about 40 nested messages) takes about 1 ms,
which a node's control tick cannot spare when all it needs is the robot mode.
:class:`FieldReader` reads the CDR encoding (OMG XCDR1, as rmw_fastrtps writes it: a
4-byte encapsulation header, then each primitive aligned to its size from the data's
start, strings and sequences as a uint32 count first) by a plan compiled once from the
message's own type description (the generated class's ``SLOT_TYPES``): it skips the
fields before the wanted ones (a run of fields without strings or sequences in one step,
its size known for each starting alignment) and decodes only those.

Wanted fields are primitives or nested messages of primitives (decoded as a ``dict``);
anything malformed raises :class:`CdrError`.
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass
from typing import Any

from rosidl_parser.definition import (
    AbstractGenericString,
    AbstractNestedType,
    AbstractSequence,
    AbstractType,
    AbstractWString,
    BasicType,
    NamespacedType,
)

ENCAPSULATION = 4   # bytes before the data: representation id and options
CDR_LE = b'\x00\x01'   # plain little-endian CDR, as rmw_fastrtps writes ROS messages
ALIGNMENTS = 8      # a fixed run's size depends on where it starts, modulo this
# rosidl's primitive names -> struct format (its size is the alignment)
FORMATS = {'boolean': '?', 'octet': 'B', 'char': 'B', 'uint8': 'B', 'int8': 'b',
           'uint16': 'H', 'int16': 'h', 'uint32': 'I', 'int32': 'i', 'uint64': 'Q',
           'int64': 'q', 'float': 'f', 'double': 'd'}
COUNT = struct.Struct('<I')


class CdrError(ValueError):
    """The bytes do not hold the message type (truncated, another type, big-endian)."""


def message_class(kind: NamespacedType) -> type:
    """The generated Python class of the nested type ``kind`` (e.g. std_msgs/Header)."""
    module = importlib.import_module('.'.join(kind.namespaces))
    return getattr(module, kind.name)


def fields(cls: type) -> list[tuple[str, AbstractType]]:
    """``cls``'s fields in wire order: (name, rosidl type)."""
    return list(zip(cls.get_fields_and_field_types(), cls.SLOT_TYPES, strict=True))


def _align(position: int, size: int) -> int:
    return position + (-position % size)


# A plan is a list of steps, each (kind, argument):
#   FIXED    (size from each start % 8,): primitives without strings or sequences
#   STRING   None: a uint32 length, then that many bytes (the terminating NUL included)
#   PRIMS    element size: a sequence of primitives
#   SEQUENCE the element's plan: a sequence of anything else
#   DECODE   (name, [(field name or None, struct format)]): a wanted field
FIXED, STRING, PRIMS, SEQUENCE, DECODE = range(5)


@dataclass
class _Run:
    """Primitives being merged into one FIXED step: their formats in order."""

    formats: list[str]

    def sizes(self) -> tuple[int, ...]:
        """The run's size (bytes) from each start position modulo :data:`ALIGNMENTS`."""
        out = []
        for start in range(ALIGNMENTS):
            position = start
            for code in self.formats:
                size = struct.calcsize(code)
                position = _align(position, size) + size
            out.append(position - start)
        return tuple(out)


def _primitives(kind: AbstractType) -> list[str] | None:
    """The struct formats of ``kind`` laid out in order, or None if it has a string/sequence."""
    if isinstance(kind, BasicType):
        return [FORMATS[kind.typename]]
    if isinstance(kind, NamespacedType):
        out: list[str] = []
        for _, inner in fields(message_class(kind)):
            found = _primitives(inner)
            if found is None:
                return None
            out += found
        return out
    if isinstance(kind, AbstractNestedType) and not isinstance(kind, AbstractSequence):
        found = _primitives(kind.value_type)   # a fixed-size array
        return None if found is None else found * kind.size
    return None


def _compile(layout: list[tuple[str, AbstractType]], wanted: set[str]) -> list[tuple]:
    """The plan of ``layout``'s fields up to the last wanted one (all when none is)."""
    plan: list[tuple] = []
    run = _Run([])

    def close() -> None:
        if run.formats:
            plan.append((FIXED, run.sizes()))
            run.formats = []

    last = max((i for i, (name, _) in enumerate(layout) if name in wanted), default=None)
    for name, kind in layout if last is None else layout[:last + 1]:
        if name in wanted:
            close()
            plan.append((DECODE, (name, _decoded(kind))))
            continue
        primitives = _primitives(kind)
        if primitives is not None:
            run.formats += primitives
            continue
        close()
        if isinstance(kind, AbstractWString):
            raise ValueError('wide strings are not supported')
        if isinstance(kind, AbstractGenericString):
            plan.append((STRING, None))
        elif isinstance(kind, NamespacedType):
            plan += _compile(fields(message_class(kind)), set())
        elif isinstance(kind, AbstractSequence):
            element = kind.value_type
            if isinstance(element, BasicType):
                plan.append((PRIMS, struct.calcsize(FORMATS[element.typename])))
            else:
                plan.append((SEQUENCE, _compile([('', element)], set())))
        else:   # a fixed-size array of something with strings or sequences
            plan += _compile([('', kind.value_type)] * kind.size, set())
    close()
    return plan


def _decoded(kind: AbstractType) -> list[tuple[str | None, struct.Struct]]:
    """How a wanted field decodes: (None, its Struct) for a primitive, (field, Struct) each."""
    if isinstance(kind, BasicType):
        return [(None, struct.Struct('<' + FORMATS[kind.typename]))]
    if isinstance(kind, NamespacedType):
        out = []
        for name, inner in fields(message_class(kind)):
            if not isinstance(inner, BasicType):
                raise ValueError(f'{kind.name}.{name} is not a primitive: not decodable here')
            out.append((name, struct.Struct('<' + FORMATS[inner.typename])))
        return out
    raise ValueError(f'a {type(kind).__name__} field is not decodable here')


class FieldReader:
    """Reads fields ``names`` of message class ``cls`` from CDR bytes; see the module."""

    def __init__(self, cls: type, names: tuple[str, ...]) -> None:
        known = [name for name, _ in fields(cls)]
        missing = [name for name in names if name not in known]
        if missing:
            raise ValueError(f'{cls.__name__} has no field {missing[0]!r}')
        self._plan = _compile(fields(cls), set(names))

    def __call__(self, data: bytes) -> dict[str, Any]:
        """The wanted fields of the message in ``data``: {name: value or {field: value}}."""
        if bytes(data[:2]) != CDR_LE:
            raise CdrError(f'not plain little-endian CDR (encapsulation '
                           f'{bytes(data[:2]).hex()})')
        view = memoryview(data)[ENCAPSULATION:]
        out: dict[str, Any] = {}
        try:
            position = _run(self._plan, view, 0, out)
        except struct.error as exc:
            raise CdrError(f'truncated or not this type: {exc}') from None
        if position > len(view):
            raise CdrError('truncated: the fields run past the end')
        return out


def _run(plan: list[tuple], view: memoryview, position: int, out: dict[str, Any]) -> int:
    """Follow ``plan`` from ``position`` in ``view``; decoded fields go into ``out``."""
    for step, argument in plan:
        if step == FIXED:
            position += argument[position % ALIGNMENTS]
        elif step == STRING:
            position = _align(position, 4)
            position += 4 + COUNT.unpack_from(view, position)[0]
        elif step == PRIMS:
            position = _align(position, 4)
            count = COUNT.unpack_from(view, position)[0]
            position += 4
            if count:
                position = _align(position, argument) + count * argument
        elif step == SEQUENCE:
            position = _align(position, 4)
            count = COUNT.unpack_from(view, position)[0]
            position += 4
            if count > len(view) - position:   # each element takes a byte at least
                raise struct.error(f'a sequence of {count} elements in {len(view)} bytes')
            for _ in range(count):
                position = _run(argument, view, position, out)
        else:   # DECODE
            name, layout = argument
            values = {}
            for field, decoder in layout:
                position = _align(position, decoder.size)
                values[field] = decoder.unpack_from(view, position)[0]
                position += decoder.size
            out[name] = values.get(None, values)
    return position
