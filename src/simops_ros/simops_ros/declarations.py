"""Parameter declarations shared by the nodes.

Descriptors carry a description and, optionally, a range (``ros2 param describe`` shows
both); one declaring loop turns every bad override into one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter


def describe(text: str, low: float | None = None, high: float | None = None,
             integer: bool = False) -> ParameterDescriptor:
    """A descriptor for ``text``, with an inclusive range [``low``, ``high``] when given."""
    descriptor = ParameterDescriptor(description=text)
    if integer and low is not None:
        descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high),
                                                 step=1)]
    elif low is not None:
        descriptor.floating_point_range = [FloatingPointRange(from_value=float(low),
                                                              to_value=float(high), step=0.0)]
    return descriptor


class ParameterError(ValueError):
    """A parameter override of the wrong type, out of its range, or without a value."""


def declare_parameters(node: Node, declarations: Sequence[tuple[str, Any, ParameterDescriptor]]
                       ) -> dict[str, Any]:
    """Declare each ``(name, default, descriptor)`` on ``node``; return the values by name.

    A default that is a ``Parameter.Type`` declares a typed parameter without a value (read
    it with ``get_parameter_or``). Raises :class:`ParameterError` with one line naming the
    parameter for an override of the wrong type or out of range, and for one without a
    value (``-p name:=[]``: an empty list has no type).
    """
    values: dict[str, Any] = {}
    for name, default, descriptor in declarations:
        try:
            parameter = node.declare_parameter(name, default, descriptor)
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            raise ParameterError(f'parameter {name} is of the wrong type or out of range '
                                 f'({exc}); see the parameter table in docs/interfaces.md'
                                 ) from None
        if parameter.type_ is Parameter.Type.NOT_SET and not isinstance(default,
                                                                         Parameter.Type):
            raise ParameterError(f'parameter {name} has no value (an empty list has no type); '
                                 f'pass a value like {default!r} or leave it out')
        values[name] = parameter.value
    return values
