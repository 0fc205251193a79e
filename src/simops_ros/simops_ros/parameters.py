"""Parameter descriptors with a description and, optionally, a range (shown by ros2 param)."""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor


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
