"""Pick-and-place decisions labelled from LeRobot datasets, for behaviour cloning (no rclpy).

A SimOps dataset (:mod:`simops_learning.episode_schema`), read through LeRobot's own loader,
gives each frame what :class:`~simops_learning.pick_network.PickPolicy`'s network reads
(q, cube pose, goal, gripper opening) and what the arm was asked to do. Labels, per frame,
from the first source the frame has:

- **the move**: the operator's twist (``operator.twist``, base frame; a teleoperated
  demonstration) labels the network's decision directly: its linear part times the control
  period is the grasp point's step, in ``MOVE_UNIT``. Else the joint deltas the arm was
  sent, in action units: the policy's own output (``policy.action``), or how far the
  commanded targets (``action``) moved since the frame before (targets are relative to the
  last command); these are learnt through the task-space law, since the law saturates and a
  saturated step does not say the decision behind it. Else none (the move is not learnt);
- **gripper**: the policy's own command (``policy.action``); else the commanded width
  (``action``): the way it moves since the frame before (the policy and the teleop node send
  it through the safety pipeline, which moves it no faster than the hand), open above the
  middle of the hand's range while it rests; else the direction the fingers move over the
  next ``LOOKAHEAD`` s, held while they rest (a hand driven through franka_gripper's actions
  by a client other than SimOps' nodes, which put the width on ``/simops/gripper_command``,
  shows only in its measured opening); open at first.

Episodes whose metadata says they failed are left out; episodes of unknown outcome are kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_learning.episode_schema import GRIPPER
from simops_learning.lerobot_reader import DatasetError, dataset_sha256, open_dataset
from simops_learning.pick_network import MOVE_UNIT, TaskSpaceLaw

LOOKAHEAD = 0.2            # s of finger motion that reveals a gripper command
FINGER_MOTION = 5e-4       # m of opening change over LOOKAHEAD that counts as moving
WIDTH_MOTION = 1e-6        # m of commanded width change between frames that counts as moving
RAW_FEATURES = ('observation.state', 'observation.object_position',
                'observation.object_quaternion', 'observation.goal_position')


@dataclass
class Demonstrations:
    """One dataset's labelled frames and what identifies it.

    ``raw`` (N, 18) float32: q (7) rad, cube centre (3) m, its quaternion x-y-z-w (4), goal
    (3) m, gripper opening (1) m per frame; ``decisions`` (N, 4) float32, the network's
    step (from a twist) and gripper command, NaN where a frame has no label for that entry;
    ``arm`` (N, 7) float32, the joint deltas in action units the frame's step was commanded
    as where it came from targets or the policy's output (learnt through the task-space
    law), else NaN; ``entry`` the card's record of the dataset (path, sha256,
    episodes and frames used, by source); ``twist`` (N,) bool, the frames whose step label
    is an operator's twist (which the teleop node capped), None for none.
    """

    raw: np.ndarray
    decisions: np.ndarray
    arm: np.ndarray
    entry: dict[str, Any]
    twist: np.ndarray | None = None


def read_demonstrations(root: Path, spec: RobotSpec, law: TaskSpaceLaw, period: float,
                        cache: Path | None = None) -> Demonstrations:
    """The labelled frames of the dataset ``root`` for ``spec``'s arm; see the module doc.

    ``law``: the policy's task-space law (its grasp point); ``period``: the control period
    (s). Raises :class:`DatasetError` on a dataset that lacks the pick-and-place features.
    """
    dataset = open_dataset(root, cache)
    features = dataset.meta.features
    arm = list(spec.arm_joints)
    state_names = list(features.get('observation.state', {}).get('names') or [])
    missing = [key for key in RAW_FEATURES if key not in features]
    if missing or state_names != [*arm, GRIPPER]:
        raise DatasetError(f'{root}: not a pick-and-place dataset of {spec.name} (needs '
                           f'{", ".join(RAW_FEATURES)} with observation.state {arm} + '
                           f'{GRIPPER}; export it with the pick_place card)')
    columns = dataset.hf_dataset.with_format('numpy')
    def column(key: str) -> np.ndarray:
        return np.asarray(np.stack(columns[key]), dtype=float)
    raw = np.concatenate([column(key) for key in RAW_FEATURES], axis=1)
    raw = np.concatenate([raw[:, :7], raw[:, 8:], raw[:, 7:8]], axis=1)   # opening last
    action = column('action') if 'action' in features else np.full((len(raw), 0), np.nan)
    twist = column('operator.twist') if 'operator.twist' in features else None
    policy = column('policy.action') if 'policy.action' in features else None
    episode = np.asarray(columns['episode_index'], dtype=int)
    table = dataset.meta.episodes
    outcome = {int(i): bool(s) or not bool(k) for i, s, k in zip(
        table['episode_index'], table['success'], table['success_known'], strict=True)} \
        if 'success' in table.column_names else {}
    keep = np.array([outcome.get(int(e), True) for e in episode], dtype=bool)
    step = twist_steps(twist, len(raw), period)
    gripper = gripper_commands(raw[:, 17], action, policy, episode, spec, dataset.fps)
    decisions = np.concatenate([step / MOVE_UNIT, gripper[:, None]], axis=1)
    arm = commanded_deltas(raw, action, policy, episode, law.scale, period, dataset.fps)
    arm[_finite(step)] = np.nan   # an operator's frame is learnt from the twist
    kept = sorted({int(e) for e in episode[keep]})
    entry = {'path': str(root), 'sha256': dataset_sha256(root),
             'episodes': len(kept), 'episodes_failed_left_out': len(outcome) - len(kept)
             if outcome else 0, 'frames': int(keep.sum()),
             'frames_from_twist': int((keep & _finite(twist)).sum()) if twist is not None
             else 0}
    return Demonstrations(raw[keep].astype(np.float32), decisions[keep].astype(np.float32),
                          arm[keep].astype(np.float32), entry, _finite(step)[keep])


def _finite(values: np.ndarray | None) -> np.ndarray:
    return np.all(np.isfinite(values), axis=1)


def twist_steps(twist: np.ndarray | None, n: int, period: float) -> np.ndarray:
    """Grasp-point steps (N, 3) m per control period from the operator's twist, else NaN."""
    out = np.full((n, 3), np.nan)
    if twist is not None:
        operated = _finite(twist)
        out[operated] = twist[operated, :3] * period
    return out


def commanded_deltas(raw: np.ndarray, action: np.ndarray, policy: np.ndarray | None,
                 episode: np.ndarray, scale: float, period: float, fps: float) -> np.ndarray:
    """Joint deltas (N, 7) in action units: the policy's output, else the targets', else NaN.

    The targets' delta is from the frame before's targets (the measured joints on an
    episode's first frame, or after a frame without targets) to this frame's, over
    ``scale`` rad per unit and scaled from the frame period to the control period.
    """
    out = np.full((len(raw), 7), np.nan)
    targets = action[:, :7] if action.shape[1] >= 7 else np.full((len(raw), 7), np.nan)
    commanded = _finite(targets)
    before = raw[:, :7].astype(float)
    follows = np.zeros(len(raw), dtype=bool)
    follows[1:] = (episode[1:] == episode[:-1]) & commanded[:-1]
    before[follows] = targets[:-1][follows[1:]]
    out[commanded] = (targets[commanded] - before[commanded]) / scale * (period * fps)
    if policy is not None and policy.shape[1] >= 7:
        own = _finite(policy[:, :7])
        out[own] = policy[own, :7]
    return out


def gripper_commands(opening: np.ndarray, action: np.ndarray, policy: np.ndarray | None,
             episode: np.ndarray, spec: RobotSpec, fps: float) -> np.ndarray:
    """Gripper commands (N,): the policy's, else the commanded width's, else the fingers'.

    ``opening`` (N,) m measured; ``action`` (N, A) the commanded targets, the width (m) in
    column 7 when A >= 8; ``policy`` (N, >= 8) the policy's actions or None; ``episode``
    (N,) each frame's episode; ``fps`` the frame rate (Hz).
    """
    grip = spec.gripper
    middle = 0.5 * (grip.width_min + grip.width_max)
    out = np.full(len(opening), np.nan)
    ahead = max(1, round(LOOKAHEAD * fps))
    for e in np.unique(episode):
        frames = np.flatnonzero(episode == e)
        command = 1.0
        for i, frame in enumerate(frames):
            later = opening[frames[min(i + ahead, len(frames) - 1)]] - opening[frame]
            if abs(later) > FINGER_MOTION:
                command = 1.0 if later > 0 else -1.0
            out[frame] = command
    if action.shape[1] >= 8:
        width = action[:, 7]
        known = np.isfinite(width)
        command = np.where(width > middle, 1.0, -1.0)
        change = np.zeros(len(width))
        same = np.flatnonzero(episode[1:] == episode[:-1]) + 1
        change[same] = np.nan_to_num(width[same] - width[same - 1])
        moving = np.abs(change) > WIDTH_MOTION
        command[moving] = np.sign(change[moving])
        out[known] = command[known]
    if policy is not None and policy.shape[1] >= 8:
        known = np.isfinite(policy[:, 7])
        out[known] = np.clip(policy[known, 7], -1.0, 1.0)
    return out
