"""The policy node drives the MuJoCo simulator (`ros2 run simops_sim sim`) over both interfaces.

The simulator publishes /joint_states at 1 kHz and /object_pose; the probe publishes the
goal. A constant policy moves every joint up at 0.4 rad/s, so the simulated arm must follow
whichever command interface the node uses.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from policy_helpers import SPEC, STATE, TOPICS, qos, wait_state, watch, write_policy
from rclpy.qos import qos_profile_sensor_data
from ros_helpers import NodeProcess, RosProbe, installed_executable, wait_until
from sensor_msgs.msg import JointState
from sim_helpers import stamp
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool

from simops_core.observation import JointIndex

JOINT_STATES = TOPICS['joint_states'].name


LPF_CUTOFF = 5.0   # Hz, the policy node's low-pass in these tests
# rad/s of sim time: a constant policy's 0.02 rad a tick at 20 Hz, of which the first-order
# low-pass passes 1 - exp(-2 pi fc / rate) of each step once the targets move steadily
POLICY_SPEED = 0.4 * (1.0 - np.exp(-2.0 * np.pi * LPF_CUTOFF / 20.0))


def watch_arm(probe: RosProbe) -> Callable[[], tuple[float, np.ndarray]]:
    """Subscribe to the joint states; a function giving the newest one's stamp (sim time, s)
    and the arm's position (rad)."""
    probe.subscribe(JOINT_STATES, JointState, qos('joint_states'))
    index = JointIndex(SPEC.arm_joints)

    def measured() -> tuple[float, np.ndarray]:
        msg = probe.messages(JOINT_STATES)[-1]
        return stamp(msg), index.select(msg.name, msg.position, np.zeros(7))

    return measured


def run_policy(tmp_path: Path, model: Path, *parameters: str) -> NodeProcess:
    """The policy node, enabled, ramping in over 0.5 s, with more ``parameters`` (NAME:=VALUE).

    On the simulator's clock, as the sim graph runs it: its deadlines are on sim time, and a
    trajectory's header.stamp is a time on that clock.
    """
    args = [arg for parameter in ('ramp_time:=0.5', f'lpf_cutoff_hz:={LPF_CUTOFF}',
                                  'start_enabled:=true',
                                  'use_sim_time:=true', f'model_path:={model}', *parameters)
            for arg in ('-p', parameter)]
    return NodeProcess.ros2_run('simops_policy', 'policy', '--ros-args', *args,
                                log_path=tmp_path / 'policy.log')


@pytest.mark.parametrize('interface', ['float64_array', 'joint_trajectory'])
def test_both_command_interfaces_reach_the_simulator(ros_probe: RosProbe, tmp_path: Path,
                                                     interface: str) -> None:
    installed_executable('simops_sim', 'sim')  # fails with a clear message if not built
    model, _ = write_policy(tmp_path, [0.4] * 7 + [0.0])   # 0.02 rad per step, all joints up
    measured = watch_arm(ros_probe)
    watch(ros_probe)
    with NodeProcess.ros2_run('simops_sim', 'sim', log_path=tmp_path / 'sim.log') as sim, \
            run_policy(tmp_path, model, f'command_interface:={interface}') as node:
        wait_state(ros_probe, node, 'RUNNING', timeout=30)
        # The policy may see the simulator before the probe's own subscription matches it.
        ros_probe.wait_for_messages(JOINT_STATES, 1, timeout=30)
        time.sleep(1.0)   # past the 0.5 s ramp and the tracking lag's rise
        t0, start = measured()
        time.sleep(1.5)
        t1, end = measured()
        assert node.stop() == 0, node.output
        assert sim.stop() == 0, sim.output
    assert [m.data for m in ros_probe.messages(STATE)][-1] == 'RUNNING'
    # The nodes run on sim time, which a busy machine slows; the arm follows the policy's
    # speed in sim time. (Measured from RUNNING, the window held the ramp and the lag's
    # rise: about half the speed, 0.3676 rad in 1.841 s on a loaded Jazzy run.)
    assert t1 - t0 > 0.5, (t0, t1)
    speed = (end - start) / (t1 - t0)
    assert np.all(np.abs(speed / POLICY_SPEED - 1.0) < 0.25), (interface, t1 - t0, speed)


def test_ctrl_c_ends_the_policy_on_sim_time_cleanly(ros_probe: RosProbe,
                                                     tmp_path: Path) -> None:
    """Ctrl-C, as a terminal and a launcher send it (twice), ends the running policy node on
    sim time with exit 0, three times over. Under rclpy's signal handlers, Jazzy's policy
    node died by SIGSEGV in the executor's shutdown (its SIGINT guard condition destroyed
    after the signal thread had shut the context down) while its control thread ran."""
    installed_executable('simops_sim', 'sim')
    model, _ = write_policy(tmp_path, [0.4] * 7 + [0.0])
    watch(ros_probe)
    with NodeProcess.ros2_run('simops_sim', 'sim', log_path=tmp_path / 'sim.log') as sim:
        for run in range(3):
            before = len(ros_probe.messages(STATE))
            with run_policy(tmp_path, model) as node:
                assert wait_until(lambda since=before: [
                    m.data for m in ros_probe.messages(STATE)[since:]][-1:] == ['RUNNING'],
                    30), node.output
                time.sleep(0.3)
                node.proc.send_signal(signal.SIGINT)   # the terminal's; stop() sends another
                code = node.stop()
            assert code == 0, (run, node.output[-3000:])
            assert 'Segmentation' not in node.output, node.output[-3000:]
        assert sim.stop() == 0, sim.output


@pytest.mark.parametrize('interface', ['float64_array', 'joint_trajectory'])
def test_on_a_slow_simulator_the_policy_ticks_on_sim_time(ros_probe: RosProbe, tmp_path: Path,
                                                          interface: str) -> None:
    """A simulator slower than the wall clock (a busy machine; here ``realtime_factor:=0.25``):
    the policy ticks every 50 ms of sim time, so the arm moves at the policy's speed in sim
    time (:data:`POLICY_SPEED`, 0.317 rad/s). Ticking on the wall clock, it sent 20 targets
    per second of wall time, four times the speed in sim time, and the trajectory's first
    segment, reached from the lagging measured state, tripped the simulator's velocity reflex
    (a protective stop)."""
    installed_executable('simops_sim', 'sim')
    model, _ = write_policy(tmp_path, [0.4] * 7 + [0.0])
    measured = watch_arm(ros_probe)
    watch(ros_probe)
    with NodeProcess.ros2_run('simops_sim', 'sim', '--ros-args', '-p', 'realtime_factor:=0.25',
                              log_path=tmp_path / 'sim.log') as sim, \
            run_policy(tmp_path, model, f'command_interface:={interface}') as node:
        wait_state(ros_probe, node, 'RUNNING', timeout=30)
        ros_probe.wait_for_messages(JOINT_STATES, 1, timeout=30)
        time.sleep(1.0)   # past the tracking lag's rise
        t0, start = measured()
        time.sleep(4.0)
        t1, end = measured()
        assert node.stop() == 0, node.output
        assert sim.stop() == 0, sim.output
    assert [m.data for m in ros_probe.messages(STATE)][-1] == 'RUNNING', node.output[-2000:]
    assert 0.5 < t1 - t0 < 1.5, (t0, t1)   # 4 s of wall time at a quarter of real time
    speed = (end - start) / (t1 - t0)
    assert np.all(np.abs(speed / POLICY_SPEED - 1.0) < 0.25), (interface, t1 - t0, speed)


def test_a_paused_simulator_holds_the_policy_on_sim_time_and_resuming_runs_it(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """Under use_sim_time the policy ticks on the states' sim time; a paused simulator stops
    both, and the ticks the wall clock still gives find the joint state stale: HOLD. Resumed,
    the policy ramps in and runs again."""
    installed_executable('simops_sim', 'sim')
    model, _ = write_policy(tmp_path, [0.2] * 7 + [0.0])
    watch(ros_probe)
    with NodeProcess.ros2_run('simops_sim', 'sim', log_path=tmp_path / 'sim.log') as sim, \
            run_policy(tmp_path, model) as node:
        wait_state(ros_probe, node, 'RUNNING', timeout=30)
        assert pause(ros_probe, True).success
        wait_state(ros_probe, node, 'HOLD', timeout=5)
        assert pause(ros_probe, False).success
        wait_state(ros_probe, node, 'RUNNING', timeout=10)
        assert node.stop() == 0, node.output
        assert sim.stop() == 0, sim.output
    assert 'stale /joint_states' in node.output, node.output[-2000:]


def pause(probe: RosProbe, on: bool) -> SetBool.Response:
    """Pause or resume the simulator (its ``~/pause``)."""
    client = probe.node.create_client(SetBool, '/sim/pause')
    assert client.wait_for_service(timeout_sec=10.0), '/sim/pause not available'
    future = client.call_async(SetBool.Request(data=on))
    assert wait_until(future.done, timeout=10), '/sim/pause did not answer'
    return future.result()


def test_the_gripper_width_goes_to_franka_gripper_as_paced_goals(ros_probe: RosProbe,
                                                                  tmp_path: Path) -> None:
    """On joint_trajectory the arm goes on the controller's topic and the hand to
    ``/franka_gripper/gripper_action``: a policy closing the hand every period sends a few
    goals, not one per period; each period's width goes on ``gripper_command`` for the
    recording (the goals are not on a topic)."""
    model, _ = write_policy(tmp_path, [0.0] * 7 + [-1.0])   # hold the arm, close the hand
    ros_probe.subscribe('/franka_gripper/joint_states', JointState, qos_profile_sensor_data)
    widths = TOPICS['gripper_command'].name
    ros_probe.subscribe(widths, Float64MultiArray, qos('gripper_command'))
    watch(ros_probe)
    with NodeProcess.ros2_run('simops_sim', 'sim', log_path=tmp_path / 'sim.log') as sim, \
            run_policy(tmp_path, model, 'command_interface:=joint_trajectory') as node:
        wait_state(ros_probe, node, 'RUNNING', timeout=30)
        closed = wait_until(lambda: ros_probe.messages('/franka_gripper/joint_states') and sum(
            ros_probe.messages('/franka_gripper/joint_states')[-1].position) < 0.005, 15)
        time.sleep(1.0)
        assert node.stop() == 0, node.output
        assert sim.stop() == 0, sim.output
    assert closed, ros_probe.messages('/franka_gripper/joint_states')[-1:]
    assert 'gripper widths go as goals to /franka_gripper/gripper_action' in node.output
    # Closing 8 cm at the policy's 0.1 m/s is 16 commands; the hand got one goal per free
    # moment (the first closes it fully: franka_gripper grasps), none while it ran.
    goals = re.findall(r'\[franka_gripper\]: goal: ', sim.output)   # the gripper logs each one
    assert 1 <= len(goals) <= 4, sim.output[-3000:]
    sent = np.array([m.data[0] for m in ros_probe.messages(widths)])
    assert len(sent) >= 16 and sent[-1] == SPEC.gripper.width_min, sent
    assert np.all(np.diff(sent) <= 0.0), sent   # closing, one pipeline step a period
    assert np.all(np.diff(sent) >= -SPEC.gripper.speed_max * 0.05 - 1e-12), sent
