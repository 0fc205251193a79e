"""A node's parameters, declared from its schema (:mod:`simops_core.parameter_schema`).

Descriptors carry the description with its unit, the range and the choices
(``ros2 param describe`` shows them) and the read-only flag, so ``ros2 param set`` on a
read-only parameter is refused by rclpy itself. A live parameter is checked by an on-set
callback (choices) and applied by a post-set callback.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter

from simops_core.command_line import ConfigError
from simops_core.parameter_schema import ParameterSpec, load_parameter_schema, make_settings

ARRAY_TYPES = {'string_array': Parameter.Type.STRING_ARRAY}

Apply = Callable[[str, Any], None]
"""Hook applying one live parameter (name, new value) to the running node."""


def descriptor(spec: ParameterSpec) -> ParameterDescriptor:
    """The ROS descriptor of ``spec``."""
    text = spec.description + (f' ({spec.unit})' if spec.unit else '')
    if spec.choices:
        text += f'; one of {", ".join(spec.choices)}'
    result = ParameterDescriptor(description=text, read_only=spec.read_only)
    if spec.range is not None and spec.type == 'int':
        result.integer_range = [IntegerRange(from_value=int(spec.range[0]),
                                             to_value=int(spec.range[1]), step=1)]
    elif spec.range is not None:
        result.floating_point_range = [FloatingPointRange(
            from_value=float(spec.range[0]), to_value=float(spec.range[1]), step=0.0)]
    return result


def declare_schema(node: Node, schema_name: str, computed: Mapping[str, Any] | None = None,
                   apply: Apply | None = None) -> Any:
    """Declare every parameter of schema ``schema_name`` on ``node``; return the settings.

    The settings object is frozen, with one attribute per parameter
    (:func:`~simops_core.parameter_schema.make_settings`).

    ``computed`` gives the defaults the schema leaves to the node. Raises
    :class:`~simops_core.command_line.ConfigError` with one line for an override of the wrong type,
    out of range, outside the choices, or without a value (``-p name:=[]``). With ``apply``,
    a ``ros2 param set`` of a live parameter is checked and then passed to ``apply``.
    """
    try:
        schema = load_parameter_schema(schema_name)
    except (OSError, ValueError) as exc:
        raise ConfigError(f'{exc}; restore config/parameters/{schema_name}.yaml') from None
    values: dict[str, Any] = {}
    for spec in schema:
        default = spec.default if spec.default is not None else (computed or {})[spec.name]
        if default == [] and spec.type in ARRAY_TYPES:
            default = ARRAY_TYPES[spec.type]
        try:
            parameter = node.declare_parameter(spec.name, default, descriptor(spec))
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            raise ConfigError(f'parameter {spec.name} is of the wrong type or out of range '
                              f'({exc}); see the parameter table in docs/interfaces.md'
                              ) from None
        if parameter.type_ is Parameter.Type.NOT_SET:
            if not isinstance(default, Parameter.Type):
                raise ConfigError(f'parameter {spec.name} has no value (an empty list has no '
                                  f'type); pass a value like {spec.default!r} or leave it out')
            values[spec.name] = []
            continue
        problem = spec.problem(parameter.value)
        if problem is not None:
            raise ConfigError(f'parameter {spec.name} is {problem}; see the parameter table '
                              'in docs/interfaces.md')
        values[spec.name] = parameter.value
    if apply is not None:
        _watch(node, {spec.name: spec for spec in schema if not spec.read_only}, apply)
    return make_settings(f'{schema_name.title()}Settings', schema, values)


def _watch(node: Node, live: dict[str, ParameterSpec], apply: Apply) -> None:
    def check(parameters: list[Parameter]) -> SetParametersResult:
        for parameter in parameters:
            spec = live.get(parameter.name)
            problem = None if spec is None else spec.problem(parameter.value)
            if problem is not None:
                return SetParametersResult(successful=False,
                                           reason=f'{parameter.name} is {problem}')
        return SetParametersResult(successful=True)

    def applied(parameters: list[Parameter]) -> None:
        for parameter in parameters:
            if parameter.name in live:
                apply(parameter.name, parameter.value)

    node.add_on_set_parameters_callback(check)
    node.add_post_set_parameters_callback(applied)
