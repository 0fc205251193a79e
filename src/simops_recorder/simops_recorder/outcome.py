"""Success labels from recorded poses, by the envs' criteria (no rclpy).

In simulation the recorder labels an episode nobody labelled through ``~/episode_info``:

- ``reach``: the flange (``ee_pose``) came within ``radius`` of the goal (``goal_pose``);
- ``pick_place``: the object (``object_pose``) came within ``radius`` of the goal.

As in ``SimOps/FR3Reach-v0`` and ``SimOps/FR3PickPlace-v0``, which end an episode at its
first success, the closest approach counts. Poses are ``geometry_msgs/PoseStamped`` in the
robot's base frame (m); CDR bytes are decoded with the ``rosbags`` typestore.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simops_core.tasks import TASKS

POSE_TYPE = 'geometry_msgs/msg/PoseStamped'


@dataclass
class OutcomeJudge:
    """Tracks the closest approach of the ``tracked`` topic's pose to the ``goal`` topic's.

    ``criterion``: a task name (:mod:`simops_core.tasks`, whose ``tracked`` pose is judged);
    ``radius`` m; ``typestore``: a ``rosbags`` typestore that knows ``PoseStamped``.
    """

    criterion: str
    radius: float
    goal: str
    tracked: str
    typestore: Any
    _goal: np.ndarray | None = None
    _closest: float = float('inf')
    _decoded: int = 0

    def start(self) -> None:
        """A new episode: forget the closest approach (the goal stays: it is latched)."""
        self._closest, self._decoded = float('inf'), 0

    def observe(self, topic: str, data: bytes) -> None:
        """A message of any recorded topic (CDR bytes); poses of the two topics count."""
        if topic not in (self.goal, self.tracked):
            return
        try:
            position = self.typestore.deserialize_cdr(data, POSE_TYPE).pose.position
        except Exception:
            return
        point = np.array([position.x, position.y, position.z])
        if not np.all(np.isfinite(point)):
            return
        if topic == self.goal:
            self._goal = point
        elif self._goal is not None:
            self._decoded += 1
            self._closest = min(self._closest, float(np.linalg.norm(point - self._goal)))

    def verdict(self) -> tuple[bool, str] | None:
        """(success, note) for the episode so far, or None without a goal and a pose."""
        if self._goal is None or not self._decoded:
            return None
        what = TASKS[self.criterion].tracked_thing
        success = self._closest < self.radius
        return success, (f'auto-labelled ({self.criterion}): the {what} came within '
                         f'{1000 * self._closest:.1f} mm of the goal (success below '
                         f'{1000 * self.radius:.0f} mm)')
