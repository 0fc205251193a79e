"""Robot trajectories from rosbag2 bags as numpy arrays, keyed by joint name.

:func:`joint_series` and :func:`command_series` turn a topic of a bag read by
:mod:`simops_core.bag_reader` into arrays with their own time base. Times are seconds since
the epoch (float64) from the message header stamps; messages without a header
(``Float64MultiArray``) and zero stamps use the bag's receive time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simops_core.bag_reader import MissingTopicsError, RawBag
from simops_core.stamps import to_seconds

JOINT_STATE = 'sensor_msgs/msg/JointState'
FLOAT_ARRAY = 'std_msgs/msg/Float64MultiArray'
TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory'
POSE = 'geometry_msgs/msg/PoseStamped'
TWIST = 'geometry_msgs/msg/TwistStamped'


@dataclass(frozen=True)
class JointSeries:
    """Joint samples in a fixed joint order.

    ``t``: (N,) s, increasing. ``position``/``velocity``/``effort``: (N, J) in rad, rad/s,
    N*m (m, m/s, N for prismatic joints), NaN where a message lacked the joint or field.
    """

    joints: tuple[str, ...]
    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class CommandSeries:
    """Position targets sent to the arm: ``t`` (N,) s and ``position`` (N, J) rad.

    ``source`` is the topic they came from; joints a command did not set are NaN.
    """

    source: str
    joints: tuple[str, ...]
    t: np.ndarray
    position: np.ndarray


def joint_series(raw: RawBag, topic: str, joints: tuple[str, ...], store: Any = None,
                 msgs: list[Any] | None = None) -> JointSeries:
    """JointState messages of ``topic`` as arrays in ``joints`` order, sorted by stamp.

    ``msgs``: the topic's messages, already decoded (``list(raw.decode(topic, store))``), for
    a caller that reads them too; decoded here when None.
    """
    msgs = list(raw.decode(topic, store)) if msgs is None else msgs
    stamps = header_stamps(msgs, raw.topics[topic].log_time)
    shape = (len(msgs), len(joints))
    arrays = {key: np.full(shape, np.nan) for key in ('position', 'velocity', 'effort')}
    column = {name: i for i, name in enumerate(joints)}
    groups: dict[tuple[Any, ...], list[int]] = {}
    for row, msg in enumerate(msgs):   # messages alike in names and lengths fill together
        key = (tuple(msg.name), len(msg.position), len(msg.velocity), len(msg.effort))
        groups.setdefault(key, []).append(row)
    for (names, *lengths), rows in groups.items():
        cols = np.array([column.get(name, -1) for name in names], dtype=int)
        for (key, array), length in zip(arrays.items(), lengths, strict=True):
            used = cols[:length]   # a name without a value, or a value without a name: unset
            keep = used >= 0
            if keep.any():
                values = np.array([getattr(msgs[row], key)[:used.size] for row in rows],
                                  dtype=float).reshape(len(rows), used.size)
                array[np.ix_(rows, used[keep])] = values[:, keep]
    if not any(name in column for msg in msgs[:1] for name in msg.name):
        raise MissingTopicsError(raw.path, [f'{topic} joints {list(joints)}'], raw.info())
    order = np.argsort(stamps, kind='stable')
    return JointSeries(joints, stamps[order], *(arrays[k][order]
                                                 for k in ('position', 'velocity', 'effort')))


def command_series(raw: RawBag, topic: str, joints: tuple[str, ...],
                   store: Any = None) -> CommandSeries:
    """Commands as position targets in ``joints`` order, sorted by time.

    Float64MultiArray holds targets in ``joints`` order (shorter arrays leave the remaining
    joints NaN). JointTrajectory contributes its first point, mapped by ``joint_names``.
    """
    msgs = list(raw.decode(topic, store))
    log_time = raw.topics[topic].log_time
    position = np.full((len(msgs), len(joints)), np.nan)
    if raw.topics[topic].type == TRAJECTORY:
        stamps = header_stamps(msgs, log_time)
        column = {name: i for i, name in enumerate(joints)}
        for row, msg in enumerate(msgs):
            if msg.points:
                for name, value in zip(msg.joint_names, msg.points[0].positions, strict=False):
                    if name in column:
                        position[row, column[name]] = value
    else:
        stamps = np.asarray(log_time, dtype=np.int64) * 1e-9
        for row, msg in enumerate(msgs):
            values = np.asarray(msg.data, dtype=float)[:len(joints)]
            position[row, :values.size] = values
    order = np.argsort(stamps, kind='stable')
    return CommandSeries(topic, joints, stamps[order], position[order])


def header_stamps(msgs: list[Any], log_time: list[int]) -> np.ndarray:
    """Header stamps in s; the receive time where a stamp is zero."""
    stamps = np.array([to_seconds(m.header.stamp) for m in msgs])
    fallback = np.asarray(log_time, dtype=np.int64) * 1e-9
    return np.where(stamps > 0, stamps, fallback) if msgs else fallback
