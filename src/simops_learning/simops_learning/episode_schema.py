"""The one frame schema of SimOps datasets, derived from a policy card (no rclpy).

Recorded episodes (``simops-dataset export``) and simulated ones (``simops-rollout``) both
become :class:`EpisodeFrames` with these columns, so one policy trains on either. Every
value feature is float64 (commands and states bit for bit as sent and measured), in the
robot's base frame and SI units, named entry by entry in the card's order:

- ``observation.state``: the card's ``joint_position`` fields (rad), then ``gripper``
  (width, m) when the card observes the gripper width;
- ``observation.velocity``: the card's ``joint_velocity`` fields (rad/s), when it has them;
- ``observation.object_position``, ``observation.object_quaternion`` (x, y, z, w),
  ``observation.goal_position`` (m): the card's pose terms, when it has them;
- ``action``: the commanded position targets of the card's action joints (rad), then the
  gripper width target (m) when the card's action has a gripper: on ``/joint_commands``
  with the targets, or on ``/simops/gripper_command`` where SimOps sent it to
  franka_gripper's actions beside a trajectory; NaN where the arm was sent none;
- ``policy.action``: the policy's raw output in the card's action units, NaN when the
  episode has none (an excitation);
- ``operator.twist``: the operator's twist (m/s then rad/s, base frame) the teleop node
  acted on, NaN when the episode has none (a policy's, an excitation);
- ``source.<input>.stamp`` / ``.received`` (s): the header stamp and receive time of the
  message each frame's input came from (NaN where it has none); ``source.command.effective``
  (s): when the frame's command took effect on the arm;
- ``observation.images.<camera>``: a camera's colour stream, LeRobot ``video`` features
  (``videos/<key>/chunk-000/file-NNN.mp4``), one image per frame (the newest stamped at or
  before it), whose provenance is ``source.images.<camera>.*``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simops_core.policy_card import POSE_FIELDS, PolicyCard
from simops_core.robot_spec import gripper_width

GRIPPER = 'gripper'
INDEX_COLUMNS = ('timestamp', 'frame_index', 'episode_index', 'index', 'task_index')
INDEX_DTYPES = {'timestamp': 'float32', 'frame_index': 'int64', 'episode_index': 'int64',
                'index': 'int64', 'task_index': 'int64'}
POSE_FEATURES = {'object_position': 'observation.object_position',
                 'object_quaternion': 'observation.object_quaternion',
                 'goal_position': 'observation.goal_position'}
TWIST_FIELDS = ('vx', 'vy', 'vz', 'wx', 'wy', 'wz')   # m/s, rad/s, base frame
POSE_TOPICS = {'object_position': 'object_pose', 'object_quaternion': 'object_pose',
               'goal_position': 'goal_pose'}


@dataclass(frozen=True)
class Feature:
    """One float64 column: ``key`` and the names of its (len(names),) entries."""

    key: str
    names: tuple[str, ...]

    def info(self) -> dict[str, Any]:
        """The feature's entry in LeRobot's ``meta/info.json``."""
        return {'dtype': 'float64', 'shape': [len(self.names)], 'names': list(self.names)}


@dataclass(frozen=True)
class VideoFeature:
    """A camera's colour stream: feature ``key``, ``camera`` name, image size (pixels)."""

    key: str
    camera: str
    width: int
    height: int

    @property
    def input(self) -> str:
        """Its name among a schema's inputs (``images.<camera>``)."""
        return f'images.{self.camera}'

    def info(self, fps: float, codec: str, pix_fmt: str) -> dict[str, Any]:
        """The feature's entry in LeRobot's ``meta/info.json``."""
        return {'dtype': 'video', 'shape': [self.height, self.width, 3],
                'names': ['height', 'width', 'channels'],
                'info': {'video.height': self.height, 'video.width': self.width,
                         'video.codec': codec, 'video.pix_fmt': pix_fmt,
                         'video.is_depth_map': False, 'video.fps': fps,
                         'video.channels': 3, 'has_audio': False}}


@dataclass(frozen=True)
class Schema:
    """The features of one card: values first, then the ``source.*`` provenance columns.

    ``joints`` are the card's ``joint_position`` fields, ``velocity_joints`` its
    ``joint_velocity`` fields, ``gripper_width`` whether it observes the gripper width,
    ``poses`` the pose terms it has (source -> fields), ``inputs`` the inputs a frame records
    provenance for (``joint_states``, ``command``, ``policy_action``, ``operator_twist``,
    ``gripper_command``, and ``object_pose`` / ``goal_pose`` as the pose terms need them).
    """

    robot: str
    joints: tuple[str, ...]
    velocity_joints: tuple[str, ...]
    gripper_width: bool
    poses: dict[str, tuple[str, ...]]
    action: tuple[str, ...]
    inputs: tuple[str, ...]
    features: tuple[Feature, ...] = field(default=())
    videos: tuple[VideoFeature, ...] = field(default=())

    def info_features(self) -> dict[str, dict[str, Any]]:
        """The whole ``features`` mapping of ``meta/info.json``, index columns included."""
        out = {key: {'dtype': INDEX_DTYPES[key], 'shape': [1], 'names': None}
               for key in INDEX_COLUMNS}
        out.update({f.key: f.info() for f in self.features})
        return out


def card_schema(card: PolicyCard, cameras: tuple[tuple[str, int, int], ...] = ()) -> Schema:
    """The dataset schema of episodes for ``card``; see the module docstring.

    ``cameras``: (name, width, height) of each camera whose colour stream is exported.
    """
    sources = {term.source: term.fields for term in card.terms}
    joints = sources.get('joint_position', card.action.joints)
    velocity = sources.get('joint_velocity', ())
    gripper = 'gripper_width' in sources
    poses = {name: sources[name] for name in POSE_FIELDS if name != 'gripper_width'
             and name in sources}
    features = [Feature('observation.state', (*joints, *((GRIPPER,) if gripper else ())))]
    if velocity:
        features.append(Feature('observation.velocity', velocity))
    features += [Feature(POSE_FEATURES[name], fields) for name, fields in poses.items()]
    features += [Feature('action', card.action.fields),
                 Feature('policy.action', card.action.fields),
                 Feature('operator.twist', TWIST_FIELDS)]
    pose_inputs = tuple(dict.fromkeys(POSE_TOPICS[name] for name in poses))
    videos = tuple(VideoFeature(f'observation.images.{name}', name, width, height)
                   for name, width, height in cameras)
    inputs = ('joint_states', 'command', 'policy_action', 'operator_twist', 'gripper_command',
              *pose_inputs, *(video.input for video in videos))
    for name in inputs:
        features += [Feature(f'source.{name}.stamp', ('s',)),
                     Feature(f'source.{name}.received', ('s',))]
    features.append(Feature('source.command.effective', ('s',)))
    return Schema(card.robot, tuple(joints), tuple(velocity), gripper, poses,
                  card.action.fields, inputs, tuple(features), videos)


@dataclass
class EpisodeFrames:
    """One episode's frames and what is known about it.

    ``columns`` maps each schema feature key to an (n, len(names)) float64 array;
    ``timestamp`` (n,) s from the episode's first frame (on the fps grid: a dropped frame
    leaves its gap); ``task`` the task text; ``meta`` the episode table's extra columns
    (success, outcome, notes, label, provenance; str, bool, int or float values);
    ``report`` the alignment figures (frames dropped per input, worst input ages);
    ``videos`` each video feature's images, one per frame, in frame order.
    """

    timestamp: np.ndarray
    columns: dict[str, np.ndarray]
    task: str
    meta: dict[str, Any]
    report: dict[str, Any]
    videos: dict[str, Callable[[], Iterator[np.ndarray]]] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Frames in the episode."""
        return int(self.timestamp.size)


def empty_columns(schema: Schema, n: int) -> dict[str, np.ndarray]:
    """Every feature of ``schema`` as an (n, width) float64 array of NaN."""
    return {f.key: np.full((n, len(f.names)), np.nan) for f in schema.features}


def write_joint_states(columns: dict[str, np.ndarray], schema: Schema, names: Sequence[str],
                       fingers: Sequence[str], position: np.ndarray,
                       velocity: np.ndarray | None = None) -> None:
    """Write the joint-state features from joint positions and velocities.

    ``position`` and ``velocity`` (n, len(names)), their columns the joints ``names`` (rad,
    rad/s; finger joints m, m/s). ``observation.state`` takes the card's joints, then the
    gripper width of the ``fingers`` joints; ``observation.velocity`` the card's velocity
    joints.
    """
    arm = len(schema.joints)
    state = columns['observation.state']
    state[:, :arm] = position[:, [names.index(j) for j in schema.joints]]
    if schema.gripper_width:
        state[:, arm] = gripper_width(position[:, [names.index(j) for j in fingers]])
    if schema.velocity_joints and velocity is not None:
        columns['observation.velocity'][:] = velocity[
            :, [names.index(j) for j in schema.velocity_joints]]


def write_pose(columns: dict[str, np.ndarray], schema: Schema, topic: str,
               pose: np.ndarray) -> None:
    """Write ``topic``'s poses (n, 7) into the pose features that read that topic.

    ``pose``: position (m) then quaternion x, y, z, w, base frame; ``object_pose`` feeds the
    object position and quaternion, ``goal_pose`` the goal position.
    """
    offsets = {'object_position': 0, 'object_quaternion': 3, 'goal_position': 0}
    axes = ('x', 'y', 'z', 'w')
    for source, fields in schema.poses.items():
        if POSE_TOPICS[source] == topic:
            columns[f'observation.{source}'][:] = pose[:, [offsets[source] + axes.index(f)
                                                           for f in fields]]
