"""Demonstrations by a scripted SpaceMouse operator through the real graph, then BC on them.

1. ``simops-launch sim task:=pick_place teleop:=spacemouse record:=true cameras:=false``
   in a DDS domain of its own on loopback: the simulator, the teleop node (spacenav's Joy
   layout on ``/spacenav/joy``) and the recorder (``source: teleop``).
2. The scripted operator (this process) stands in for a person with a SpaceMouse. It sees
   the true cube pose (``/object_pose``) and the arm (``/joint_states``), decides as the
   grasp expert does (``PickExpert.decide`` on the policy's kinematics), and publishes
   spacenav's Joy at 50 Hz: the linear axes ask for the expert's step as a velocity (over
   the teleop node's speed cap), the yaw axis squares the hand to the cube, button 0 (the
   dead-man) is held; when the expert's gripper command changes it sets the hand through the
   teleop node's ``~/gripper`` (open or close, unlike the toggle button). Each
   demonstration: a new goal on ``/goal_pose`` (drawn as ``FR3PickPlace-v0`` draws its
   goals, at least ``MIN_TRAVEL`` from the cube), the recorder's
   ``~/start``, until the cube's centre rests within 2 cm of the goal (the env's success) or
   ``DEMO_TIMEOUT``; the outcome on ``~/episode_info``, ``~/stop``; then, unrecorded, the
   operator sets the cube down, backs off and brings the hand home, where an env episode
   starts. The next demonstration starts from there, the cube where it was set down; a
   cube set down outside the area the env's cubes start in, or one the operator could not
   reach, is put back where the first demonstration found it (the simulator's
   ``~/reset``), as a person would move it by hand.
3. ``simops-dataset export`` with the pick_place card, then ``simops-train --task
   pick_place --dataset`` (behaviour cloning on the demonstrations alone), whose final
   line is the cloned policy's success alone at full randomisation over ``--eval-episodes``
   episodes of the env.
4. The clone at the stand-in's physics: ``simops-validate`` in the validation sim with the
   stand-in's hidden SimParams (``config/sim_params/standin_hidden.yaml``, what
   ``real_robot standin:=true`` runs) and no randomisation, ``--eval-episodes`` episodes
   with the env's cubes and goals. The stand-in itself has no cube (its scene is the arm's
   alone), so these are its physics in the env, not episodes through its graph.
5. Mixed with simulated rollouts: ``simops-train --init-policy`` the shipped pick-and-place
   policy on the demonstrations and ``--expert-rounds`` DAgger rounds in the training sim
   (80 episodes each, driven by the policy being fine-tuned, every state labelled by the
   grasp expert; the demonstrations' share of the batches ``--share``, their twists at the
   cap labelled as ``--twist-at-cap`` says, 5,000 updates per round), gated as the shipped
   policy is: ``simops-validate`` as ``simops-pipeline`` runs it for
   ``pipelines/fr3_pick_place.yaml`` (its grid, episodes, seed and thresholds), without the
   sim-to-sim gap, which is no part of the verdict. About 30 minutes on 2 cores;
   ``--expert-rounds 0`` leaves it out.

    .venv/bin/python bench/teleop_demos.py [--demos 30] [--eval-episodes 50]
        [--expert-rounds 3] [--share 0.1] [--twist-at-cap exact]
        [--demonstrations DATASET] [--keep DIR]

``--demonstrations`` takes an exported dataset of earlier demonstrations (a ``--keep``
folder's ``dataset``) and leaves out steps 1 and 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from simops_bringup.graph import standin_truth
from simops_core.command_line import terminate_as_interrupt
from simops_core.dds_isolation import claim_domain_id, isolated_env
from simops_core.paths import resolve_resource

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))
RATE = 50.0            # Hz, the operator's Joy messages
DEMO_TIMEOUT = 45.0    # s per demonstration
PLACED = 0.02          # m, the success radius of FR3PickPlace-v0
STALL = 4.0            # s the open hand may stay within 5 mm before the demo is given up
SETTLE = 5             # Joy ticks the cube rests within PLACED before the hand opens
YAW_GAIN = 4.0         # 1/s, how fast the operator squares the hand to the cube
CARD = REPO / 'models/policy/fr3_pick_place.yaml'
SHIPPED = REPO / 'models/policy/fr3_pick_place.pt'   # the policy the mixed training fine-tunes
PIPELINE = REPO / 'pipelines/fr3_pick_place.yaml'    # whose gate the mixed policy goes through
STANDIN = resolve_resource(standin_truth('fr3'))   # the stand-in's hidden physics


class ScriptedOperator:
    """The expert's decisions as a SpaceMouse's Joy; see the module docstring."""

    def __init__(self, operator: object, spec: object) -> None:
        from geometry_msgs.msg import PoseStamped
        from sensor_msgs.msg import JointState, Joy
        from std_msgs.msg import Int8, String

        from simops_core.topics import load_topics
        from simops_learning.pick_env import FR3PickPlaceEnv
        from simops_learning.pick_expert import PickExpert
        from simops_learning.pick_train import PickTrainConfig, new_policy
        from simops_ros.polled import Polled, PolledGroup, never_called
        from simops_ros.qos import qos_profile
        from simops_teleop.servo_law import ServoSettings

        topics = load_topics()
        self.spec = spec
        self.law = new_policy(FR3PickPlaceEnv(), PickTrainConfig()).law
        self.expert = PickExpert(self.law)
        self.caps = ServoSettings.defaults()
        self.lock = threading.Lock()
        self.q: np.ndarray | None = None
        self.width = 0.0
        self.cube: np.ndarray | None = None
        self.cube_quat = np.array([0.0, 0.0, 0.0, 1.0])
        self.closed = False   # the teleop node's hand: open until the first press
        self.mode = ''        # the teleop node's supervisor state (/teleop/state)
        self.status = 0       # its moveit_servo status code (/teleop/status)
        self.joy_type = Joy
        self.operator = operator
        node = operator.node
        with operator.paused():
            # 1 kHz: read the newest when deciding, never deserialise the rest
            self._joints = Polled(node.create_subscription(
                JointState, topics['joint_states'].name, never_called,
                qos_profile(topics['joint_states']), callback_group=PolledGroup(), raw=True))
            node.create_subscription(PoseStamped, topics['object_pose'].name, self._on_cube,
                                     qos_profile(topics['object_pose']))
            node.create_subscription(String, '/teleop/state', self._on_mode,
                                     qos_profile(topics['policy_state']))
            node.create_subscription(Int8, '/teleop/status', self._on_status, 10)
            self.joy = node.create_publisher(Joy, '/spacenav/joy', 10)

    def _on_mode(self, msg: object) -> None:
        self.mode = msg.data

    def _on_status(self, msg: object) -> None:
        self.status = int(msg.data)

    def _read_joints(self) -> None:
        """Decode the newest joint state into ``q`` (7,) rad and ``width`` m."""
        if not self._joints.take_newest():
            return
        msg = self._joints.read(lambda m: m)
        if isinstance(msg, str):
            return
        names = list(msg.name)
        try:
            q = np.array([msg.position[names.index(j)] for j in self.spec.arm_joints])
            fingers = [msg.position[names.index(j)] for j in self.spec.gripper.joints]
        except ValueError:
            return
        with self.lock:
            self.q, self.width = q, float(sum(fingers))

    def _on_cube(self, msg: object) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        with self.lock:
            self.cube = np.array([p.x, p.y, p.z])
            self.cube_quat = np.array([o.x, o.y, o.z, o.w])

    def ready(self) -> bool:
        self._read_joints()
        with self.lock:
            return self.q is not None and self.cube is not None

    def cube_position(self) -> np.ndarray:
        with self.lock:
            return self.cube.copy()

    def send(self, velocity: np.ndarray, yaw_rate: float) -> None:
        """One Joy message: linear velocity (3,) m/s and yaw rate rad/s over the caps.

        The dead-man (button 0) is held, the hand's toggle (button 1) never pressed.
        """
        msg = self.joy_type()
        msg.header.stamp = self.operator.node.get_clock().now().to_msg()
        axes = np.zeros(6)
        axes[:3] = np.clip(velocity / self.caps.linear, -1.0, 1.0)
        axes[5] = np.clip(yaw_rate / self.caps.rotational, -1.0, 1.0)
        msg.axes = [float(a) for a in axes]
        msg.buttons = [1, 0]
        self.joy.publish(msg)

    def tick(self, goal: np.ndarray) -> None:
        """Decide as the expert and publish one message."""
        from simops_learning.pick_network import quaternion_yaw, square_yaw

        self._read_joints()
        with self.lock:
            q, width, cube, quat = self.q.copy(), self.width, self.cube.copy(), self.cube_quat
        move, gripper = self.expert.decide(q, width, cube, goal)
        with torch.inference_mode():
            _, hand_yaw = self.law.grasp(torch.as_tensor(q, dtype=torch.float32)[None])
            cube_yaw = quaternion_yaw(torch.as_tensor(np.asarray(quat, float))[None])
            target = square_yaw(hand_yaw.double(), cube_yaw)
        self.set_hand(gripper < 0)
        self.send(move / 0.05, YAW_GAIN * float(target[0] - hand_yaw[0]))

    def grasp(self) -> tuple[np.ndarray, float]:
        """The grasp point (3,) m and the hand's yaw (rad) now."""
        self._read_joints()
        with self.lock:
            q = self.q.copy()
        with torch.inference_mode():
            point, yaw = self.law.grasp(torch.as_tensor(q, dtype=torch.float32)[None])
        return point[0].numpy().astype(float), float(yaw[0])

    def go_home(self, clock: Ticks) -> None:
        """Bring the hand back over the table to where an env episode starts (home)."""
        with torch.inference_mode():
            home_q = torch.tensor(np.array(self.spec.home), dtype=torch.float32)[None]
            point, yaw = self.law.grasp(home_q)
        home, home_yaw = point[0].numpy().astype(float), float(yaw[0])
        end = time.monotonic() + 15.0
        while time.monotonic() < end:
            grasp, hand_yaw = self.grasp()
            error = home - grasp
            if np.linalg.norm(error) < 0.01 and abs(home_yaw - hand_yaw) < 0.05:
                break
            self.send(3.0 * error, YAW_GAIN * (home_yaw - hand_yaw))
            clock.wait()

    def set_hand(self, close: bool) -> None:
        """Set the hand to ``close`` (or open) through the teleop node's ``~/gripper``.

        Idempotent, unlike the toggle button, so a missed press cannot invert the hand.
        """
        if close != self.closed:
            from std_srvs.srv import SetBool

            self.operator.call(SetBool, '/teleop/gripper', SetBool.Request(data=close))
            self.closed = close


def demonstrate(operator: object, scripted: ScriptedOperator, goal: np.ndarray, index: int
                ) -> tuple[str, bool, float]:
    """One demonstration to ``goal``: its bag, whether the cube was placed, seconds.

    Placed is FR3PickPlace-v0's success: the cube's centre within PLACED of the goal (for
    SETTLE ticks). The episode ends there, or at DEMO_TIMEOUT; then, unrecorded, the
    operator sets the cube down on the table and backs the hand off.
    """
    operator.publish_goal(goal)
    bag = operator.start_recording(f'demo {index}')
    started = time.monotonic()
    settled = 0
    clock = Ticks()
    moved = (time.monotonic(), scripted.grasp()[0])   # when the hand last moved 5 mm
    while (time.monotonic() - started < DEMO_TIMEOUT and settled < SETTLE
           and scripted.mode != 'FAULT' and time.monotonic() - moved[0] < STALL):
        near = np.linalg.norm(scripted.cube_position() - goal) < PLACED
        settled = settled + 1 if near else 0
        scripted.tick(goal)
        grasp = scripted.grasp()[0]
        if np.linalg.norm(grasp - moved[1]) > 0.005 or scripted.closed:
            moved = (time.monotonic(), grasp)
        clock.wait()
    seconds = time.monotonic() - started
    placed = settled >= SETTLE
    if not placed:
        print(f'  not placed: cube at {np.round(scripted.cube_position(), 3)}, expert phase '
              f'{scripted.expert.phase}, hand {"closed" if scripted.closed else "open"} '
              f'at {scripted.width * 1e3:.1f} mm, teleop {scripted.mode}, servo status '
              f'{scripted.status}', flush=True)
    scripted.send(np.zeros(3), 0.0)
    faulted = scripted.mode == 'FAULT'
    operator.report_outcome(placed, 'scripted operator' + (
        '' if placed else ', protective stop' if faulted else ', timed out'))
    operator.stop_recording()
    if faulted:
        recover(operator, scripted)
    set_down(scripted)
    if not placed and scripted.expert.phase == 'approach':
        put_back(operator, scripted, 'out of the operator\'s reach')
    return bag, placed, seconds


def put_back(operator: object, scripted: ScriptedOperator, why: str) -> None:
    """As a person would move the cube by hand, the scene returns to where the first
    demonstration found it (the simulator's ``~/reset``: the cube at its start, the hand
    home), the teleop node disabled meanwhile; ``why`` is printed."""
    from ros_helpers import wait_until
    from std_srvs.srv import Trigger

    print(f'  the cube is {why}: put back (/sim/reset)', flush=True)
    operator.enable(False, '/teleop')
    operator.call(Trigger, '/sim/reset', Trigger.Request())
    operator.enable(True, '/teleop')
    if not wait_until(lambda: scripted.mode == 'RUNNING'
                      and in_cube_area(scripted.cube_position()), 10.0):
        raise SystemExit(f'the scene did not come back: teleop {scripted.mode}, cube at '
                         f'{np.round(scripted.cube_position(), 3)}')


def recover(operator: object, scripted: ScriptedOperator) -> None:
    """After a protective stop: simops-recover, then the teleop node's ~/enable."""
    from ros_helpers import installed_executable, wait_until

    print('  protective stop: simops-recover, then /teleop/enable', flush=True)
    run(installed_executable('simops_bringup', 'simops-recover'))
    operator.enable(True, '/teleop')
    if not wait_until(lambda: scripted.mode == 'RUNNING', 10.0):
        raise SystemExit(f'the teleop node did not resume: {scripted.mode}')


class Ticks:
    """Sleeps to the next tick at RATE."""

    def __init__(self) -> None:
        self.next = time.monotonic()

    def wait(self) -> None:
        self.next += 1.0 / RATE
        time.sleep(max(0.0, self.next - time.monotonic()))


def set_down(scripted: ScriptedOperator) -> None:
    """Lower a held cube to the table, open the hand, back off upward (not recorded)."""
    from simops_learning.pick_env import CUBE_HALF

    clock = Ticks()
    end = time.monotonic() + 10.0
    while (scripted.closed and scripted.cube_position()[2] > CUBE_HALF + 0.006
           and time.monotonic() < end):
        scripted.send(np.array([0.0, 0.0, -0.08]), 0.0)
        clock.wait()
    scripted.set_hand(False)
    for k in range(int(1.5 * RATE)):   # open, then rise
        scripted.send(np.array([0.0, 0.0, 0.0 if k < RATE // 2 else 0.1]), 0.0)
        clock.wait()
    scripted.go_home(clock)
    for _ in range(10):   # the operator lets go of the mouse
        scripted.send(np.zeros(3), 0.0)
        clock.wait()


def next_goal(rng: np.random.Generator, cube: np.ndarray) -> np.ndarray:
    """A goal drawn as FR3PickPlace-v0 draws its goals, at least MIN_TRAVEL from the cube."""
    from simops_learning.pick_env import GOAL_HIGH, GOAL_LOW, MIN_TRAVEL

    while True:
        goal = rng.uniform(GOAL_LOW, GOAL_HIGH)
        if np.linalg.norm(goal - cube) >= MIN_TRAVEL:
            return goal


def in_cube_area(cube: np.ndarray) -> bool:
    """Whether ``cube`` (3,) m lies where FR3PickPlace-v0's cubes start."""
    from simops_learning.pick_env import OBJECT_HIGH, OBJECT_LOW

    return bool(np.all(cube[:2] >= OBJECT_LOW) and np.all(cube[:2] <= OBJECT_HIGH))


def record(demos: int, folder: Path, seed: int) -> list[tuple[str, bool, float]]:
    """Launch the graph and record ``demos`` demonstrations; each one's bag, outcome, time."""
    from ros_helpers import NodeProcess, installed_executable, wait_until

    from simops_bringup.demo.ros_operator import Operator
    from simops_core.robot_spec import load_robot_spec

    spec = load_robot_spec('fr3')
    argv = [str(installed_executable('simops_bringup', 'simops-launch')), 'sim',
            'task:=pick_place', 'teleop:=spacemouse', 'record:=true', 'cameras:=false',
            f'record_dir:={folder / "episodes"}']
    rng = np.random.default_rng(seed)
    results = []
    with NodeProcess(argv, folder / 'launch.log', env=dict(os.environ)) as graph:
        operator = Operator(spec.base_frame)
        try:
            scripted = ScriptedOperator(operator, spec)
            if not wait_until(scripted.ready, 60):
                raise SystemExit(f'the graph did not come up:\n{graph.output[-2000:]}')
            for index in range(demos):
                if not in_cube_area(scripted.cube_position()):
                    put_back(operator, scripted, 'outside the area the env\'s cubes start in')
                cube = scripted.cube_position()
                if not (0.2 < cube[0] < 0.8 and abs(cube[1]) < 0.4 and cube[2] > 0.0):
                    print(f'the cube is out of reach at {np.round(cube, 3)}; stopping')
                    break
                goal = next_goal(rng, cube)
                bag, placed, seconds = demonstrate(operator, scripted, goal, index)
                results.append((bag, placed, seconds))
                print(f'demo {index}: {"placed" if placed else "NOT placed"} in {seconds:.1f} s '
                      f'(goal {np.round(goal, 3)}), {Path(bag).name}', flush=True)
        finally:
            operator.close()
            graph.stop()
    return results


def run(*args: object) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False,
                            cwd=REPO)
    if result.returncode:
        raise SystemExit(f'{args[0]} failed ({result.returncode}): {result.stderr[-2000:]}')
    return result.stdout


def mixed(folder: Path, demonstrations: Path, rounds: int, share: float, at_cap: str,
          eval_episodes: int) -> None:
    """Step 5 of the module docstring: co-train on the demonstrations and the sim, then gate."""
    from ros_helpers import installed_executable

    from simops_bringup.arguments import robot_names
    from simops_bringup.pipeline_commands import gate_command
    from simops_bringup.pipeline_file import load_pipeline

    started = time.monotonic()
    out = run(installed_executable('simops_learning', 'simops-train'), '--task', 'pick_place',
              '--init-policy', SHIPPED, '--dataset', demonstrations, '--weight', share,
              '--expert-rounds', rounds, '--expert-weight', 1.0 - share, '--twist-at-cap',
              at_cap, '--eval-episodes', eval_episodes, '--out', folder / 'mixed')
    print(f'mixed (the shipped policy fine-tuned on the demonstrations and {rounds} DAgger '
          f'rounds with the grasp expert in the sim, weights {share:g} / {1.0 - share:g}, '
          f'twists at the cap {at_cap}, {time.monotonic() - started:.0f} s):')
    for line in out.splitlines():
        print(f'  {line}')
    pipeline = replace(load_pipeline(PIPELINE, robot_names()), sim_gap=False)
    gate = folder / 'mixed_gate'
    print(f'gating it as {PIPELINE.name} gates ({len(pipeline.grid)} grid axes, '
          f'{pipeline.episodes} episodes per cell; about 20 minutes)', flush=True)
    started = time.monotonic()
    run(*shlex.split(gate_command(pipeline, str(folder / 'mixed.pt'), str(gate))))
    judged = json.loads((gate / 'validation.json').read_text())
    failed = ', '.join(f'{count} {how}' for how, count in judged['failures'].items())
    print(f'mixed, the shipped gate: {judged["verdict"].upper()} (mean success '
          f'{judged["mean_success"]:.1%}, min {judged["min_success"]:.1%} over '
          f'{len(judged["configs"])} configurations x {pipeline.episodes} episodes, '
          f'{judged["protective_stops"]} protective stops, {judged["unsafe_episodes"]} unsafe; '
          f'failed episodes: {failed or "none"}; {time.monotonic() - started:.0f} s)')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--demos', type=int, default=30)
    parser.add_argument('--eval-episodes', type=int, default=50)
    parser.add_argument('--seed', type=int, default=0, help='the goals\' seed')
    parser.add_argument('--keep', type=Path, help='keep the bags, dataset and policy here')
    parser.add_argument('--expert-rounds', type=int, default=3,
                        help='step 5: DAgger rounds with the grasp expert in the sim mixed '
                             'in (0: leave the step out)')
    parser.add_argument('--share', type=float, default=0.1,
                        help='step 5: the demonstrations\' share of the batches (default 0.1)')
    parser.add_argument('--twist-at-cap', choices=('exact', 'at-least'), default='exact',
                        help='step 5: how the demonstrations\' twists at the teleop node\'s '
                             'cap are learnt (simops-train\'s option; default exact)')
    parser.add_argument('--demonstrations', type=Path, metavar='DATASET',
                        help='an exported dataset of earlier demonstrations: no recording')
    args = parser.parse_args()
    if not 0.0 < args.share < 1.0:
        parser.error(f'--share must be between 0 and 1, got {args.share:g}')
    terminate_as_interrupt()   # a SIGTERM stops the graph too
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    from ros_helpers import installed_executable

    with tempfile.TemporaryDirectory(prefix='teleop_demos_') as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        dataset = args.demonstrations or folder / 'dataset'
        if args.demonstrations is None:
            started = time.monotonic()
            results = record(args.demos, folder, args.seed)
            placed = [r for r in results if r[1]]
            print(f'{len(placed)} of {len(results)} demonstrations placed the cube, '
                  f'{np.mean([r[2] for r in results]):.1f} s each on average, '
                  f'{time.monotonic() - started:.0f} s in all')
            print(run(installed_executable('simops_learning', 'simops-dataset'), 'export',
                      *[r[0] for r in results], '--card', CARD, '--out',
                      dataset).splitlines()[-1])
        claim.release()
        out = run(installed_executable('simops_learning', 'simops-train'), '--task',
                  'pick_place', '--dataset', dataset, '--eval-episodes', args.eval_episodes,
                  '--out', folder / 'bc_demos')
        for line in out.splitlines():
            print(f'  {line}')
        report = folder / 'bc_demos_standin'
        run(installed_executable('simops_learning', 'simops-validate'), '--policy',
            folder / 'bc_demos.pt', '--task', 'pick_place', '--sim-params', STANDIN,
            '--grid', 'delay=0', '--episodes', args.eval_episodes, '--out', report,
            '--verdict-exit-zero')
        judged = json.loads((report / 'validation.json').read_text())
        print(f'at the stand-in\'s physics ({STANDIN.name}, validation sim, no randomisation): '
              f'placed in {judged["mean_success"]:.0%} of {args.eval_episodes} episodes, '
              f'{judged["protective_stops"]} protective stops, {judged["unsafe_episodes"]} '
              f'unsafe')
        if args.expert_rounds:
            mixed(folder, dataset, args.expert_rounds, args.share, args.twist_at_cap,
                  args.eval_episodes)
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
