"""The sim node in realtime mode, as a real process over DDS (no mocked ROS)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import mujoco
import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile
from rclpy.serialization import deserialize_message
from ros_helpers import RosProbe, wait_until
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from sim_helpers import (
    SCENE_XML,
    command_publisher,
    fifo_threads,
    may_use_fifo,
    qos,
    renamed_scene,
    stamp,
    start_sim,
    stream_until,
    subscribe_states,
    topic,
    trajectory_publisher,
)
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.robot_spec import load_robot_spec
from simops_sim.physics import Physics
from simops_sim.trajectory_plan import TrajectoryPlan, parse_trajectory

SPEC = load_robot_spec('fr3')
TOPICS_QOS = topic('joint_states').qos.as_profile_kwargs()


def call(probe: RosProbe, service_type: type, name: str, request: object) -> object:
    client = probe.node.create_client(service_type, name)
    assert client.wait_for_service(timeout_sec=20), f'{name} not available'
    future = client.call_async(request)
    assert wait_until(future.done, timeout=10), f'{name} did not answer'
    return future.result()


def diagnostics(probe: RosProbe) -> dict[str, str]:
    msgs = probe.wait_for_messages(topic('diagnostics').name)
    return {kv.key: kv.value for kv in msgs[-1].status[0].values}


def latest(probe: RosProbe, topic_name: str) -> object:
    return probe.wait_for_messages(topic_name)[-1]


def test_joint_states_rate_effort_poses_and_clock(ros_probe: RosProbe, tmp_path: Path) -> None:
    states = topic('joint_states').name
    ros_probe.subscribe(topic('ee_pose').name, PoseStamped, qos('ee_pose'))
    ros_probe.subscribe(topic('object_pose').name, PoseStamped, qos('object_pose'))
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    # Every message is kept (serialized, deep reader queue), so a probe starved of CPU by
    # other processes receives them late but never loses one.
    arrivals: list[tuple[float, bytes]] = []
    deep = QoSProfile(**{**TOPICS_QOS, 'depth': 5000})
    ros_probe.node.create_subscription(JointState, states, lambda raw: arrivals.append(
        (time.monotonic(), raw)), deep, raw=True)
    with start_sim(tmp_path) as node:
        assert wait_until(lambda: bool(arrivals), timeout=30), node.output
        # The physics thread alone runs SCHED_FIFO at 50, as ros2_control_node's loop
        if may_use_fifo(50):
            assert fifo_threads(node.proc.pid) == [50], node.output
            assert 'physics thread SCHED_FIFO at priority 50' in node.output
        else:
            assert fifo_threads(node.proc.pid) == [] and 'ulimit -r' in node.output
        time.sleep(1.0)
        first = len(arrivals)
        time.sleep(5.0)
        window = [(wall, stamp(deserialize_message(raw, JointState)))
                  for wall, raw in arrivals[first:]]
        # No message lost: one per 1 ms of sim time, consecutive.
        steps = np.round(np.diff([sim for _, sim in window]) * 1e3)
        assert np.all(steps == 1), f'gaps in /joint_states: {np.unique(steps)}'
        # Sim time against wall time, from the lower envelope of (receive time - stamp):
        # a late delivery only raises it, so the envelope follows the publishing schedule.
        lag = np.array([wall - sim for wall, sim in window])
        edge = len(window) // 5
        i0, i1 = int(np.argmin(lag[:edge])), len(lag) - edge + int(np.argmin(lag[-edge:]))
        sim_span = window[i1][1] - window[i0][1]
        rate = 1000.0 * sim_span / (window[i1][0] - window[i0][0])  # per wall second
        assert abs(rate - 1000.0) < 20.0, f'{rate:.1f} Hz; node: {diagnostics(ros_probe)}'
        subscribe_states(ros_probe)
        received = ros_probe.wait_for_messages(states, count=1)
        ros_probe.subscribe(topic('clock').name, Clock, qos('clock'))

        msg = received[-1]
        assert tuple(msg.name) == SPEC.joint_names
        assert msg.header.frame_id == SPEC.base_frame
        assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 9
        assert np.allclose(msg.position[:7], SPEC.home, atol=1e-3)
        assert abs(msg.effort[3]) > 5.0  # joint 4 holds the forearm against gravity

        offline = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC)
        offline.reset_keyframe('home')
        expected = offline.state()
        ee = latest(ros_probe, topic('ee_pose').name)
        assert ee.header.frame_id == SPEC.base_frame
        p, o = ee.pose.position, ee.pose.orientation
        assert np.allclose([p.x, p.y, p.z], expected.flange_pos, atol=1e-3)
        assert abs(np.dot([o.w, o.x, o.y, o.z], expected.flange_quat)) > 0.9999
        cube = latest(ros_probe, topic('object_pose').name).pose.position
        assert np.allclose([cube.x, cube.y, cube.z], expected.object_pos, atol=2e-3)
        clock = latest(ros_probe, topic('clock').name).clock
        assert abs(clock.sec + 1e-9 * clock.nanosec - stamp(msg)) < 0.5

        values = diagnostics(ros_probe)
        assert abs(float(values['realtime_factor']) - 1.0) < 0.05, values
        assert float(values['step_time_mean_us']) > 0
        assert node.stop() == 0, node.output


def test_step_is_tracked_reset_returns_home_and_pause_stops_time(ros_probe: RosProbe,
                                                                 tmp_path: Path) -> None:
    states = subscribe_states(ros_probe)
    target = SPEC.home + 0.1   # 2 rad/s over the first 50 ms period: within every limit
    with start_sim(tmp_path) as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = command_publisher(ros_probe)
        t0 = stamp(ros_probe.messages(states)[-1])
        before = np.abs(np.array(ros_probe.messages(states)[-1].position[:7]) - target).max()
        assert before > 0.1
        stream_until(ros_probe, pub, [*target, 0.04], until=t0 + 1.2)
        after = next(m for m in ros_probe.messages(states) if stamp(m) >= t0 + 1.0)
        assert np.abs(np.array(after.position[:7]) - target).max() < 0.01, after.position
        assert abs(after.position[7] + after.position[8] - 0.04) < 2e-3  # gripper width

        response = call(ros_probe, Trigger, '/sim/reset', Trigger.Request())
        assert response.success, response.message
        assert wait_until(lambda: stamp(ros_probe.messages(states)[-1]) < 0.5, timeout=5)
        home = ros_probe.messages(states)[-1]
        assert np.allclose(home.position[:7], SPEC.home, atol=1e-4)
        assert np.allclose(home.position[7:], [0.04, 0.04], atol=1e-4)

        assert call(ros_probe, SetBool, '/sim/pause', SetBool.Request(data=True)).success
        time.sleep(0.2)
        frozen = len(ros_probe.messages(states))
        time.sleep(0.5)
        assert len(ros_probe.messages(states)) == frozen
        assert call(ros_probe, SetBool, '/sim/pause', SetBool.Request(data=False)).success
        ros_probe.wait_for_messages(states, count=frozen + 100, timeout=5)
        assert node.stop() == 0, node.output


def test_joint_trajectory_moves_along_the_interpolated_path(ros_probe: RosProbe,
                                                            tmp_path: Path) -> None:
    states = subscribe_states(ros_probe)
    # Every joint (JTC refuses partial trajectories), not in spec order; 4 and 1 move.
    names = ['fr3_joint4', 'fr3_joint1', 'fr3_joint2', 'fr3_joint3', 'fr3_joint5',
             'fr3_joint6', 'fr3_joint7']
    rest = [float(SPEC.home[i]) for i in (1, 2, 4, 5, 6)]
    # The first point is due at the stamp, so the path does not depend on when the message
    # arrives (it is reached from the target at arrival, JTC's rule: here the same point).
    points = [(0.0, [SPEC.home[3], SPEC.home[0], *rest]),
              (1.0, [SPEC.home[3] + 0.3, 0.3, *rest]), (2.0, [SPEC.home[3], 0.6, *rest])]
    with start_sim(tmp_path) as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = ros_probe.publisher(topic('joint_trajectory').name, JointTrajectory,
                                  qos('joint_trajectory'))
        assert wait_until(lambda: pub.get_subscription_count() > 0, timeout=20)
        time.sleep(0.3)
        msg = JointTrajectory(joint_names=names)
        start_ns = int((stamp(ros_probe.messages(states)[-1]) + 1.5) * 1e3) * 1_000_000
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(start_ns, 1_000_000_000)
        for t, positions in points:
            point = JointTrajectoryPoint(positions=positions)
            point.time_from_start.sec = int(t)
            msg.points.append(point)
        pub.publish(msg)
        start = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        assert wait_until(lambda: stamp(ros_probe.messages(states)[-1]) > start + 2.5, 15)
        received = {round(stamp(m), 3): np.array(m.position[:7])
                    for m in ros_probe.messages(states) if start - 0.1 < stamp(m) < start + 2.5}
        assert node.stop() == 0, node.output

    # Offline: the same wrapper with the same plan, stepped as the node steps it.
    physics = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC)
    physics.reset_keyframe('home')
    goal = parse_trajectory(names, [t for t, _ in points], [p for _, p in points],
                            [[], []], SPEC.arm_joints, start)
    plan = TrajectoryPlan(goal, start, physics.arm_target)
    target, velocity, path, predicted = np.empty(7), np.empty(7), np.empty(7), {}
    while physics.time < start + 2.6:  # past the last received stamp
        plan.sample(physics.time, target, velocity)
        physics.set_arm_target(target, velocity)
        physics.step()
        predicted[round(physics.time, 3)] = physics.state().position[:7]
    checked = 0
    for t, q in received.items():
        assert np.allclose(q, predicted[t], atol=1e-9), t
        plan.sample(t, path)
        assert np.abs(q - path).max() < 0.05, (t, q - path)  # servo lag on the ramp
        checked += 1
    assert checked > 1000
    final = received[max(received)]
    assert abs(final[0] - 0.6) < 5e-3 and abs(final[3] - SPEC.home[3]) < 5e-3
    mid = received[round(start + 1.0, 3)]
    assert abs(mid[3] - (SPEC.home[3] + 0.3)) < 0.05 and abs(mid[0] - 0.3) < 0.05


def test_bad_commands_never_crash_and_hold_the_last_valid_target(ros_probe: RosProbe,
                                                                 tmp_path: Path) -> None:
    states = subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    valid = SPEC.home + np.array([0.1, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0])
    with start_sim(tmp_path) as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = command_publisher(ros_probe)
        pub.publish(Float64MultiArray(data=valid.tolist()))
        time.sleep(0.3)
        bad = [[float('nan')] * 7, [0.1] * 3, [0.1] * 12, [], [*valid.tolist(), float('inf')]]
        for data in bad:
            pub.publish(Float64MultiArray(data=data))
            time.sleep(0.05)
        trajectories = trajectory_publisher(ros_probe)
        trajectories.publish(JointTrajectory(
            joint_names=['not_a_joint'], points=[JointTrajectoryPoint(positions=[1.0])]))
        time.sleep(0.1)  # depth-1 command QoS: a newer message may replace an undelivered one
        wall_clock_stamped = JointTrajectory(joint_names=['fr3_joint1'], points=[
            JointTrajectoryPoint(positions=[1.0])])
        wall_clock_stamped.points[0].time_from_start.sec = 1
        wall_clock_stamped.header.stamp.sec = int(time.time())
        trajectories.publish(wall_clock_stamped)
        time.sleep(1.2)
        assert node.proc.poll() is None, node.output
        held = np.array(ros_probe.messages(states)[-1].position[:7])
        assert np.abs(held - valid).max() < 2e-3
        assert wait_until(lambda: int(diagnostics(ros_probe)['dropped_commands']) >= 7, 5)
        log = node.output
        assert 'expected 7 arm targets' in log and 'fr3_joint1 target is nan' in log
        assert "unknown joint 'not_a_joint'" in log and 'ahead of this node' in log
        assert node.stop() == 0, log


def test_command_timeout_holds_position(ros_probe: RosProbe, tmp_path: Path) -> None:
    states = subscribe_states(ros_probe)
    target = SPEC.home.copy()
    target[0] += 0.12  # 2.4 rad/s over a 50 ms period; the hold after 20 ms stops it early
    headless = {k: v for k, v in os.environ.items() if k not in ('DISPLAY', 'WAYLAND_DISPLAY')}
    with start_sim(tmp_path, 'command_timeout:=0.02', 'viewer:=true', env=headless) as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = command_publisher(ros_probe)
        pub.publish(Float64MultiArray(data=target.tolist()))
        time.sleep(1.5)
        last = ros_probe.messages(states)[-1]
        assert 0.002 < last.position[0] - SPEC.home[0] < 0.1, last.position  # moved, stopped
        assert abs(last.velocity[0]) < 1e-3
        assert 'viewer requested but no display' in node.output  # headless, still running
        assert node.stop() == 0, node.output


def test_renamed_model_runs_through_joint_map(ros_probe: RosProbe, tmp_path: Path) -> None:
    states = subscribe_states(ros_probe)
    scene = renamed_scene(tmp_path)
    pairs = ','.join(f'{j}=arm_{i}' for i, j in enumerate(SPEC.arm_joints))
    with start_sim(tmp_path, f'model:={scene}', f'joint_map:=[{pairs}]') as node:
        msg = ros_probe.wait_for_messages(states, timeout=30)[-1]
        assert tuple(msg.name) == SPEC.joint_names  # published under the spec's names
        target = SPEC.home + 0.1
        pub = command_publisher(ros_probe)
        t0 = stamp(ros_probe.messages(states)[-1])
        stream_until(ros_probe, pub, target, until=t0 + 0.6)
        assert np.abs(np.array(ros_probe.messages(states)[-1].position[:7]) - target).max() < 0.01
        assert node.stop() == 0, node.output


def test_without_clock_stamps_are_system_time_and_start_trajectories(ros_probe: RosProbe,
                                                                      tmp_path: Path) -> None:
    """A stand-in for a real arm (publish_clock false) stamps like its driver: system time.

    A trajectory stamped in sim time (a publisher on another clock) is rejected with a hint;
    one stamped 0.5 s ahead on the system clock reaches its point at that stamp plus its
    time_from_start, from where the arm was when it arrived (JTC's rule).
    """
    states = subscribe_states(ros_probe)
    with start_sim(tmp_path, 'publish_clock:=false') as node:
        ros_probe.wait_for_messages(states, timeout=30)
        first = stamp(ros_probe.messages(states)[-1])
        assert abs(first - time.time()) < 0.5, first
        pub = ros_probe.publisher(topic('joint_trajectory').name, JointTrajectory,
                                  qos('joint_trajectory'))
        assert wait_until(lambda: pub.get_subscription_count() > 0, timeout=20)
        time.sleep(0.3)
        def joint1_at(offset: float) -> list[float]:   # every joint named, as JTC wants
            return (SPEC.home + np.eye(7)[0] * offset).tolist()

        sim_time_stamped = JointTrajectory(joint_names=list(SPEC.arm_joints), points=[
            JointTrajectoryPoint(positions=joint1_at(-0.3))])
        sim_time_stamped.points[0].time_from_start.sec = 1
        sim_time_stamped.header.stamp.sec = 5
        pub.publish(sim_time_stamped)
        assert wait_until(lambda: 'ends' in node.output and 'behind' in node.output, 10), \
            node.output
        assert 'stamp with system time' in node.output
        start = round(time.time() + 0.5, 3)
        msg = JointTrajectory(joint_names=list(SPEC.arm_joints),
                              points=[JointTrajectoryPoint(positions=joint1_at(0.3))])
        msg.points[0].time_from_start.sec = 1
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(round(start * 1e9),
                                                                1_000_000_000)
        pub.publish(msg)
        assert wait_until(lambda: stamp(ros_probe.messages(states)[-1]) > start + 1.5, 10)
        received = [(stamp(m), m.position[0]) for m in ros_probe.messages(states)]
        assert node.stop() == 0, node.output
    times = np.array([t for t, _ in received])
    joint1 = np.array([q for _, q in received]) - SPEC.home[0]
    assert np.all(np.diff(times) > 0)
    # From arrival (about start - 0.5 s) to start + 1 s the target ramps 0 -> 0.3 rad: it is
    # at 0.1 rad at the stamp and 0.2 rad half a second later (the servo trails by ~20 ms).
    # The ramp is straight there, so interpolating between the states received stays close
    # where a loaded machine dropped some (sensor-data QoS): CI once read 0.298 rad at
    # start + 0.5, the first state after such a gap.
    gaps = f'largest gap between states {np.diff(times).max():.3f} s'
    assert 0.06 < np.interp(start, times, joint1) < 0.11, gaps
    assert 0.16 < np.interp(start + 0.5, times, joint1) < 0.21, gaps
    assert abs(joint1[-1] - 0.3) < 5e-3


def test_absurd_targets_are_rejected_and_the_arm_stays_inside_its_limits(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """Finite but absurd targets (1e308, 100 rad, beyond a limit, an overflowing cubic) are
    rejected with the same counted warning as NaN; the arm holds its last valid target."""
    states = subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    valid = SPEC.home + np.array([0.1, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0])
    beyond = SPEC.home.copy()
    beyond[1] = SPEC.position_upper[1] + 0.05
    with start_sim(tmp_path) as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = command_publisher(ros_probe)
        pub.publish(Float64MultiArray(data=valid.tolist()))
        time.sleep(0.3)
        for data in ([1e308] * 7, [100.0] * 7, beyond.tolist(), [*valid.tolist(), 5.0]):
            pub.publish(Float64MultiArray(data=data))
            time.sleep(0.05)
        trajectories = trajectory_publisher(ros_probe)
        for positions, velocities in (([1e308], []), ([0.5], [1e308]), ([0.5], [-1e308])):
            msg = JointTrajectory(joint_names=['fr3_joint1'], points=[
                JointTrajectoryPoint(positions=positions, velocities=velocities)])
            msg.points[0].time_from_start.sec = 1
            trajectories.publish(msg)
            time.sleep(0.1)
        time.sleep(1.2)
        assert node.proc.poll() is None, node.output
        positions = np.array([m.position[:7] for m in ros_probe.messages(states)])
        assert wait_until(lambda: int(diagnostics(ros_probe)['dropped_commands']) >= 7, 5)
        log = node.output
        assert node.stop() == 0, log
    assert np.all(np.isfinite(positions))
    assert np.all(positions >= SPEC.position_lower) and np.all(positions <= SPEC.position_upper)
    assert np.abs(positions[-1] - valid).max() < 2e-3
    assert 'fr3_joint1 target 1e+308 rad is outside' in log
    assert 'gripper width 5 m is outside' in log   # one warning per kind of problem a second
    assert 'fr3_joint1 velocity 1e+308 rad/s is outside' in log


def test_a_diverging_simulation_resets_reports_and_never_publishes_nan(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """Gains inside the SimParams ranges but unstable at 1 kHz (kp 1e6, no damping, links a
    tenth of their mass, so every phase of the torque-limited limit cycle diverges within
    0.15 s of the step): the node catches the divergence, returns to the keyframe and
    reports it on /diagnostics."""
    joints = '\n'.join(f'  {j}: {{kp: 1.0e+6, kv: 0.0, armature: 0.0, damping: 0.0}}'
                       for j in SPEC.arm_joints)
    params = tmp_path / 'unstable.yaml'
    params.write_text(f'version: 1\njoints:\n{joints}\n'
                      'body_mass_scale: {'
                      + ', '.join(f'fr3_link{i}: 0.1' for i in range(1, 8)) + '}\n')
    states = subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))
    with start_sim(tmp_path, f'sim_params_file:={params}') as node:
        ros_probe.wait_for_messages(states, timeout=30)
        pub = command_publisher(ros_probe)
        pub.publish(Float64MultiArray(data=(SPEC.home + 0.1).tolist()))

        def reported() -> bool:
            return any(s.level == s.ERROR and 'diverged' in s.message
                       for m in ros_probe.messages(topic('diagnostics').name) for s in m.status)

        assert wait_until(reported, 10), node.output
        first, start = stamp(latest(ros_probe, states)), time.monotonic()
        time.sleep(2.0)
        factor = (stamp(latest(ros_probe, states)) - first) / (time.monotonic() - start)
        assert factor > 0.9, f'real-time factor {factor:.2f} after the divergence'
        assert node.proc.poll() is None
        assert int(diagnostics(ros_probe)['divergences']) >= 1
        log = node.output
        assert node.stop() == 0, log
    positions = np.array([m.position for m in ros_probe.messages(states)])
    velocities = np.array([m.velocity for m in ros_probe.messages(states)])
    assert np.all(np.isfinite(positions)) and np.all(np.isfinite(velocities))
    assert 'physics diverged' in log
