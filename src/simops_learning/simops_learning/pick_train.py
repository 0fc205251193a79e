"""``simops-train --task pick_place``: the pick-and-place policy, by DAgger from the grasp expert.

1. **Round 0**: the scripted expert (:mod:`simops_learning.pick_expert`) runs episodes of
   ``SimOps/FR3PickPlace-v0``; every observation is kept with the expert's action.
2. **DAgger rounds**: the current :class:`~simops_learning.pick_network.PickPolicy` drives
   (the expert's action is executed instead with probability ``beta``, halving per round);
   the expert labels every state the policy visits; the aggregated data refit the network
   (MSE on the action, Adam, one torch thread).
3. **Curriculum**: rounds run without randomisation until the policy alone succeeds in more
   than ``promote`` of its episodes; each later round raises the randomisation level by
   ``level_step`` toward the full ``pick_place`` ranges of ``config/randomization.yaml``.
4. Optionally (``ppo_iterations``) PPO fine-tuning with RSL-RL
   (:mod:`simops_learning.pick_ppo`) of the cloned network at full randomisation, its
   reward with ``reward_terms``' penalties (:mod:`simops_learning.reward_terms`).
5. A final evaluation of the policy alone at full randomisation.

Rollouts run in ``workers`` processes. Same seed and settings give the same weights
(episode seeds are fixed, labelling is deterministic, fitting single-threaded).
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simops_core.executor import interrupts_ignored
from simops_core.promotion import file_entry
from simops_core.robot_spec import gripper_width
from simops_core.tasks import TASKS
from simops_learning.network import export_policy
from simops_learning.pick_env import IN_FLIGHT_HISTORY, PICK_HISTORY, FR3PickPlaceEnv
from simops_learning.pick_expert import PickExpert, PickGains
from simops_learning.pick_network import MOVE_UNIT, InFlightPolicy, PickPolicy
from simops_learning.ppo_settings import PPOConfig
from simops_learning.reward_terms import parse_reward_terms
from simops_learning.seeding import seeded_torch
from simops_sim.randomization import DomainRandomization, default_randomization
from simops_sim.scenarios import Scenario, drawn
from simops_sim.sim_profiles import TRAINING, profile_entry

Log = Callable[[str], None]


@dataclass(frozen=True)
class PickTrainConfig:
    """DAgger settings; counts are episodes, rounds and updates."""

    robot: str = 'fr3'
    seed: int = 0
    rounds: int = 10
    episodes: int = 80               # per round
    eval_episodes: int = 60
    hidden: tuple[int, ...] = (256, 256)
    updates: int = 5000              # per round
    batch: int = 512
    learning_rate: float = 1e-3
    beta: float = 0.5                # expert share in round 1, halving per round
    promote: float = 0.9             # policy success that starts the randomisation
    level_step: float = 0.34
    ppo_iterations: int = 0          # PPO fine-tuning after DAgger (RSL-RL), 0: none
    ppo: PPOConfig = field(default_factory=PPOConfig)              # its settings
    reward_terms: dict[str, float] = field(default_factory=dict)   # PPO's penalties by mode
    workers: int = 2
    gains: PickGains = field(default_factory=PickGains)
    randomization: DomainRandomization = field(
        default_factory=lambda: default_randomization(TASKS['pick_place'].randomization))
    sim_params: str | None = None    # SimParams YAML of the training physics (None: nominal)
    profile: str = TRAINING          # the simulator's options (simops_sim.sim_profiles)
    init_policy: str | None = None   # a pick-and-place policy (.pt) to fine-tune from
    scenarios: tuple[str, ...] = ()  # config/scenarios.yaml events the training rounds play
    scenario_share: float = 0.5      # of a training round's episodes, each plays one of them
    in_flight: bool = False          # pick_network.InFlightPolicy, labelled for the delay

    @property
    def history(self) -> int:
        """The frames of the policy's card."""
        return IN_FLIGHT_HISTORY if self.in_flight else PICK_HISTORY


@dataclass(frozen=True)
class RolloutJob:
    """Episodes for one worker: ``policy`` a TorchScript archive (None: the expert drives)."""

    policy: bytes | None
    seeds: tuple[int, ...]
    beta: float
    level: float
    config: PickTrainConfig
    scenarios: bool = True   # episodes may play the config's scenarios (not the final eval)


@dataclass
class Rollouts:
    """The states visited and the expert's decisions there.

    Observations (N, obs) float32, decisions (N, 4) (the grasp point's step in
    ``MOVE_UNIT``, the gripper command), and per episode whether it succeeded.
    """

    observations: np.ndarray
    actions: np.ndarray
    successes: list[bool]


def expert_action(expert: PickExpert, env: FR3PickPlaceEnv, privileged: bool = False,
                  in_flight: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The expert's action (8,) and decision (4,) on the env's observation (noise included).

    ``privileged``: on the cube's true pose instead (a scenario froze or moved what the node
    reads; the expert labels what should be done, the policy learns it from what it reads).
    ``in_flight``: decided for where the commands still in the simulator's command delay
    take the arm (:attr:`~simops_sim.physics.Physics.arm_in_flight`; the label an
    :class:`~simops_learning.pick_network.InFlightPolicy` learns).
    """
    raw = env.policy_step.raw
    arm = len(env.spec_robot.arm_joints)
    q, width = raw.joint_position[:arm].copy(), float(gripper_width(raw.joint_position[arm:]))
    cube, cube_quat = raw.object_position.copy(), raw.object_quaternion.copy()
    if privileged:
        position, quaternion = env.true_object_pose()
        cube, cube_quat = position.copy(), quaternion[[1, 2, 3, 0]]   # wxyz to the raw's xyzw
    ahead = q + env.physics.arm_in_flight if in_flight else None
    move, gripper = expert.decide(q, width, cube, raw.goal_position.copy(), ahead)
    action = expert.action(q, move, gripper, cube_quat)
    return action, np.append(move / MOVE_UNIT, gripper)


def episode_scenario(config: PickTrainConfig, seed: int) -> Scenario | None:
    """The scenario that episode ``seed`` of a training round plays, or None (:func:`drawn`)."""
    return drawn(config.scenarios, config.scenario_share, seed, 'pick_place')


def rollout(job: RolloutJob) -> Rollouts:
    """Worker: run the job's episodes, labelling every visited state with the expert."""
    torch.set_num_threads(1)
    config = job.config
    env = FR3PickPlaceEnv(randomization=config.randomization, robot=config.robot,
                          sim_params_file=config.sim_params, profile=config.profile,
                          history=config.history)
    expert = PickExpert(new_policy(env, config).law, config.gains)
    module = None if job.policy is None else torch.jit.load(io.BytesIO(job.policy))
    observations, actions, successes = [], [], []
    for seed in job.seeds:
        played = episode_scenario(config, seed) if job.scenarios else None
        obs, info = env.reset(seed=seed, options={'level': job.level, 'scenario': played})
        coin = np.random.default_rng([seed, 1])
        while True:
            action, label = expert_action(expert, env, privileged=played is not None,
                                          in_flight=config.in_flight)
            observations.append(obs)
            actions.append(label)
            if module is not None and coin.random() >= job.beta:
                with torch.inference_mode():
                    action = module(torch.as_tensor(obs)[None])[0].numpy().astype(float)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes.append(bool(info['is_success']))
    return Rollouts(np.array(observations, dtype=np.float32),
                    np.array(actions, dtype=np.float32), successes)


class InitPolicyError(ValueError):
    """The policy to fine-tune from is not a pick-and-place policy of this robot."""


def new_policy(env: FR3PickPlaceEnv, config: PickTrainConfig) -> PickPolicy:
    """An untrained policy for ``env``'s card and model (an in-flight one if ``config`` says)."""
    kind = InFlightPolicy if config.in_flight else PickPolicy
    return kind(env.card, env.spec_robot, env.physics.model, env.physics.index, config.hidden)


def hidden_of(state: dict[str, torch.Tensor]) -> tuple[int, ...]:
    """The hidden layer widths of a pick policy's network from its state dict."""
    weights = sorted((int(k.split('.')[1]), v) for k, v in state.items()
                     if k.startswith('body.') and k.endswith('.weight'))
    return tuple(int(v.shape[0]) for _, v in weights[:-1])


def policy_state(init: str | Path) -> dict[str, torch.Tensor]:
    """The state dict of the TorchScript policy ``init``; raises :class:`InitPolicyError`."""
    try:
        return torch.jit.load(str(init)).state_dict()
    except (RuntimeError, ValueError, OSError) as exc:
        raise InitPolicyError(f'{init}: not a TorchScript policy '
                              f'({str(exc).splitlines()[0]})') from None


def fine_tuned(config: PickTrainConfig) -> PickTrainConfig:
    """``config`` with its init policy's kind (in flight or not): the env's card follows it.

    Raises :class:`InitPolicyError`.
    """
    if config.init_policy is None:
        return config
    return replace(config, in_flight='action_at' in policy_state(config.init_policy))


def start_policy(env: FR3PickPlaceEnv, config: PickTrainConfig,
                 init: str | Path | None) -> tuple[PickPolicy, PickTrainConfig]:
    """A new policy, or ``init``'s (its weights, widths and input standardisation).

    Returns it and ``config`` with the network's widths; raises :class:`InitPolicyError`,
    also when ``init`` is an in-flight policy and ``config`` not, or the other way round.
    """
    if init is None:
        return new_policy(env, config), config
    state = policy_state(init)
    if ('action_at' in state) != config.in_flight:
        raise InitPolicyError(
            f'{init}: reads its last actions (an in-flight policy), which this training '
            'cannot give it' if not config.in_flight else
            f'{init}: does not read its last actions; an in-flight policy starts from scratch')
    config = replace(config, hidden=hidden_of(state))
    policy = new_policy(env, config)
    try:
        policy.load_state_dict(state)
    except RuntimeError as exc:
        raise InitPolicyError(f'{init}: not a {config.robot} pick-and-place policy '
                              f'({str(exc).splitlines()[0]})') from None
    return policy, config


def fit(policy: PickPolicy, observations: np.ndarray, decisions: np.ndarray,
        config: PickTrainConfig, generator: torch.Generator) -> float:
    """Refit ``policy``'s network by MSE on the expert's decisions; return the last loss.

    A fine-tuned policy (``config.init_policy``) keeps its input standardisation, which its
    weights were fitted to.
    """
    with torch.no_grad():
        x = policy.inputs(torch.as_tensor(observations))[0]
    if config.init_policy is None:
        policy.set_normalization(x.numpy())
    y = torch.as_tensor(decisions)
    optimizer = torch.optim.Adam(policy.body.parameters(), lr=config.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, config.updates)
    loss = torch.zeros(())
    for _ in range(config.updates):
        batch = torch.randint(len(x), (config.batch,), generator=generator)
        loss = torch.mean((policy.head(x[batch]) - y[batch]) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
    return float(loss.item())


def scripted(policy: PickPolicy) -> bytes:
    """The policy as a TorchScript archive."""
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(policy.eval()), buffer)
    return buffer.getvalue()


def run_round(pool: Any, config: PickTrainConfig, policy: bytes | None, first_seed: int,
              episodes: int, beta: float, level: float, scenarios: bool = True) -> Rollouts:
    """``episodes`` episodes from seed ``first_seed`` on, split over the workers."""
    seeds = [first_seed + i for i in range(episodes)]
    jobs = [RolloutJob(policy, tuple(seeds[w::config.workers]), beta, level, config, scenarios)
            for w in range(config.workers)]
    parts = pool.map(rollout, jobs)
    return Rollouts(np.concatenate([p.observations for p in parts]),
                    np.concatenate([p.actions for p in parts]),
                    [s for p in parts for s in p.successes])


def train_pick(config: PickTrainConfig, log: Log = print) -> tuple[PickPolicy, dict[str, Any]]:
    """DAgger with the curriculum; return the policy and the training metadata for its card."""
    generator = seeded_torch(config.seed)
    started = time.monotonic()
    config = fine_tuned(config)
    env = FR3PickPlaceEnv(robot=config.robot, history=config.history)
    policy, config = start_policy(env, config, config.init_policy)
    base = config.seed * 1_000_003
    # a fine-tune starts at the full ranges: its policy has learnt the task
    level, history = (0.0 if config.init_policy is None else 1.0), []
    context = multiprocessing.get_context('spawn')
    with interrupts_ignored():   # Ctrl-C is this process's to handle
        pool = context.Pool(config.workers)
    with pool:
        data = run_round(pool, config, None, base, config.episodes, 1.0, level)
        log(f'round 0: expert {np.mean(data.successes):.0%} success, {len(data.actions)} '
            f'samples, {time.monotonic() - started:.0f} s')
        observations, actions = [data.observations], [data.actions]
        for round_ in range(1, config.rounds + 1):
            loss = fit(policy, np.concatenate(observations), np.concatenate(actions), config,
                       generator)
            beta = config.beta ** round_
            data = run_round(pool, config, scripted(policy), base + round_ * 10_000,
                             config.episodes, beta, level)
            observations.append(data.observations)
            actions.append(data.actions)
            success = float(np.mean(data.successes))
            history.append({'round': round_, 'level': round(level, 3), 'beta': beta,
                            'success': success, 'loss': loss})
            log(f'round {round_}: level {level:.2f}, expert share {beta:.3f}, success '
                f'{success:.0%}, loss {loss:.4f}, {sum(len(a) for a in actions)} samples, '
                f'{time.monotonic() - started:.0f} s')
            if level > 0 or success > config.promote:
                level = min(1.0, level + config.level_step)
        loss = fit(policy, np.concatenate(observations), np.concatenate(actions), config,
                   generator)
        ppo_success = None
        if config.ppo_iterations:
            from simops_learning.pick_ppo import fine_tune  # RSL-RL: imported only to run it
            ppo_success = fine_tune(policy, config.ppo_iterations, config.randomization,
                                    config.hidden, config.seed, config.ppo, log=log,
                                    sim_params=config.sim_params, profile=config.profile,
                                    reward_terms=config.reward_terms)
        final = run_round(pool, config, scripted(policy), base + 900_000, config.eval_episodes,
                          0.0, 1.0, scenarios=False)
    success = float(np.mean(final.successes))
    log(f'final: policy alone at full randomisation {success:.1%} of {config.eval_episodes} '
        f'episodes, {time.monotonic() - started:.0f} s')
    metadata = {
        'framework': f'torch {torch.__version__}',
        'algorithm': 'DAgger from the scripted grasp expert, curriculum on randomisation'
                     + ('' if config.init_policy is None else ', fine-tuned'),
        'init_policy': file_entry(config.init_policy),
        'policy': ('kinematics layer, the shifts of its last actions + MLP '
                   '(simops_learning.pick_network.InFlightPolicy)' if config.in_flight else
                   'kinematics layer + MLP (simops_learning.pick_network)'),
        'in_flight': ({'history': config.history, 'expert': 'decides from the joints the '
                       'commands in the command delay lead to'} if config.in_flight else None),
        'seed': config.seed, 'rounds': config.rounds, 'episodes_per_round': config.episodes,
        'hidden': list(config.hidden), 'updates_per_round': config.updates,
        'final_loss': round(loss, 5), 'rounds_log': history,
        'ppo': ({'library': 'rsl-rl-lib 5.5.1', 'iterations': config.ppo_iterations,
                 **asdict(config.ppo), 'success_during_training': ppo_success,
                 'reward_terms': dict(config.reward_terms) or None}
                if config.ppo_iterations else None),
        'randomized_success': success, 'eval_episodes': config.eval_episodes,
        'randomization': {**asdict(config.randomization),
                          'ramp_times': list(config.randomization.ramp_times)},
        'sim_params': file_entry(config.sim_params),   # the training physics, by sha256
        'sim_profile': profile_entry(config.profile),
        'scenarios': ({'names': list(config.scenarios), 'share': config.scenario_share,
                       'expert': 'labels on the true cube pose in those episodes'}
                      if config.scenarios else None),
        'wall_time_s': round(time.monotonic() - started, 1),
    }
    return policy, metadata


def train_pick_and_export(args: argparse.Namespace, randomization: DomainRandomization) -> int:
    """``simops-train --task pick_place``: train, export ``STEM.pt``/``.pt2`` and their cards.

    Returns the exit code: 0, or 1 when the export fails.
    """
    config = PickTrainConfig(robot=args.robot, seed=args.seed, rounds=args.rounds,
                             episodes=args.episodes, eval_episodes=args.eval_episodes,
                             updates=args.updates, workers=args.workers,
                             ppo_iterations=args.ppo_iterations,
                             reward_terms=parse_reward_terms(args.reward_terms),
                             randomization=randomization, sim_params=args.sim_params,
                             profile=args.sim_profile, init_policy=args.init_policy,
                             scenarios=tuple(args.scenarios), scenario_share=args.scenario_share,
                             in_flight=args.in_flight)
    try:
        policy, metadata = train_pick(config, log=lambda line: print(line, flush=True))
    except InitPolicyError as exc:
        print(f'simops-train: error: {exc}', file=sys.stderr)
        return 2
    return export_pick(policy, metadata, config.robot, args.out)


def export_pick(policy: PickPolicy, metadata: dict[str, Any], robot: str, out: str | None,
                suffix: str = '') -> int:
    """Export ``STEM.pt``/``.pt2`` and their cards, STEM ``out`` or the robot's default.

    The default stem is ``models/policy/<robot>_pick_place<suffix>``. Returns the exit code:
    0, or 1 when the export fails (one line).
    """
    env = FR3PickPlaceEnv(robot=robot, history=policy.history)
    stem = Path(out or f'models/policy/{robot}_{env.task}{suffix}')
    try:
        paths = export_policy(policy, env.spec_robot, stem, env.card.observation_size, metadata,
                              policy.history, env.task)
    except OSError as exc:
        print(f'simops-train: error: cannot write {stem}: {exc}', file=sys.stderr)
        return 1
    print(f'wrote {", ".join(str(p) for p in paths)} in {metadata["wall_time_s"]} s')
    return 0
