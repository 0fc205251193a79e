"""Observation vectors exactly as a policy card lays them out (shared by the node and the env).

:class:`ObservationBuilder` turns raw robot and scene values into the model's input: each
frame is the card's terms in order, and ``history`` frames are stacked oldest first (or
newest first, as the card says). All buffers are allocated once; ``build`` writes into them.

:class:`ImageBuilder` turns camera images (rgb8) into the model's image inputs, as the
card's image terms lay them out.

:class:`JointIndex` picks a robot's joints out of a name-tagged state (a /joint_states
message's name and position lists) in any order, ignoring extra joints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simops_core.policy_card import JOINT_SOURCES, POSE_FIELDS, ImageTerm, PolicyCard
from simops_core.robot_spec import gripper_width

POSITION_AXES = ('x', 'y', 'z')
QUATERNION_AXES = ('x', 'y', 'z', 'w')


class MissingJointError(KeyError):
    """A name-tagged state lacks a joint the robot needs."""


@dataclass
class RobotObservation:
    """Raw values for one observation frame. Frames: robot base frame; units SI.

    ``joint_position`` (rad, fingers in m) and ``joint_velocity`` (rad/s, m/s) have shape
    (len(joint_names),) in the builder's ``joint_names`` order (arm joints, then fingers).
    ``object_position`` (3,) m, ``object_quaternion`` (4,) x, y, z, w, ``goal_position`` (3,)
    m, ``last_action`` (action size,) the previous clipped action (zeros after a reset).
    """

    joint_position: np.ndarray
    joint_velocity: np.ndarray
    object_position: np.ndarray
    object_quaternion: np.ndarray
    goal_position: np.ndarray
    last_action: np.ndarray


class ObservationBuilder:
    """Builds the card's observation vector, shape (card.observation_size,), float32.

    ``joint_names`` is the order of :attr:`RobotObservation.joint_position` (a robot spec's
    ``joint_names``: arm joints, then the two finger joints whose sum is the gripper width).
    """

    def __init__(self, card: PolicyCard, joint_names: Sequence[str],
                 finger_joints: Sequence[str]) -> None:
        self.card = card
        self.joint_names = tuple(joint_names)
        n = len(self.joint_names)
        # Layout of the flat raw vector the terms gather from.
        starts = {'joint_position': 0, 'joint_velocity': n, 'gripper_width': 2 * n,
                  'object_position': 2 * n + 1, 'object_quaternion': 2 * n + 4,
                  'goal_position': 2 * n + 8, 'last_action': 2 * n + 11}
        self._raw = np.zeros(2 * n + 11 + card.action.size)
        self._fingers = [self.joint_names.index(name) for name in finger_joints]
        index, offset, scale, low, high = [], [], [], [], []
        for term in card.terms:
            names = (self.joint_names if term.source in JOINT_SOURCES else
                     card.action.fields if term.source == 'last_action' else
                     POSE_FIELDS[term.source])
            index += [starts[term.source] + names.index(name) for name in term.fields]
            offset += list(term.offset)
            scale += list(term.scale)
            low += [term.clip[0]] * len(term.fields)
            high += [term.clip[1]] * len(term.fields)
        self.sources = frozenset(term.source for term in card.terms)
        self._index = np.asarray(index, dtype=np.intp)
        self._offset = np.asarray(offset)
        self._scale = np.asarray(scale)
        self._low = np.asarray(low)
        self._high = np.asarray(high)
        self._frame = np.zeros(card.frame_size)
        history = card.history
        self._history = np.zeros((history, card.frame_size), dtype=np.float32)
        self._newest = history - 1
        self._out = np.zeros(card.observation_size, dtype=np.float32)
        self._slots = self._out.reshape(history, card.frame_size)  # a view of _out
        # Ring rows in output order, for each position of the newest frame in the ring.
        step = -1 if card.history_order == 'newest_first' else 1
        self._orders = [((newest + 1 + np.arange(history)) % history)[::step]
                        for newest in range(history)]
        self.images = ImageBuilder(card.images)

    @property
    def size(self) -> int:
        """Length of the observation vector."""
        return self._out.size

    def reset(self, raw: RobotObservation) -> np.ndarray:
        """Fill every history frame with ``raw`` (episode start) and return the observation."""
        self._history[:] = self._frame_from(raw)
        self._newest = self.card.history - 1
        return self._stack()

    def build(self, raw: RobotObservation) -> np.ndarray:
        """Push the frame for ``raw`` into the history and return the observation.

        The returned array is the builder's own buffer, overwritten by the next call.
        """
        self._newest = (self._newest + 1) % self.card.history
        self._history[self._newest] = self._frame_from(raw)
        return self._stack()

    def _frame_from(self, raw: RobotObservation) -> np.ndarray:
        n = len(self.joint_names)
        flat = self._raw
        flat[:n] = raw.joint_position
        flat[n:2 * n] = raw.joint_velocity
        flat[2 * n] = gripper_width(raw.joint_position[self._fingers])
        flat[2 * n + 1:2 * n + 4] = raw.object_position
        flat[2 * n + 4:2 * n + 8] = raw.object_quaternion
        flat[2 * n + 8:2 * n + 11] = raw.goal_position
        flat[2 * n + 11:] = raw.last_action
        frame = self._frame
        np.take(flat, self._index, out=frame)
        frame -= self._offset
        frame *= self._scale
        np.clip(frame, self._low, self._high, out=frame)
        return frame

    def _stack(self) -> np.ndarray:
        np.take(self._history, self._orders[self._newest], axis=0, out=self._slots)
        return self._out


class ImageBuilder:
    """Each image term's model input: ``inputs[i]`` (3, height, width) float32, R, G, B.

    An image of any size is resized to the term's: by the mean of each block of pixels when
    the sizes divide, else by the pixel nearest each output pixel's centre; then
    ``(pixel / 255 - mean) / std`` per channel. Buffers are allocated once.
    """

    def __init__(self, terms: Sequence[ImageTerm]) -> None:
        self.terms = tuple(terms)
        self.inputs = [np.zeros((3, t.height, t.width), dtype=np.float32) for t in terms]
        self._scale = [(1.0 / (255.0 * np.asarray(t.std))).astype(np.float32)[:, None, None]
                       for t in terms]
        self._shift = [(np.asarray(t.mean) / np.asarray(t.std)).astype(np.float32)[:, None, None]
                       for t in terms]

    def set(self, index: int, pixels: np.ndarray) -> np.ndarray:
        """Write term ``index``'s input from ``pixels`` (H, W, 3) uint8; return it."""
        term, out = self.terms[index], self.inputs[index]
        height, width = pixels.shape[:2]
        if height % term.height == 0 and width % term.width == 0:
            fy, fx = height // term.height, width // term.width
            small = pixels.reshape(term.height, fy, term.width, fx, 3).mean(axis=(1, 3))
        else:
            rows = ((np.arange(term.height) + 0.5) * height / term.height).astype(np.intp)
            cols = ((np.arange(term.width) + 0.5) * width / term.width).astype(np.intp)
            small = pixels[rows[:, None], cols[None, :]]
        out[:] = np.moveaxis(small, -1, 0)
        out *= self._scale[index]
        out -= self._shift[index]
        return out


class JointIndex:
    """Reorders name-tagged joint values into a fixed joint order.

    The permutation is cached per distinct name list, so a publisher that keeps its order
    (the usual case) costs one tuple comparison per message.
    """

    def __init__(self, joint_names: Sequence[str]) -> None:
        self.joint_names = tuple(joint_names)
        self._names: tuple[str, ...] | None = None
        self._order: list[int] = []
        self._last = -1

    def select(self, names: Sequence[str], values: Sequence[float],
               out: np.ndarray) -> np.ndarray:
        """Write ``values`` of this index's joints into ``out`` (shape (len(joint_names),)).

        Raises :class:`MissingJointError` naming a joint absent from ``names`` or without a
        value (``values`` shorter than ``names``).
        """
        names = tuple(names)
        if names != self._names:
            where = {name: i for i, name in enumerate(names)}
            missing = [name for name in self.joint_names if name not in where]
            if missing:
                raise MissingJointError(missing[0])
            self._order = [where[name] for name in self.joint_names]
            self._last = max(self._order)
            self._names = names
        if self._last >= len(values):
            short = next(i for i in self._order if i >= len(values))
            raise MissingJointError(names[short])
        for slot, i in enumerate(self._order):
            out[slot] = values[i]
        return out
