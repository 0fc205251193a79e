"""Simulated episodes as dataset frames, exactly as the policy step saw them (no rclpy).

Each control step of an env (:class:`~simops_learning.reach_env.FR3ReachEnv` or the
pick-and-place env) is one frame at sim time ``k / control_rate``: the raw inputs the
policy step built its observation from (``policy_step.raw``: measured joints with the
episode's noise, object pose, goal), the policy's raw action, and the command the safety
pipeline made of it, bit for bit (float64; the action as the policy returned it). The
episode's randomised physics (:class:`~simops_sim.randomization.Conditions` and the ramp)
goes into its metadata, so every episode says what world it ran in.

With cameras, every frame also carries each camera's colour image of the state the policy
observed (rendered before the step, as :data:`simops_learning.rollout.Capture`), under an
appearance drawn per episode from ``config/randomization.yaml`` (seeded by the run's seed
and the episode, so the images do not depend on how episodes are batched).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from simops_core.camera_rig import CameraSpec
from simops_core.robot_spec import RobotSpec
from simops_learning.episode_schema import (
    EpisodeFrames,
    Schema,
    empty_columns,
    write_joint_states,
    write_pose,
)
from simops_learning.reach_env import FR3ReachEnv
from simops_learning.rollout import Capture, run_episodes_batched
from simops_sim.appearance import AppearanceRanges
from simops_sim.rgbd import RgbdRenderer, snapshot

FULL = 1.0   # curriculum level of the randomisation: its full ranges

Policy = Callable[[np.ndarray], np.ndarray]
"""Observation (card.observation_size,) float32 -> raw action (card.action.size,)."""


@dataclass(frozen=True)
class StoredImages:
    """An episode's rendered images (H, W, 3) uint8, one per frame (picklable)."""

    images: tuple[np.ndarray, ...]

    def __call__(self) -> Iterator[np.ndarray]:
        """The images in frame order."""
        return iter(self.images)


def sim_episodes(envs: Sequence[FR3ReachEnv], policy: Policy, schema: Schema, seed: int,
                 episodes: range, provenance: dict[str, Any],
                 cameras: Sequence[CameraSpec] = (),
                 appearance: AppearanceRanges | None = None) -> list[EpisodeFrames]:
    """Run ``episodes`` of a run seeded ``seed`` on ``envs`` stepped together; their frames.

    The task (goal, cube) comes from ``env.episode_options``, the physics from the env's
    randomisation drawn by the reset seed, as :func:`simops_learning.rollout.run_episodes`
    fixes them, at the randomisation's full ranges (:data:`FULL`): the same frames whatever
    the number of envs. ``provenance`` fills the episode table's policy and sim-params
    hashes. ``cameras`` render the schema's videos, with ``appearance`` drawn per episode.
    """
    renderers = {id(env): RgbdRenderer(env.physics.model, cameras, appearance)
                 for env in envs} if cameras else {}
    shown: dict[int, int] = {}   # env -> the episode its renderer's appearance was drawn for

    def capture(env: FR3ReachEnv, episode: int) -> dict[str, Any]:
        renderer = renderers[id(env)]
        if shown.get(id(env)) != episode:
            renderer.randomize(np.random.default_rng([seed, episode, 2]))
            shown[id(env)] = episode
        images = renderer.render(snapshot(env.physics.data))
        return {'images': {image.camera: image.color for image in images}}

    try:
        return _run(envs, policy, schema, seed, episodes, provenance,
                    capture if cameras else None)
    finally:
        for renderer in renderers.values():
            renderer.close()


def _run(envs: Sequence[FR3ReachEnv], policy: Policy, schema: Schema, seed: int,
         episodes: range, provenance: dict[str, Any], capture: Capture | None
         ) -> list[EpisodeFrames]:
    rows: dict[int, list[dict[str, Any]]] = {episode: [] for episode in episodes}
    worlds: dict[int, str] = {}

    def record(env: FR3ReachEnv, episode: int, inputs: dict[str, np.ndarray],
               action: np.ndarray, info: dict[str, Any]) -> None:
        if not rows[episode]:
            worlds[episode] = json.dumps(asdict(env.conditions_now) | {
                'ramp_time': env.ramp_time, 'seed': seed, 'episode': episode}, sort_keys=True)
        rows[episode].append(inputs | {'action': np.asarray(action, dtype=np.float64),
                                       'command': np.asarray(info['command'], np.float64),
                                       'info': info})

    run_episodes_batched(envs, policy, episodes, seed, conditions=None, on_step=record,
                         level=FULL, capture=capture)
    spec = envs[0].spec_robot
    return [_frames(rows[e], schema, spec, envs[0].period, provenance, worlds[e])
            for e in episodes]


def sim_episode(env: FR3ReachEnv, policy: Policy, schema: Schema, seed: int, episode: int,
                provenance: dict[str, Any], cameras: Sequence[CameraSpec] = (),
                appearance: AppearanceRanges | None = None) -> EpisodeFrames:
    """Episode ``episode`` alone on ``env``: :func:`sim_episodes` with one env."""
    return sim_episodes([env], policy, schema, seed, range(episode, episode + 1),
                        provenance, cameras, appearance)[0]


def _frames(rows: list[dict[str, Any]], schema: Schema, spec: RobotSpec, period: float,
            provenance: dict[str, Any], world: str) -> EpisodeFrames:
    """One episode's recorded steps as frames at sim time ``k * period``."""
    command_index = [spec.arm_joints.index(j) for j in schema.action[:len(spec.arm_joints)]]
    n = len(rows)
    t = np.arange(n) * period
    columns = empty_columns(schema, n)
    write_joint_states(columns, schema, spec.joint_names, spec.gripper.joints,
                       np.stack([r['joint_position'] for r in rows]),
                       np.stack([r['joint_velocity'] for r in rows]))
    write_pose(columns, schema, 'object_pose', np.stack(
        [np.concatenate([r['object_position'], r['object_quaternion']]) for r in rows]))
    write_pose(columns, schema, 'goal_pose', np.stack(
        [np.concatenate([r['goal_position'], (0.0, 0.0, 0.0, 1.0)]) for r in rows]))
    command = np.stack([r['command'] for r in rows])
    arm = len(spec.arm_joints)
    columns['action'][:, :arm] = command[:, command_index]
    if len(schema.action) > arm:
        columns['action'][:, arm] = command[:, arm]
    columns['policy.action'][:] = np.stack([r['action'] for r in rows])
    for name in schema.inputs:     # in the sim every input is read at its own stamp
        columns[f'source.{name}.stamp'][:, 0] = t
        columns[f'source.{name}.received'][:, 0] = t
    columns['source.command.effective'][:, 0] = t
    info = rows[-1]['info']
    stop = info['protective_stop']
    outcome = ('success' if info['is_success'] else f'protective stop: {stop}' if stop
               else 'out of domain' if info.get('out_of_domain') else 'timeout')
    meta = {'success': bool(info['is_success']), 'success_known': True, 'outcome': outcome,
            'notes': '', 'label': 'rollout', 'source': 'sim', 'bag': '', 'bag_sha256': '',
            'robot': schema.robot, 'start_time': 0.0, **provenance, 'conditions': world}
    report = {'frames': n, 'trimmed': 0, 'dropped': 0, 'dropped_by_input': {},
              'worst_age_s': {}, 'worst_joint_state_gap_s': 0.0}
    videos = {video.key: StoredImages(tuple(r['images'][video.camera] for r in rows))
              for video in schema.videos}
    return EpisodeFrames(t, columns, '', meta, report, videos)
