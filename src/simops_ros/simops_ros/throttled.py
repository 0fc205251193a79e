"""Warnings throttled per kind by the ROS logger's own throttle.

rclpy throttles per logger and call site; a child logger per kind (``sim.joint_commands.
limits``) gives each kind its own throttle, so a flood of one kind of fault cannot hide
another, and the kind shows in the log line.
"""

from __future__ import annotations

import re

from rclpy.impl.rcutils_logger import RcutilsLogger

PERIOD = 1.0   # s between repeated warnings of one kind


class KindWarnings:
    """``warn(kind, text)``: a warning on ``logger``'s child ``kind``, at most once a period."""

    def __init__(self, logger: RcutilsLogger, period: float = PERIOD) -> None:
        self._logger = logger
        self._period = period
        self._children: dict[str, RcutilsLogger] = {}

    def __call__(self, kind: str, text: str) -> None:
        """Log ``text`` unless a warning of ``kind`` was logged less than a period ago."""
        child = self._children.get(kind)
        if child is None:
            name = '.'.join(part for part in re.split(r'[^A-Za-z0-9_]+', kind) if part)
            child = self._children[kind] = self._logger.get_child(name or 'warning')
        child.warning(text, throttle_duration_sec=self._period)
