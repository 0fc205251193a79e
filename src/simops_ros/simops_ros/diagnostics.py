"""One ``diagnostic_msgs/DiagnosticArray`` from a level name, a message and plain values."""

from __future__ import annotations

from collections.abc import Mapping

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from simops_core.stamps import split_nanoseconds

LEVELS = {'ok': DiagnosticStatus.OK, 'warn': DiagnosticStatus.WARN,
          'error': DiagnosticStatus.ERROR}


def status_name(node: Node, task: str) -> str:
    """``'<node>: <task>'``, the node with its namespace (``left/policy: control loop``).

    Nodes of one name in two namespaces (``fr3_duo``'s policies) report apart.
    """
    return f'{node.get_fully_qualified_name().lstrip("/")}: {task}'


def diagnostic_array(name: str, hardware_id: str, level: str, message: str,
                     values: Mapping[str, object], stamp_ns: int, digits: int = 6
                     ) -> DiagnosticArray:
    """A one-status array stamped ``stamp_ns``; floats keep ``digits`` significant digits."""
    status = DiagnosticStatus(
        level=LEVELS[level], name=name, hardware_id=hardware_id, message=message,
        values=[KeyValue(key=k, value=f'{v:.{digits}g}' if isinstance(v, float) else str(v))
                for k, v in values.items()])
    msg = DiagnosticArray(status=[status])
    sec, nanosec = split_nanoseconds(stamp_ns)
    msg.header.stamp = Time(sec=sec, nanosec=nanosec)
    return msg
