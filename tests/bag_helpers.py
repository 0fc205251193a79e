"""Whole trajectories from a bag for tests: joint states, commands and poses, aligned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.bag_reader import MissingTopicsError, RawBag, message_typestore, read_bag
from simops_core.bag_series import (
    FLOAT_ARRAY,
    JOINT_STATE,
    POSE,
    TRAJECTORY,
    CommandSeries,
    JointSeries,
    command_series,
    header_stamps,
    joint_series,
)
from simops_core.topics import load_topics


@dataclass(frozen=True)
class PoseSeries:
    """Poses: ``t`` (N,) s, ``position`` (N, 3) m, ``orientation`` (N, 4) quaternion xyzw."""

    topic: str
    frame_id: str
    t: np.ndarray
    position: np.ndarray
    orientation: np.ndarray


@dataclass(frozen=True)
class Trajectory:
    """Everything a sysid or learning tool needs from one bag, each series unresampled."""

    bag: Path
    joint_states: JointSeries
    commands: CommandSeries | None
    poses: dict[str, PoseSeries]
    custom_data: dict[str, str]

    def on_joint_state_times(self) -> dict[str, np.ndarray]:
        """Everything on the joint-state time base ``t`` (N,) s.

        Keys: ``t``, ``q``, ``qd``, ``effort`` (N, J); ``command`` (N, J), the command in
        force at each sample (zero-order hold, NaN before the first), if the bag has
        commands; ``<pose topic>/position`` (N, 3) and ``/orientation`` (N, 4), linearly
        interpolated (NaN outside the pose samples; quaternions are not renormalised).
        """
        js = self.joint_states
        out = {'t': js.t, 'q': js.position, 'qd': js.velocity, 'effort': js.effort}
        if self.commands is not None:
            out['command'] = align(self.commands.t, self.commands.position, js.t, 'hold')
        for topic, pose in self.poses.items():
            out[f'{topic}/position'] = align(pose.t, pose.position, js.t)
            out[f'{topic}/orientation'] = align(pose.t, pose.orientation, js.t)
        return out


def load_trajectory(bag: str | Path, joints: Sequence[str],
                    joint_states_topic: str | None = None,
                    command_topics: Sequence[str] | None = None,
                    pose_topics: Sequence[str] | None = None) -> Trajectory:
    """Load joint states, commands and poses from a rosbag2 directory.

    ``joints`` fixes the column order (e.g. ``RobotSpec.joint_names``). Topic names default
    to ``config/topics.yaml``: joint_states; joint_commands, then joint_trajectory (the first
    one with messages); object_pose, ee_pose and goal_pose. Joint states are required: a bag
    without them raises :class:`MissingTopicsError` naming the topics it has. Commands and
    poses are optional (None / absent keys).
    """
    config = load_topics()
    js_topic = joint_states_topic or config['joint_states'].name
    cmd_topics = list(command_topics if command_topics is not None else
                      (config['joint_commands'].name, config['joint_trajectory'].name))
    pose_names = list(pose_topics if pose_topics is not None else
                      (config[k].name for k in ('object_pose', 'ee_pose', 'goal_pose')))
    raw = read_bag(bag, [js_topic, *cmd_topics, *pose_names])
    raw.require(js_topic)
    _expect_type(raw, js_topic, (JOINT_STATE,))
    store = message_typestore(raw)
    joint_states = joint_series(raw, js_topic, tuple(joints), store)
    commands = None
    for topic in cmd_topics:
        if topic in raw.topics and raw.topics[topic].count:
            _expect_type(raw, topic, (FLOAT_ARRAY, TRAJECTORY))
            commands = command_series(raw, topic, tuple(joints), store)
            break
    poses = {}
    for topic in pose_names:
        if topic in raw.topics and raw.topics[topic].count:
            _expect_type(raw, topic, (POSE,))
            poses[topic] = pose_series(raw, topic, store)
    return Trajectory(raw.path, joint_states, commands, poses, raw.custom_data)


def pose_series(raw: RawBag, topic: str, store: Any = None) -> PoseSeries:
    """PoseStamped messages of ``topic`` as arrays, sorted by stamp."""
    msgs = list(raw.decode(topic, store))
    stamps = header_stamps(msgs, raw.topics[topic].log_time)
    position = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                         for m in msgs]).reshape(-1, 3)
    orientation = np.array([[m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z,
                             m.pose.orientation.w] for m in msgs]).reshape(-1, 4)
    order = np.argsort(stamps, kind='stable')
    frame = msgs[0].header.frame_id if msgs else ''
    return PoseSeries(topic, frame, stamps[order], position[order], orientation[order])


def align(t_src: np.ndarray, values: np.ndarray, t_dst: np.ndarray,
          method: str = 'linear') -> np.ndarray:
    """Resample ``values`` (N, ...) sampled at ``t_src`` (N,) s onto ``t_dst`` (M,) s.

    ``method`` is ``linear`` (interpolation) or ``hold`` (zero-order hold: the latest sample
    at or before each target time, as a controller sees commands). Targets before the first
    sample are NaN; after the last, the last value (``hold``) or NaN (``linear``).
    """
    t_src = np.asarray(t_src, dtype=float)
    values = np.asarray(values, dtype=float)
    t_dst = np.asarray(t_dst, dtype=float)
    if t_src.ndim != 1 or values.shape[0] != t_src.size:
        raise ValueError(f'values has {values.shape[0]} rows for {t_src.size} times')
    flat = values.reshape(t_src.size, -1)
    out = np.full((t_dst.size, flat.shape[1]), np.nan)
    if t_src.size == 0:
        return out.reshape((t_dst.size, *values.shape[1:]))
    if method == 'hold':
        index = np.searchsorted(t_src, t_dst, side='right') - 1
        valid = index >= 0
        out[valid] = flat[index[valid]]
    elif method == 'linear':
        inside = (t_dst >= t_src[0]) & (t_dst <= t_src[-1])
        for col in range(flat.shape[1]):
            out[inside, col] = np.interp(t_dst[inside], t_src, flat[:, col])
    else:
        raise ValueError(f'method must be linear or hold, got {method!r}')
    return out.reshape((t_dst.size, *values.shape[1:]))


def _expect_type(raw: RawBag, topic: str, types: tuple[str, ...]) -> None:
    found = raw.topics[topic].type
    if found not in types:
        raise MissingTopicsError(raw.path, [f'{topic} as {" or ".join(types)} (it is {found})'],
                                 raw.info())
