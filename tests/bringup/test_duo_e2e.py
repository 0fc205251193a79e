"""``simops-launch sim layout:=fr3_duo``: two FR3s in one physics, a policy per arm, over DDS.

One simulator process steps both arms and publishes the one ``/clock``; each arm's topics,
actions and gripper live in its namespace (``/left``, ``/right``) with the spec's joint
names; a policy per arm drives it at its own 20 Hz to the goal published in that namespace.
Nothing of one arm appears in the other's namespace or at the global names.
"""

from __future__ import annotations

import time

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from launch_helpers import (
    FAR_GOAL,
    GOAL,
    REACH_TIMEOUT,
    STARTUP,
    distance,
    goal_message,
    node_pids,
    stop_cleanly,
)
from policy_helpers import TOPICS, qos
from ros_helpers import RosProbe, wait_until
from sim_helpers import stamp

from simops_learning.reach_env import SUCCESS_RADIUS

ARMS = {'left': GOAL, 'right': FAR_GOAL}
ARM_KEYS = ('joint_states', 'joint_commands', 'ee_pose', 'goal_pose', 'joint_trajectory',
            'robot_state')
RATE_WINDOW = 10.0  # s over which each policy's command rate is measured
DIAGNOSTICS = TOPICS['diagnostics'].name


def arm_topic(arm: str, key: str) -> str:
    return f'/{arm}{TOPICS[key].name}'


@pytest.mark.slow
def test_two_arms_one_physics_two_policies_and_no_leaks(launch: object,
                                                        ros_probe: RosProbe) -> None:
    ros_probe.subscribe(DIAGNOSTICS, DiagnosticArray, 100)
    for arm, goal in ARMS.items():
        ros_probe.subscribe(arm_topic(arm, 'ee_pose'), PoseStamped, 100)
        ros_probe.publisher(arm_topic(arm, 'goal_pose'), PoseStamped,
                            qos('goal_pose')).publish(goal_message(goal))
    proc = launch('sim', 'layout:=fr3_duo')   # type: ignore[operator]
    assert wait_until(lambda: set(node_pids(proc.output)) == {
        'sim', 'left/policy', 'right/policy'}, STARTUP), proc.output

    def reached(arm: str) -> bool:
        poses = ros_probe.messages(arm_topic(arm, 'ee_pose'))
        return bool(poses) and distance(poses[-1], ARMS[arm]) < SUCCESS_RADIUS

    def distances() -> dict[str, float]:
        return {arm: distance(ros_probe.messages(arm_topic(arm, 'ee_pose'))[-1], goal)
                for arm, goal in ARMS.items() if ros_probe.messages(arm_topic(arm, 'ee_pose'))}

    # a string message: pytest shortens any other to 240 characters, the log with it
    assert wait_until(lambda: all(reached(arm) for arm in ARMS), STARTUP + REACH_TIMEOUT), (
        f'distances {distances()}\n{proc.output[-3000:]}')

    # Each policy commands its arm at 20 Hz of sim time, the clock it runs on (the graph's
    # use_sim_time): on two loaded cores the simulator of two arms runs slower than real
    # time, and a policy on wall-clock deadlines sent more commands per sim second than its
    # rate. The command count between two of its /diagnostics, timed by their stamps (sim
    # time).
    arrivals: list[tuple[float, DiagnosticArray]] = []
    ros_probe.node.create_subscription(DiagnosticArray, DIAGNOSTICS,
                                       lambda msg: arrivals.append((time.monotonic(), msg)), 100)

    def loop(arm: str) -> list[tuple[float, dict[str, str]]]:
        return [(stamp(d), {kv.key: kv.value for kv in status.values})
                for _, d in list(arrivals) for status in d.status
                if status.name == f'{arm}/policy: control loop']

    assert wait_until(lambda: all(loop(arm) for arm in ARMS), 10)
    first = {arm: loop(arm)[-1] for arm in ARMS}
    assert wait_until(lambda: all(loop(arm)[-1][0] > first[arm][0] + RATE_WINDOW
                                  for arm in ARMS), 4 * RATE_WINDOW)
    for arm in ARMS:
        (t0, v0), (t1, v1) = first[arm], loop(arm)[-1]
        rate = (int(v1['commands']) - int(v0['commands'])) / (t1 - t0)
        # on a failure, the loop's counters over the window and its timings say why
        counted = {key: float(v1[key]) - float(v0[key]) for key in v1
                   if key in ('ticks', 'overruns', 'repeated_states') or key.startswith('faults')}
        assert abs(rate - 20.0) < 0.5, (arm, rate, t1 - t0, counted, v1, proc.output[-2000:])

    # No leaks: the arms' topics exist only in their namespaces, served by their own nodes.
    node = ros_probe.node
    topics = {name for name, _ in node.get_topic_names_and_types()}
    for key in ARM_KEYS:
        assert TOPICS[key].name not in topics, TOPICS[key].name
        for arm in ARMS:
            name = arm_topic(arm, key)
            assert name in topics, (name, sorted(topics))
            endpoints = (node.get_publishers_info_by_topic(name)
                         + node.get_subscriptions_info_by_topic(name))
            others = {e.node_namespace for e in endpoints
                      if e.node_name != node.get_name()} - {f'/{arm}'}
            assert not others, (name, others)
    assert [e.node_name for e in node.get_publishers_info_by_topic('/clock')] == ['sim']
    names = node.get_node_names_and_namespaces()
    for arm in ARMS:
        for expected in ('sim', 'policy', 'franka_gripper', 'action_server', 'controller_manager'):
            assert (expected, f'/{arm}') in names, (expected, arm, names)
    time.sleep(0.1)
    stop_cleanly(proc)
