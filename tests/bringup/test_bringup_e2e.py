"""Both bringup profiles end to end through ``simops-launch``: real nodes over DDS, no mocks.

- ``sim``: the simulator, the shipped policy and the recorder (``record:=true``); the arm
  reaches a goal published on /goal_pose, the episode is a readable bag, and Ctrl-C (SIGINT
  to the runner) stops every node cleanly with no orphaned process.
- ``real_robot standin:=true``: the stand-in arm with hidden physics behind franka_ros2's
  topic names; the policy stays DISABLED and silent until ``~/enable``, then drives the arm
  through JointTrajectory messages; the e-stop holds the arm, and its release does not
  resume motion.

The runner is the installed ``simops-launch`` (``make build`` first) in the test session's
isolated domain, so the probe shares the domain with the nodes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from bag_helpers import load_trajectory
from geometry_msgs.msg import PoseStamped
from launch_helpers import (
    FAR_GOAL,
    GOAL,
    REACH_TIMEOUT,
    STARTUP,
    distance,
    goal_message,
    group_alive,
    node_pids,
    stop_cleanly,
)
from policy_helpers import SPEC, STATE, TOPICS, call_enable, qos, states
from rclpy.duration import Duration
from recorder_helpers import trigger
from ros_helpers import RosProbe, wait_until
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory

from simops_core.bag_reader import read_bag
from simops_core.observation import JointIndex
from simops_core.robot_spec import load_robot_spec
from simops_learning.reach_env import SUCCESS_RADIUS

EE_POSE = TOPICS['ee_pose'].name
ESTOP = TOPICS['estop'].name
FRANKA_STATES = '/franka/joint_states'
FRANKA_TRAJECTORY = '/fr3_arm_controller/joint_trajectory'
SETTLE = 1.0               # s for the stand-in's servos to settle after the e-stop
HELD = 1.0                 # s the settled arm is watched
STILL = 1e-3               # rad of motion allowed while held
HOLD_TOLERANCE = 5e-3      # rad between the held arm and the hold target (friction)


def recorder_has(probe: RosProbe, publisher: Any) -> bool:
    """Whether the recorder's reader of ``publisher``'s topic is matched and has acknowledged
    everything published (a latched message included), in the probe's view of the graph."""
    readers = probe.node.get_subscriptions_info_by_topic(publisher.topic_name)
    return (any(r.node_name.startswith('recorder') for r in readers)   # its I/O node
            and publisher.get_subscription_count() >= len(readers)
            and publisher.wait_for_all_acked(Duration(seconds=0)))


def test_sim_profile_reaches_the_goal_records_a_bag_and_stops_on_ctrl_c(
        launch: object, ros_probe: RosProbe, tmp_path: Path) -> None:
    episodes = tmp_path / 'episodes'
    ros_probe.subscribe(EE_POSE, PoseStamped, 100)
    ros_probe.subscribe(STATE, String, qos('policy_state'))
    goal_pub = ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    goal_pub.publish(goal_message(GOAL))
    proc = launch('sim', 'record:=true', f'record_dir:={episodes}')
    assert wait_until(lambda: set(node_pids(proc.output)) == {'sim', 'policy', 'recorder'},
                      STARTUP), proc.output
    # The goal is latched: the recorder stores it when its reader has it. The policy can
    # reach the goal in a second, so the episode starts once the recorder holds the goal (in
    # a CI run it subscribed 2.2 s after its other topics, and the bag held no goal).
    assert wait_until(lambda: recorder_has(ros_probe, goal_pub), STARTUP), proc.output
    assert trigger(ros_probe, '/recorder/start', timeout=STARTUP).success
    assert wait_until(lambda: 'RUNNING' in states(ros_probe), STARTUP), proc.story()
    reached = wait_until(lambda: any(distance(p, GOAL) < SUCCESS_RADIUS
                                     for p in ros_probe.messages(EE_POSE)), REACH_TIMEOUT)
    closest = min(distance(p, GOAL) for p in ros_probe.messages(EE_POSE))
    assert reached, f'closest approach {closest * 1e3:.1f} mm\n{proc.story()}'
    pids = node_pids(proc.output)
    assert all(group_alive(pid) for pid in pids.values())

    out = stop_cleanly(proc)  # the open episode is finished by the recorder on SIGINT
    assert '[simops-launch] sending SIGINT to sim, policy, recorder' in out
    bags = sorted(p.parent for p in episodes.rglob('metadata.yaml'))
    assert len(bags) == 1, list(episodes.rglob('*'))
    read_bag(bags[0]).require(TOPICS['joint_states'].name, TOPICS['joint_commands'].name,
                              EE_POSE, TOPICS['goal_pose'].name, STATE)
    recorded = load_trajectory(bags[0], SPEC.joint_names).poses[EE_POSE].position
    assert np.min(np.linalg.norm(recorded - GOAL, axis=1)) < SUCCESS_RADIUS


def test_sim_profile_runs_the_panda_end_to_end(launch: object, ros_probe: RosProbe) -> None:
    """robot:=panda: the Panda's model and policy, panda_joint* names, and the goal reached."""
    panda = load_robot_spec('panda')
    ros_probe.subscribe(EE_POSE, PoseStamped, 100)
    ros_probe.subscribe(STATE, String, qos('policy_state'))
    ros_probe.subscribe(TOPICS['joint_states'].name, JointState, qos('joint_states'))
    ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped,
                        qos('goal_pose')).publish(goal_message(GOAL, panda.base_frame))
    proc = launch('sim', 'robot:=panda')
    assert wait_until(lambda: 'RUNNING' in states(ros_probe), STARTUP), proc.story()
    assert 'panda_reach.pt' in proc.output
    assert wait_until(lambda: any(distance(p, GOAL) < SUCCESS_RADIUS
                                  for p in ros_probe.messages(EE_POSE)), REACH_TIMEOUT), \
        proc.story()
    names = ros_probe.messages(TOPICS['joint_states'].name)[-1].name
    assert list(names) == list(panda.joint_names)
    stop_cleanly(proc)


class ArmWatch:
    """The stand-in's arm positions with their (monotonic) receive times.

    The probe keeps only the newest few of the 1 kHz joint states (the state QoS), so what it
    stores is current even when it cannot keep up with every message.
    """

    def __init__(self, probe: RosProbe) -> None:
        self.index = JointIndex(SPEC.arm_joints)
        self.samples: list[tuple[float, np.ndarray]] = []
        probe.node.create_subscription(JointState, FRANKA_STATES, self._store,
                                       qos('joint_states'))

    def _store(self, msg: JointState) -> None:
        self.samples.append((time.monotonic(),
                             self.index.select(msg.name, msg.position, np.zeros(7))))

    def since(self, start: float) -> np.ndarray:
        """Positions (N, 7) rad received after monotonic time ``start``."""
        return np.array([q for t, q in list(self.samples) if t > start])


def test_real_robot_standin_waits_for_enable_drives_the_trajectory_topic_and_estop_holds(
        launch: object, ros_probe: RosProbe) -> None:
    arm = ArmWatch(ros_probe)
    ros_probe.subscribe(FRANKA_TRAJECTORY, JointTrajectory, 500)
    ros_probe.subscribe(STATE, String, qos('policy_state'))
    goal = ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    goal.publish(goal_message(FAR_GOAL))
    estop = ros_probe.publisher(ESTOP, Bool, qos('estop'))

    proc = launch('real_robot', 'standin:=true', 'record:=false')
    assert wait_until(lambda: set(node_pids(proc.output)) == {'standin', 'arm_setup', 'policy'},
                      STARTUP)
    assert wait_until(lambda: len(arm.samples) > 10, STARTUP), proc.story()
    assert wait_until(lambda: states(ros_probe)[-1:] == ['DISABLED'], STARTUP)
    disabled = time.monotonic()
    time.sleep(2.0)  # goal, object pose and joint states are all there: still DISABLED
    assert set(states(ros_probe)) == {'DISABLED'}
    assert ros_probe.messages(FRANKA_TRAJECTORY) == []
    rest = arm.since(disabled)   # the arm rests at home, as its encoders (2 mrad offsets) see it
    assert np.ptp(rest, axis=0).max() < 1e-3 and np.abs(rest - SPEC.home).max() < 3e-3

    assert call_enable(ros_probe, True).success
    assert wait_until(lambda: states(ros_probe)[-1:] == ['RUNNING'], 20), proc.story()
    assert 'RAMPING' in states(ros_probe)
    commands = ros_probe.messages(FRANKA_TRAJECTORY)
    assert commands and all(list(c.joint_names) == list(SPEC.arm_joints) for c in commands)
    running = time.monotonic()
    time.sleep(1.0)
    moving = arm.since(running)
    assert np.abs(moving[-1] - moving[0]).max() > 0.02, 'the policy did not move the arm'

    estop.publish(Bool(data=True))
    assert wait_until(lambda: states(ros_probe)[-1:] == ['ESTOP'], 5), states(ros_probe)[-5:]
    stopped = time.monotonic()
    goal.publish(goal_message(GOAL))  # a policy that is not held would head there
    time.sleep(SETTLE + HELD)
    holds = {tuple(c.points[0].positions) for c in ros_probe.messages(FRANKA_TRAJECTORY)[-20:]}
    assert len(holds) == 1, 'the e-stopped policy must repeat one hold target'
    hold = np.array(holds.pop())
    held = arm.since(stopped + SETTLE)
    assert len(held) > 50
    first, last = held[:20].mean(axis=0), held[-20:].mean(axis=0)  # 1e-4 rad encoder noise
    assert np.abs(last - first).max() < STILL, last - first
    assert np.abs(last - hold).max() < HOLD_TOLERANCE, last - hold

    estop.publish(Bool(data=False))  # release latches HOLD: no motion until ~/enable
    assert wait_until(lambda: states(ros_probe)[-1:] == ['HOLD'], 5), states(ros_probe)[-5:]
    released = time.monotonic()
    time.sleep(1.0)
    assert np.abs(arm.since(released)[-20:].mean(axis=0) - last).max() < STILL
    stop_cleanly(proc)


def test_real_robot_recorder_records_the_arms_joint_states(launch: object, ros_probe: RosProbe,
                                                           tmp_path: Path) -> None:
    episodes = tmp_path / 'episodes'
    proc = launch('real_robot', 'standin:=true', 'record:=true', f'record_dir:={episodes}')
    assert wait_until(lambda: 'subscribed to /ee_pose' in proc.output, STARTUP), proc.output
    # The whole graph is up (the policy imports torch for seconds) before Ctrl-C ends it.
    assert wait_until(lambda: 'fr3_reach.pt (' in proc.output, STARTUP), proc.output
    assert trigger(ros_probe, '/recorder/start', timeout=STARTUP).success
    time.sleep(1.0)
    bag = Path(trigger(ros_probe, '/recorder/stop').message)
    stop_cleanly(proc)
    read_bag(bag).require(FRANKA_STATES)


def test_real_robot_pick_place_grasps_through_franka_gripper(launch: object,
                                                              ros_probe: RosProbe) -> None:
    """The shipped pick-and-place policy on the stand-in, real-robot profile, franka_ros2's
    default release: its gripper widths go as GripperCommand goals to /franka_gripper (the
    node name since franka_ros2 v2.0.0), which grasps the cube, and the cube is placed."""
    ros_probe.subscribe(STATE, String, qos('policy_state'))
    reliable = 10   # joint_state_publisher's subscription: reliable, depth 10
    ros_probe.subscribe('/franka_gripper/joint_states', JointState, reliable)
    ros_probe.subscribe(TOPICS['object_pose'].name, PoseStamped, 1000)
    goal = np.array([0.45, -0.15, 0.15])   # m, the demo's: the cube at (0.5, 0, 0.02) goes here
    publisher = ros_probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose'))
    publisher.publish(goal_message(goal))
    proc = launch('real_robot', 'standin:=true', 'record:=false', 'task:=pick_place')
    assert wait_until(lambda: states(ros_probe)[-1:] == ['DISABLED'], STARTUP), \
        proc.story()
    assert ros_probe.wait_for_messages('/franka_gripper/joint_states', timeout=STARTUP)
    assert call_enable(ros_probe, True).success

    def cube_error() -> float:
        poses = ros_probe.messages(TOPICS['object_pose'].name)
        if not poses:
            return float('inf')
        p = poses[-1].pose.position
        return float(np.linalg.norm([p.x - goal[0], p.y - goal[1], p.z - goal[2]]))

    assert wait_until(lambda: cube_error() < SUCCESS_RADIUS, 30), (cube_error(),
                                                                   proc.story())
    openings = [sum(m.position) for m in ros_probe.messages('/franka_gripper/joint_states')]
    held = [w for w in openings if 0.03 < w < 0.05]   # closed on the 4 cm cube, not on nothing
    assert len(held) >= 5, openings                    # a third of a second at 15 Hz
    assert 'gripper widths go as goals to /franka_gripper/gripper_action' in proc.output
    assert '[franka_gripper]: goal: grasp' in proc.output
    assert call_enable(ros_probe, False).success
    stop_cleanly(proc)
