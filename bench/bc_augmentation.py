"""Behaviour cloning from few demonstrations, with and without turning the scene.

An operator that drives like the teleop bench's (the grasp expert's decision as a velocity
under the teleop node's default 0.2 m/s cap) demonstrates pick-and-place in the training
env, from the env's own resets, until ``--demos`` of them place the cube. The decision
network is cloned from those frames by ``simops-train --dataset``'s fit
(:func:`simops_learning.dataset_train.fit_decisions`), once as recorded and once with each
frame at a random heading (``turn``), and each clone is evaluated alone at full
randomisation like a trained policy. No ROS: this isolates the learning from the graph
(``bench/teleop_demos.py`` records through it).

    .venv/bin/python bench/bc_augmentation.py [--demos 30] [--eval-episodes 50] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np
import torch

from simops_core.robot_spec import gripper_width
from simops_learning.dataset_train import UPDATES, fit_decisions
from simops_learning.demonstrations import Demonstrations
from simops_learning.pick_env import FR3PickPlaceEnv
from simops_learning.pick_expert import PickExpert
from simops_learning.pick_network import MOVE_UNIT
from simops_learning.pick_train import PickTrainConfig, new_policy, run_round, scripted
from simops_learning.reach_card import CONTROL_RATE
from simops_learning.seeding import seeded_torch
from simops_teleop.servo_law import ServoSettings, cap_speed

PERIOD = 1.0 / CONTROL_RATE


def demonstrate(env: FR3PickPlaceEnv, expert: PickExpert, demos: int, first_seed: int
                ) -> tuple[Demonstrations, int]:
    """Frames of ``demos`` placed demonstrations, and how many episodes it took."""
    settings = ServoSettings.defaults()
    raw, decisions, placed, seed = [], [], 0, first_seed
    while placed < demos:
        env.reset(seed=seed, options={'level': 1.0})
        seed += 1
        frames, labels = [], []
        while True:
            state = env.policy_step.raw
            q = state.joint_position[:7].copy()
            width = float(gripper_width(state.joint_position[7:]))
            cube, goal = state.object_position.copy(), state.goal_position.copy()
            move, gripper = expert.decide(q, width, cube, goal)
            # the SpaceMouse's axes saturate at the cap, then the teleop node caps the speed
            axes = np.clip(move / PERIOD, -settings.linear, settings.linear)
            velocity = cap_speed(np.concatenate([axes, np.zeros(3)]), settings)[:3]
            frames.append(np.concatenate([q, cube, state.object_quaternion, goal, [width]]))
            labels.append(np.append(velocity * PERIOD / MOVE_UNIT, gripper))
            action = expert.action(q, velocity * PERIOD, gripper,
                                   state.object_quaternion.copy())
            _, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        if info['is_success']:
            placed += 1
            raw += frames
            decisions += labels
    frames = np.array(raw, dtype=np.float32)
    unlabelled = np.full((len(frames), 7), np.nan, dtype=np.float32)   # no joint-delta labels
    return (Demonstrations(frames, np.array(decisions, dtype=np.float32), unlabelled, {},
                           np.ones(len(frames), dtype=bool)),
            seed - first_seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--demos', type=int, default=30)
    parser.add_argument('--eval-episodes', type=int, default=50)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1])
    args = parser.parse_args()
    torch.set_num_threads(1)
    context = multiprocessing.get_context('spawn')
    for seed in args.seeds:
        config = PickTrainConfig(seed=seed, eval_episodes=args.eval_episodes, updates=UPDATES)
        env = FR3PickPlaceEnv(randomization=config.randomization)
        started = time.monotonic()
        demos, episodes = demonstrate(env, PickExpert(new_policy(env, config).law, config.gains),
                                      args.demos, 10_000 + 1000 * seed)
        print(f'seed {seed}: {args.demos} demonstrations placed of {episodes} episodes, '
              f'{len(demos.raw)} frames, {time.monotonic() - started:.0f} s', flush=True)
        for turn in (False, True):
            policy = new_policy(env, config)
            loss = fit_decisions(policy, [demos], [1.0], config, seeded_torch(seed),
                                 normalize=True, turn=turn)
            with context.Pool(config.workers) as pool:
                result = run_round(pool, config, scripted(policy), seed * 1_000_003 + 900_000,
                                   args.eval_episodes, 0.0, 1.0)
            print(f'  {"turned" if turn else "as recorded"}: loss {loss:.4f}, policy alone '
                  f'{np.mean(result.successes):.0%} of {args.eval_episodes} episodes', flush=True)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
