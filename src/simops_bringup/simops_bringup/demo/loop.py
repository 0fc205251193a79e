"""The steps of ``simops-demo`` on the stand-in, each calling the existing tools.

1. ``simops-launch real_robot standin:=true``: the stand-in arm and the disabled policy,
   beside the graph's recorder; the operator opens an
   episode, then runs ``excite`` with the node graph's own command line (so the bag holds
   the whole excitation) and closes it.
2. In the same launch: a second episode while the policy, enabled through ``~/enable``,
   visits a few goals; then Ctrl-C (SIGINT) to the launch, which must exit 0. The bags and
   goals are kept (:func:`save_recordings`) for the next run.
3. and 5.: the pipeline and the deployment (:mod:`simops_bringup.demo.promotion_steps`).
4. ``simops-validate`` of the policy in the nominal simulator, on the gate's grid.
6. ``simops-launch real_robot standin:=true task:=pick_place``: one pick-and-place episode
   of the shipped pick-and-place policy on the stand-in, the gripper through franka_gripper's
   action; whether the cube reached the goal.
7. The policy episode and simulated rollouts as one LeRobot dataset.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from simops_bringup.command_lines import (
    ExecutableNotFoundError,
    command_line,
    find_executable,
)
from simops_bringup.demo.ros_operator import EXCITE, Operator, OperatorError
from simops_bringup.demo.steps import Child, Progress, StepError, run_tool
from simops_bringup.demo.summary import Dataset, Goal, Validation
from simops_bringup.graph import build_graph
from simops_core.robot_spec import RobotSpec
from simops_core.waiting import wait_until

EXCITE_SECONDS = 30.0      # s of excitation: six periods of its 5 s fundamental
EXCITE_SEED = 0
GOALS = ((0.5, 0.15, 0.3), (0.45, -0.2, 0.2), (0.6, 0.0, 0.4), (0.35, 0.25, 0.15),
         (0.55, -0.1, 0.35))  # m, base frame, inside the policy's training workspace
GOAL_TIMEOUT = 10.0        # s for the policy to reach one goal
DWELL = 1.0                # s on a goal after reaching it (or not)
STARTUP = 60.0             # s for the launch to come up on two shared cores
VALIDATE_TIMEOUT = 400.0   # s per simops-validate run
PROGRESS_PERIOD = 15.0     # s between progress lines of a long wait
VERDICT_CODES = (0, 3, 4)  # simops-validate: pass, marginal, fail (1, 2: it broke)
STEP_EXCITE = 'step 1 (excite and record)'
STEP_POLICY = 'step 2 (policy episode)'
STEP_PICK = 'step 6 (pick and place)'
STEP_DATASET = 'step 7 (dataset)'
ROLLOUTS = 20              # simulated episodes beside the recorded one in the dataset
DATASET_TIMEOUT = 300.0    # s
PICK_GOAL = (0.45, -0.15, 0.15)   # m: where the stand-in's cube, at (0.5, 0, 0.02) m, goes
PICK_TIMEOUT = 20.0        # s: the env's 200 control steps (10 s), with margin
RECORDINGS = 'episodes/recordings.json'   # steps 1 and 2's bags and goals, kept for reruns


@dataclass
class Demo:
    """Where the demo writes, what it runs with, and what the steps produced."""

    out: Path
    env: dict[str, str]
    spec: RobotSpec
    policy: Path
    success_radius: float
    validate_episodes: int
    progress: Progress
    pick_policy: Path
    bags: dict[str, Path] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)
    pick: Goal | None = None

    def log(self, name: str) -> Path:
        """The log file of a step's process."""
        return self.out / 'logs' / f'{name}.log'

    def tool(self, step: str, package: str, executable: str) -> str:
        """An installed executable, found like ``ros2 run``."""
        try:
            return str(find_executable(package, executable))
        except ExecutableNotFoundError as exc:
            raise StepError(step, str(exc)) from None


def record_on_standin(demo: Demo) -> None:
    """Steps 1 and 2 in one launch of the real_robot profile with the stand-in."""
    values = {'standin': 'true', 'record': 'false', 'policy': str(demo.policy)}
    launch = [demo.tool(STEP_EXCITE, 'simops_bringup', 'simops-launch'), 'real_robot',
              *(f'{name}:={value}' for name, value in values.items())]
    nodes = {n.name: n for n in build_graph('real_robot', values | {
        'record': 'true', 'record_dir': str(demo.out / 'episodes'), 'excite': 'true'})}
    steps = ((1, 'Excite the stand-in arm and record', STEP_EXCITE,
              lambda g, o: _excite(demo, g, o, command_line(nodes['excite']))),
             (2, 'Run a policy episode while recording', STEP_POLICY,
              lambda g, o: _policy_episode(demo, g, o)))
    with Child(launch, demo.log('launch'), demo.env) as graph, \
            Child(command_line(nodes['recorder']), demo.log('recorder'), demo.env) as recorder:
        operator = Operator(demo.spec.base_frame)
        try:
            for number, title, step, body in steps:
                with demo.progress.step(number, title):
                    try:
                        body(graph, operator)
                    except (OperatorError, ExecutableNotFoundError) as exc:
                        raise StepError(step, str(exc), demo.log('launch')) from None
        finally:
            operator.close()
        codes = {'recorder': recorder.stop(), 'simops-launch': graph.stop()}
    for name, code in codes.items():
        if code != 0:
            raise StepError(STEP_POLICY, f'{name} exited with code {code} on Ctrl-C instead '
                            'of 0', demo.log('launch' if name == 'simops-launch' else name))
    demo.progress.note('Ctrl-C: simops-launch and the recorder stopped cleanly (exit 0)')


def save_recordings(demo: Demo) -> None:
    """Keep the bags and goals of steps 1 and 2 in :data:`RECORDINGS` for the next run."""
    (demo.out / RECORDINGS).write_text(json.dumps({
        'bags': {name: str(path) for name, path in demo.bags.items()},
        'goals': [asdict(g) for g in demo.goals]}, indent=2) + '\n')


def load_recordings(demo: Demo) -> bool:
    """Steps 1 and 2 of an earlier run, if it left them whole; whether it did."""
    try:
        kept = json.loads((demo.out / RECORDINGS).read_text())
        bags = {name: Path(path) for name, path in kept['bags'].items()}
        goals = [Goal(tuple(g['position']), g['reached'], g['seconds'], g['final'])
                 for g in kept['goals']]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if set(bags) != {'excite', 'policy'} or not all(p.is_dir() for p in bags.values()):
        return False
    demo.bags, demo.goals = bags, goals
    return True


def _excite(demo: Demo, graph: Child, operator: Operator, argv: list[str]) -> None:
    step = STEP_EXCITE
    if not operator.wait_for_arm(STARTUP) or not graph.running():
        raise StepError(step, 'the stand-in arm and the policy did not come up within '
                        f'{STARTUP:.0f} s', demo.log('launch'))
    demo.progress.note(f'stand-in up; policy {operator.state}; recording to '
                       f'{operator.start_recording("excite")}')
    argv += ['-p', f'duration:={EXCITE_SECONDS}', '-p', f'seed:={EXCITE_SEED}']
    with Child(argv, demo.log('excite'), demo.env) as excite:
        operator.enable(True, EXCITE)   # excite starts DISABLED, like the policy
        deadline = time.monotonic() + EXCITE_SECONDS + STARTUP
        started = None
        while (code := excite.wait(1.0)) is None:
            if not graph.running():
                raise StepError(step, 'simops-launch stopped during the excitation',
                                demo.log('launch'))
            if time.monotonic() > deadline:
                raise StepError(step, 'excite did not finish in time', demo.log('excite'))
            if started is None and excite.output_has('exciting'):
                started = last = time.monotonic()
                demo.progress.note(f'excite: {EXCITE_SECONDS:.0f} s Fourier excitation '
                                   f'(seed {EXCITE_SEED}) on the arm\'s JointTrajectory topic')
            elif started is not None and time.monotonic() - last >= PROGRESS_PERIOD:
                last = time.monotonic()
                demo.progress.note(f'excite: {last - started:.0f} of {EXCITE_SECONDS:.0f} s')
    if code != 0:
        raise StepError(step, f'excite exited with code {code}', demo.log('excite'))
    demo.bags['excite'] = Path(operator.stop_recording())
    demo.progress.note(f'excitation finished at home; bag {demo.bags["excite"]}')


def _policy_episode(demo: Demo, graph: Child, operator: Operator) -> None:
    step = STEP_POLICY
    demo.progress.note(f'recording to {operator.start_recording("policy")}')
    operator.publish_goal(np.array(GOALS[0]))
    operator.enable(True)
    if not operator.wait_state('RUNNING', STARTUP):
        raise StepError(step, f'the policy did not reach RUNNING (state {operator.state})',
                        demo.log('launch'))
    demo.progress.note('policy enabled through ~/enable: RUNNING')
    for position in GOALS:
        goal = np.array(position)
        operator.publish_goal(goal)
        started = time.monotonic()
        reached = wait_until(lambda g=goal: operator.distance(g) < demo.success_radius,
                             GOAL_TIMEOUT, interval=0.01)
        seconds = time.monotonic() - started
        time.sleep(DWELL)
        result = Goal(position, reached, seconds, operator.distance(goal))
        demo.goals.append(result)
        demo.progress.note(f'goal {position} m: ' + (
            f'reached in {seconds:.1f} s' if reached else f'not reached in {GOAL_TIMEOUT:.0f} s')
            + f'; {result.final * 1e3:.1f} mm away after {DWELL:.0f} s more')
        if not graph.running():
            raise StepError(step, 'simops-launch stopped during the episode', demo.log('launch'))
    operator.enable(False)
    reached = sum(g.reached for g in demo.goals)
    operator.report_outcome(reached == len(GOALS), f'{reached}/{len(GOALS)} goals reached')
    demo.bags['policy'] = Path(operator.stop_recording())
    demo.progress.note('policy disabled through ~/enable; episode closed')


def validate_nominal(demo: Demo, grid: Mapping[str, Sequence[float]]) -> Validation:
    """Step 4: ``simops-validate`` on the gate's ``grid`` in the nominal simulator.

    Beside the gate's verdict in the calibrated one.
    """
    step = 'step 4 (validate)'
    with demo.progress.step(4, 'Validate the policy in the nominal simulator, for comparison'):
        folder = demo.out / 'validate' / 'nominal'
        argv = [demo.tool(step, 'simops_learning', 'simops-validate'), '--policy',
                str(demo.policy), '--grid',
                *(f'{axis}={",".join(str(v) for v in values)}' for axis, values in grid.items()),
                '--episodes', str(demo.validate_episodes), '--workers', '2', '--out',
                str(folder)]
        run_tool(step, argv, demo.log('validate_nominal'), demo.env, VALIDATE_TIMEOUT,
                 ok=VERDICT_CODES, echo=_verdict_echo(demo, 'nominal'))
    return Validation.load('nominal physics', folder / 'validation.json')


def pick_on_standin(demo: Demo) -> None:
    """Step 6: one pick-and-place episode on the stand-in (real_robot profile)."""
    with demo.progress.step(6, 'Pick and place the cube on the stand-in'):
        demo.pick = goal_on_standin(demo, STEP_PICK, {'task': 'pick_place',
                                                      'policy': str(demo.pick_policy)},
                                    'launch_pick', PICK_GOAL, 'object', PICK_TIMEOUT)
        demo.progress.note(f'cube to {PICK_GOAL} m: ' + (
            f'placed in {demo.pick.seconds:.1f} s' if demo.pick.reached else
            f'not placed in {PICK_TIMEOUT:.0f} s')
            + f'; {demo.pick.final * 1e3:.1f} mm from the goal after {DWELL:.0f} s more')


def goal_on_standin(demo: Demo, step: str, values: Mapping[str, str], log: str,
                    position: tuple[float, float, float], what: str, timeout: float) -> Goal:
    """One goal of a policy on the stand-in, through the real_robot profile.

    Launch it with ``values`` (launch arguments beside ``standin:=true record:=false``),
    enable the policy towards ``position`` (m, base frame), wait up to ``timeout`` s for
    ``what`` (``ee``: the flange; ``object``: the cube) to come within the success radius,
    dwell, disable, and Ctrl-C the launch, which must exit 0.
    """
    launch = [demo.tool(step, 'simops_bringup', 'simops-launch'), 'real_robot',
              *(f'{name}:={value}' for name, value in
                ({'standin': 'true', 'record': 'false'} | dict(values)).items())]
    goal = np.array(position)
    with Child(launch, demo.log(log), demo.env) as graph:
        operator = Operator(demo.spec.base_frame)
        try:
            if not operator.wait_for_arm(STARTUP) or not graph.running():
                raise StepError(step, 'the stand-in and the policy did not come up within '
                                f'{STARTUP:.0f} s', demo.log(log))
            operator.publish_goal(goal)
            operator.enable(True)
            if not operator.wait_state('RUNNING', STARTUP):
                raise StepError(step, 'the policy did not reach RUNNING (state '
                                f'{operator.state})', demo.log(log))
            started = time.monotonic()
            reached = wait_until(lambda: operator.distance(goal, what) < demo.success_radius,
                                 timeout, interval=0.01)
            seconds = time.monotonic() - started
            time.sleep(DWELL)
            result = Goal(position, reached, seconds, operator.distance(goal, what))
            operator.enable(False)
        except OperatorError as exc:
            raise StepError(step, str(exc), demo.log(log)) from None
        finally:
            operator.close()
        code = graph.stop()
    if code != 0:
        raise StepError(step, f'simops-launch exited with code {code} on Ctrl-C instead of 0',
                        demo.log(log))
    return result


def _verdict_echo(demo: Demo, physics: str) -> Callable[[str], None]:
    def echo(line: str) -> None:
        if line.startswith('verdict:'):
            demo.progress.note(f'{physics}: {line.strip()}')
    return echo


def export_dataset(demo: Demo) -> Dataset:
    """Step 7: the recorded policy episode and simulated rollouts as one LeRobot dataset."""
    step = STEP_DATASET
    out = demo.out / 'dataset'
    with demo.progress.step(7, 'Export the policy episode and simulated rollouts as a '
                               'LeRobot dataset'):
        card = demo.policy.with_suffix('.yaml')
        run_tool(step, [demo.tool(step, 'simops_learning', 'simops-dataset'), 'export',
                        str(demo.bags['policy']), '--card', str(card), '--out', str(out),
                        '--task', 'reach five goals'], demo.log('dataset_export'), demo.env,
                 DATASET_TIMEOUT, echo=lambda line: demo.progress.note(line.strip()))
        run_tool(step, [demo.tool(step, 'simops_learning', 'simops-rollout'), '--policy',
                        str(demo.policy), '--out', str(out), '--append', '--episodes',
                        str(ROLLOUTS), '--workers', '2'], demo.log('dataset_rollout'),
                 demo.env, DATASET_TIMEOUT, echo=_rollout_echo(demo))
    return Dataset.load(out)


def _rollout_echo(demo: Demo) -> Callable[[str], None]:
    def echo(line: str) -> None:
        if 'episodes/s' in line:
            demo.progress.note(f'simops-rollout: {line.strip()}')
    return echo
