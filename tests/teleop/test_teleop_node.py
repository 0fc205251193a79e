"""The teleop node over real DDS, driving the real simulator: DISABLED until ~/enable, a
twist moves the hand that way, a stale input brakes it to rest, the dead-man gates /joy, a
joint jog moves its joints, the service and a button open and close the hand."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from control_msgs.msg import JointJog
from geometry_msgs.msg import PoseStamped, TwistStamped
from policy_helpers import call_enable
from ros_helpers import NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import JointState, Joy
from sim_helpers import hand, qos, settled, stamp, start_sim, subscribe_states, topic
from std_msgs.msg import Int8
from std_srvs.srv import SetBool

from simops_core.parameter_schema import defaults, load_parameter_schema
from simops_core.policy_step import StepSettings
from simops_core.robot_spec import load_robot_spec

SPEC = load_robot_spec('fr3')
RATE = 100.0     # Hz: teleop's default, and how often the test sends
SPEED = 0.05     # m/s


def send(publish: object, make: object, seconds: float) -> None:
    """Publish ``make()`` at RATE for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        publish(make())
        time.sleep(1.0 / RATE)


def twist(x: float, z: float = 0.0, frame: str = SPEC.base_frame) -> TwistStamped:
    msg = TwistStamped()
    msg.header.frame_id = frame
    msg.twist.linear.x, msg.twist.linear.z = x, z
    return msg


def joy(x: float, deadman: int) -> Joy:
    return Joy(axes=[x, 0.0, 0.0, 0.0, 0.0, 0.0], buttons=[deadman, 0])


def test_twists_and_the_joystick_drive_the_hand_and_a_stale_input_brakes(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    ros_probe.subscribe(topic('ee_pose').name, PoseStamped, qos('ee_pose'))
    ros_probe.subscribe('/teleop/status', Int8, 10)
    ros_probe.subscribe(topic('operator_twist').name, TwistStamped, 10)
    twists = ros_probe.publisher('/teleop/delta_twist_cmds', TwistStamped, 10)
    joys = ros_probe.publisher('/joy', Joy, 10)
    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_teleop', 'teleop', log_path=tmp_path / 'teleop.log') as teleop:
        assert wait_until(lambda: ros_probe.messages(topic('ee_pose').name)
                          and twists.get_subscription_count() and joys.get_subscription_count(),
                          60), teleop.output + sim.output
        start = hand(ros_probe)
        send(twists.publish, lambda: twist(SPEED), 0.5)   # DISABLED: nothing moves
        assert np.linalg.norm(hand(ros_probe) - start) < 1e-3, teleop.output

        assert call_enable(ros_probe, True, node='/teleop').success
        time.sleep(1.0)   # ramped in
        start = hand(ros_probe)
        send(twists.publish, lambda: twist(SPEED), 2.0)
        moved = hand(ros_probe) - start
        assert 0.6 * SPEED * 2.0 < moved[0] < 1.1 * SPEED * 2.0, (moved, teleop.output)
        assert np.abs(moved[1:]).max() < 0.1 * moved[0], moved
        time.sleep(0.5)   # older than input_timeout (0.1 s): braked to rest
        rest = hand(ros_probe)
        time.sleep(0.5)
        assert np.linalg.norm(hand(ros_probe) - rest) < 1e-3
        assert {m.data for m in ros_probe.messages('/teleop/status')} == {0}   # no warning

        send(joys.publish, lambda: joy(-1.0, 0), 1.0)   # dead-man released: nothing moves
        assert np.linalg.norm(hand(ros_probe) - rest) < 1e-3
        send(joys.publish, lambda: joy(-0.25, 1), 1.0)   # held: back along x at 0.05 m/s
        back = hand(ros_probe) - rest
        assert back[0] < -0.5 * 0.25 * 0.2 * 1.0, (back, teleop.output)
        time.sleep(0.5)
        rest = hand(ros_probe)   # along the TCP's z, which points down at home
        send(twists.publish, lambda: twist(0.0, SPEED, f'{SPEC.name}_hand_tcp'), 1.0)
        down = hand(ros_probe) - rest
        assert down[2] < -0.6 * SPEED and np.abs(down[:2]).max() < 0.2 * -down[2], down
        # what the recording keeps of the operator: the twist it servoed, in the base frame
        reported = ros_probe.messages(topic('operator_twist').name)[-30:]
        assert all(m.header.frame_id == SPEC.base_frame for m in reported)
        assert any(m.twist.linear.z == pytest.approx(-SPEED, abs=1e-3) for m in reported)
        assert teleop.stop() == 0, teleop.output
        assert sim.stop() == 0, sim.output


def test_a_joint_jog_moves_only_its_joints_and_a_bad_one_is_ignored(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """~/delta_joint_cmds (control_msgs/JointJog): 0.2 rad/s on joint 4 for a second moves
    joint 4 alone; a jog naming a joint the arm lacks is ignored with a warning."""
    subscribe_states(ros_probe)
    jogs = ros_probe.publisher('/teleop/delta_joint_cmds', JointJog, 10)

    def jog(names: list[str], velocities: list[float]) -> JointJog:
        return JointJog(joint_names=names, velocities=velocities)

    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_teleop', 'teleop', log_path=tmp_path / 'teleop.log') as teleop:
        assert wait_until(lambda: jogs.get_subscription_count() > 0, 60), teleop.output
        settled(ros_probe)
        assert call_enable(ros_probe, True, node='/teleop').success
        time.sleep(1.0)   # ramped in
        start = settled(ros_probe)
        send(jogs.publish, lambda: jog([SPEC.arm_joints[3]], [0.2]), 1.0)
        time.sleep(1.0)   # braked to rest (input_timeout), the controller caught up
        moved = settled(ros_probe) - start
        # at most: 0.2 rad/s while inputs keep coming (1 s and one send period) and for the
        # input timeout after the last, then braking within the pipeline's acceleration limit
        timeout = float(defaults(load_parameter_schema('teleop'))['input_timeout'])
        braking = 0.2 ** 2 / (2 * StepSettings.velocity_scale * SPEC.acceleration[3])
        most = 0.2 * (1.0 + 1.0 / RATE + timeout) + braking
        assert 0.6 * 0.2 < moved[3] < most, (moved, most, teleop.output)
        assert np.abs(np.delete(moved, 3)).max() < 0.01 * moved[3], moved
        rest = settled(ros_probe)
        send(jogs.publish, lambda: jog(['elbow'], [0.2]), 0.5)
        assert np.abs(settled(ros_probe) - rest).max() < 1e-3
        assert teleop.stop() == 0, teleop.output
        assert sim.stop() == 0, sim.output
    assert "~/delta_joint_cmds: no arm joint 'elbow'" in teleop.output


def test_the_hand_opens_and_closes_from_the_service_and_a_joystick_button(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """~/gripper true closes the hand to its width_min, false opens it to width_max (sent
    with the arm's targets on /joint_commands, through the safety pipeline: no faster than
    the Franka Hand's speed_max); a press of gripper_button toggles it."""
    states = subscribe_states(ros_probe)
    joys = ros_probe.publisher('/joy', Joy, 10)
    grip = SPEC.gripper

    def opening(msg: JointState) -> float:
        return float(sum(p for n, p in zip(msg.name, msg.position, strict=True)
                         if n in grip.joints))

    def width() -> float:
        return opening(ros_probe.messages(states)[-1])

    def hand(close: bool) -> None:
        with ros_probe.paused():
            client = ros_probe.node.create_client(SetBool, '/teleop/gripper')
        assert client.wait_for_service(timeout_sec=20)
        future = client.call_async(SetBool.Request(data=close))
        assert wait_until(future.done, 10) and future.result().success

    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_teleop', 'teleop', '--ros-args', '-p', 'gripper_button:=1',
            log_path=tmp_path / 'teleop.log') as teleop:
        assert wait_until(lambda: ros_probe.messages(states) and joys.get_subscription_count(),
                          60), teleop.output
        assert call_enable(ros_probe, True, node='/teleop').success
        hand(True)
        assert wait_until(lambda: width() < SPEC.gripper.width_min + 0.002, 10), width()
        seen = [(stamp(m), opening(m)) for m in ros_probe.messages(states)]
        began = next(t for t, w in seen if w < grip.width_max - 0.002)
        shut = next(t for t, w in seen if w < grip.width_min + 0.002)
        travel = (grip.width_max - grip.width_min - 0.004) / grip.speed_max   # 0.76 s
        assert shut - began > 0.9 * travel, (shut - began, travel)
        hand(False)
        assert wait_until(lambda: width() > SPEC.gripper.width_max - 0.002, 10), width()
        for pressed in (1, 0):   # a press and a release: one toggle
            send(joys.publish, lambda p=pressed: Joy(axes=[0.0] * 6, buttons=[0, p]), 0.2)
        assert wait_until(lambda: width() < SPEC.gripper.width_min + 0.002, 10), width()
        assert teleop.stop() == 0, teleop.output
        assert sim.stop() == 0, sim.output
