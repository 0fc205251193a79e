"""The simulator serves what the chosen franka_ros2 release serves, over DDS.

Real ``sim`` processes with ``franka_ros2:=v3|v2|v1`` (config/franka_ros2.yaml):

- franka_gripper's node name (``franka_gripper`` from v2.0.0, ``fr3_gripper`` before), its
  actions and ``~/stop``, and its ``~/joint_states`` reliable at depth 1 and the release's
  rate;
- franka_robot_state_broadcaster's ``robot_state``, heard by a best-effort subscriber;
- the controller manager: a deactivated ``fr3_arm_controller`` takes no command and the arm
  holds; ``joint_position_controller`` in its place takes positions on its ``~/commands``;
  after a reflex only the release's whole recovery procedure (``simops-recover``) lets the
  arm move again, and on v3/v2 the recovery action alone does not;
- FR3 position-based velocity limits in the sim's reflex;
- franka_hardware's ``service_server``: ``arm_setup`` sets the collision behaviour and a
  fitted payload at bringup.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from control_msgs.action import GripperCommand
from controller_manager_msgs.srv import (
    ListControllers,
    ListHardwareComponents,
    SetHardwareComponentState,
    SwitchController,
)
from franka_msgs.action import ErrorRecovery, Grasp, Homing, Move
from franka_msgs.msg import FrankaRobotState
from franka_msgs.srv import (
    SetCartesianStiffness,
    SetForceTorqueCollisionBehavior,
    SetFullCollisionBehavior,
    SetJointStiffness,
    SetStiffnessFrame,
    SetTCPFrame,
)
from geometry_msgs.msg import PoseStamped
from lifecycle_msgs.msg import State
from rclpy.action import get_action_names_and_types
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import NodeProcess, RosProbe, installed_executable, wait_until
from sensor_msgs.msg import JointState
from sim_helpers import (
    Recovery,
    command_publisher,
    measured,
    qos,
    settled,
    smooth_goal,
    start_sim,
    subscribe_states,
    topic,
    trajectory_publisher,
)
from std_msgs.msg import Float64MultiArray
from test_follow_action import Goal, client_for
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.franka_ros2 import franka_release
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_qos

SPEC = load_robot_spec('fr3')
BROADCASTER = '/franka_robot_state_broadcaster'
ROBOT_STATE = f'{BROADCASTER}/robot_state'
# O_T_EE of an FR3 with the Franka Hand in its ready pose (q = 0, -pi/4, 0, -3pi/4, 0, pi/2,
# pi/4), from Franka's published DH parameters and the hand's 0.1034 m flange-to-TCP offset:
# the 0.307, 0, 0.487 m, x forward, z down, that libfranka's examples start from.
READY_EE = np.array([0.30689, 0.0, 0.48688])
MANAGER = '/controller_manager'
GRIPPER_SERVES = {'homing': Homing, 'move': Move, 'grasp': Grasp,
                  'gripper_action': GripperCommand}


def call(probe: RosProbe, kind: type, name: str, request: object) -> object:
    """Call service ``name`` and return its response."""
    with probe.paused():
        client = probe.node.create_client(kind, name)
    assert client.wait_for_service(timeout_sec=20), f'no service {name}'
    future = client.call_async(request)
    assert wait_until(future.done, 10), f'no answer from {name}'
    return future.result()


def arm_state(probe: RosProbe) -> tuple[str, str]:
    """(fr3_arm_controller's state, the hardware component's state)."""
    controllers = call(probe, ListControllers, f'{MANAGER}/list_controllers',
                       ListControllers.Request()).controller
    hardware = call(probe, ListHardwareComponents, f'{MANAGER}/list_hardware_components',
                    ListHardwareComponents.Request()).component
    return ({c.name: c.state for c in controllers}['fr3_arm_controller'],
            hardware[0].state.label)


def stream(pub: object, target: np.ndarray, count: int = 10) -> None:
    for _ in range(count):
        pub.publish(Float64MultiArray(data=target.tolist()))
        time.sleep(0.05)


def trip_velocity_reflex(probe: RosProbe, pub: object, home: np.ndarray) -> None:
    """A step of 0.5 rad in one 50 ms period (10 rad/s; the limit is 5.26): a reflex."""
    step = home.copy()
    step[4] += 0.5
    pub.publish(Float64MultiArray(data=step.tolist()))
    state = [None]

    def reflex() -> bool:
        messages = probe.messages(ROBOT_STATE)
        state[0] = messages[-1] if messages else None
        return bool(messages) and messages[-1].robot_mode == FrankaRobotState.ROBOT_MODE_REFLEX

    assert wait_until(reflex, 5), state[0]


@pytest.mark.parametrize(('release', 'node'), [('v3', 'franka_gripper'),
                                               ('v1', 'fr3_gripper')])
def test_each_release_serves_its_gripper_node(ros_probe: RosProbe, tmp_path: Path,
                                              release: str, node: str) -> None:
    """franka_gripper's actions, ``~/stop`` and reliable depth-1 ``~/joint_states`` at the
    release's state_publish_rate, under its node name, and nothing under the other name."""
    other = {'franka_gripper': 'fr3_gripper', 'fr3_gripper': 'franka_gripper'}[node]
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    ros_probe.subscribe(f'/{node}/joint_states', JointState, reliable)  # joint_state_publisher
    with start_sim(tmp_path, f'franka_ros2:={release}') as sim:
        expected = {f'/{node}/{name}': f'{kind.__module__.split(".")[0]}/action/'
                    f'{kind.__name__}' for name, kind in GRIPPER_SERVES.items()}

        def actions() -> dict[str, str]:
            return {name: types[0] for name, types in get_action_names_and_types(ros_probe.node)}

        def services() -> dict[str, list[str]]:
            return dict(ros_probe.node.get_service_names_and_types())

        # Discovery hands the probe the node's endpoints in no set order: wait for them all
        # (a CI run saw the actions 0.5 s after start, the stop service not yet).
        assert wait_until(lambda: expected.items() <= actions().items()
                          and f'/{node}/stop' in services(), 20), (actions(), services())
        assert not [name for name in actions() if name.startswith(f'/{other}/')]
        assert services()[f'/{node}/stop'] == ['std_srvs/srv/Trigger']
        first = len(ros_probe.wait_for_messages(f'/{node}/joint_states', timeout=20))
        time.sleep(4.0)
        rate = (len(ros_probe.messages(f'/{node}/joint_states')) - first) / 4.0
        wanted = franka_release(release).gripper_state_rate
        assert abs(rate - wanted) < 0.2 * wanted, (rate, wanted)
        [info] = ros_probe.node.get_publishers_info_by_topic(f'/{node}/joint_states')
        assert info.qos_profile.reliability == ReliabilityPolicy.RELIABLE
        assert load_qos('gripper_state').depth == 1   # history depth is not in discovery
        [info] = ros_probe.node.get_publishers_info_by_topic(f'{BROADCASTER}/current_pose')
        assert info.qos_profile.reliability == {  # QoS(1).best_effort() from v2.4.0 / v3.3.0
            'v3': ReliabilityPolicy.BEST_EFFORT, 'v1': ReliabilityPolicy.RELIABLE}[release]
        assert sim.stop() == 0, sim.output


def test_a_best_effort_subscriber_receives_robot_state(ros_probe: RosProbe,
                                                       tmp_path: Path) -> None:
    """As franka_ros2's changelog tells clients to subscribe from v2.4.0 / v3.3.0."""
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState,
                        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    with start_sim(tmp_path) as sim:
        state = ros_probe.wait_for_messages(ROBOT_STATE, count=5, timeout=30)[-1]
        assert state.robot_mode == FrankaRobotState.ROBOT_MODE_MOVE
        assert sim.stop() == 0, sim.output


def test_the_broadcasters_convenience_topics_carry_the_state_the_simulator_knows(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """``~/current_pose`` is O_T_EE, the joint-state topics repeat robot_state's, stamped
    and in the base frame, for a best-effort subscriber (franka_ros2's advice)."""
    best_effort = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState, best_effort)
    kinds = {'current_pose': PoseStamped, 'measured_joint_states': JointState,
             'desired_joint_states': JointState, 'external_joint_torques': JointState}
    for key, kind in kinds.items():
        ros_probe.subscribe(f'{BROADCASTER}/{key}', kind, best_effort)
    with start_sim(tmp_path) as sim:
        for key in kinds:
            ros_probe.wait_for_messages(f'{BROADCASTER}/{key}', count=20, timeout=30)
        assert sim.stop() == 0, sim.output
    pose = ros_probe.messages(f'{BROADCASTER}/current_pose')[-1]
    p, o = pose.pose.position, pose.pose.orientation
    assert pose.header.frame_id == SPEC.base_frame and pose.header.stamp.sec + \
        pose.header.stamp.nanosec > 0
    assert np.allclose([p.x, p.y, p.z], READY_EE, atol=1e-3), p
    assert abs(o.x) > 0.9999, o   # a half turn about x: the hand points down
    states = {(m.header.stamp.sec, m.header.stamp.nanosec): m
              for m in ros_probe.messages(ROBOT_STATE)}
    pairs = [(m, states.get((m.header.stamp.sec, m.header.stamp.nanosec))) for m in
             ros_probe.messages(f'{BROADCASTER}/measured_joint_states')]
    pairs = [(m, s) for m, s in pairs if s is not None]
    assert pairs
    for message, state in pairs:
        assert list(message.name) == list(SPEC.arm_joints)
        assert message.header.frame_id == SPEC.base_frame
        measured_state = state.measured_joint_state
        for field in ('position', 'velocity', 'effort'):
            assert list(getattr(message, field)) == list(getattr(measured_state, field))
    desired = ros_probe.messages(f'{BROADCASTER}/desired_joint_states')[-1]
    assert np.allclose(desired.position, SPEC.home, atol=1e-3) and not desired.effort
    torques = ros_probe.messages(f'{BROADCASTER}/external_joint_torques')[-1]
    assert len(torques.effort) == 7 and not torques.position
    assert np.allclose(torques.effort, 0.0)   # no contact in the ready pose


def test_a_deactivated_arm_controller_ignores_commands_and_the_arm_holds(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    with start_sim(tmp_path) as sim:
        commands, trajectories = command_publisher(ros_probe), trajectory_publisher(ros_probe)
        arm = client_for(ros_probe)
        home = settled(ros_probe)
        assert arm_state(ros_probe) == ('active', 'active')
        switch = SwitchController.Request(deactivate_controllers=['fr3_arm_controller'],
                                          strictness=SwitchController.Request.STRICT)
        assert call(ros_probe, SwitchController, f'{MANAGER}/switch_controller', switch).ok
        assert arm_state(ros_probe) == ('inactive', 'active')

        slow = home.copy()
        slow[0] += 0.05
        stream(commands, slow)
        point = JointTrajectoryPoint(positions=slow.tolist())
        point.time_from_start.sec = 1
        trajectories.publish(JointTrajectory(joint_names=list(SPEC.arm_joints), points=[point]))
        assert not Goal(arm, smooth_goal(home, np.full(7, 0.05), 1.0)).handle.accepted
        assert np.abs(settled(ros_probe, 1.0) - home).max() < 1e-3       # ignored: it holds

        switch = SwitchController.Request(activate_controllers=['fr3_arm_controller'],
                                          strictness=SwitchController.Request.STRICT)
        assert call(ros_probe, SwitchController, f'{MANAGER}/switch_controller', switch).ok
        stream(commands, slow)
        assert np.abs(settled(ros_probe) - slow).max() < 3e-3             # moves again
        log = sim.output
        assert sim.stop() == 0, log
    assert 'fr3_arm_controller is inactive; activate it' in log


def test_positions_on_the_position_controller_move_the_arm_on_its_own_loop(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """joint_position_controller (a ForwardCommandController on the position interfaces)
    starts inactive; beside the active effort JTC it takes no command (franka_hardware runs
    the effort interface in preference); switched in place of the JTC, positions streamed on
    its ~/commands move the arm, held by the stiff impedance loop, and /joint_commands are
    refused until the JTC is back."""
    subscribe_states(ros_probe)
    with start_sim(tmp_path) as sim:
        commands = command_publisher(ros_probe)
        positions = ros_probe.publisher(topic('position_commands').name, Float64MultiArray,
                                        qos('position_commands'))
        assert wait_until(lambda: positions.get_subscription_count() > 0, timeout=20)
        home = settled(ros_probe)

        def states() -> dict[str, tuple[str, list[str]]]:
            found = call(ros_probe, ListControllers, f'{MANAGER}/list_controllers',
                         ListControllers.Request()).controller
            return {c.name: (c.state, list(c.claimed_interfaces)) for c in found}

        def switch(activate: list[str], deactivate: list[str]) -> None:
            request = SwitchController.Request(activate_controllers=activate,
                                               deactivate_controllers=deactivate,
                                               strictness=SwitchController.Request.STRICT)
            assert call(ros_probe, SwitchController, f'{MANAGER}/switch_controller',
                        request).ok

        assert states()['joint_position_controller'] == ('inactive', [])
        target = home.copy()
        target[0] += 0.05
        stream(positions, target)
        assert np.abs(settled(ros_probe, 1.0) - home).max() < 1e-3       # inactive: ignored
        switch(['joint_position_controller'], [])
        stream(positions, target)
        assert np.abs(settled(ros_probe, 1.0) - home).max() < 1e-3       # effort mode: ignored
        switch([], ['fr3_arm_controller'])
        assert states()['joint_position_controller'] == (
            'active', [f'{j}/position' for j in SPEC.arm_joints])
        stream(positions, target)
        assert np.abs(settled(ros_probe) - target).max() < 1e-3           # moves, stiffly
        stream(commands, home)
        assert np.abs(settled(ros_probe, 1.0) - target).max() < 1e-3     # JTC inactive
        switch(['fr3_arm_controller'], ['joint_position_controller'])
        stream(commands, home)
        assert np.abs(settled(ros_probe) - home).max() < 3e-3            # the JTC again
        log = sim.output
        assert sim.stop() == 0, log
    assert 'joint_position_controller is inactive; activate it' in log
    assert 'fr3_arm_controller claims the effort interface' in log
    assert 'fr3_arm_controller is inactive; activate it' in log


@pytest.mark.parametrize('release', ['v3', 'v2', 'v1'])
def test_after_a_reflex_only_the_releases_recovery_resumes_motion(
        ros_probe: RosProbe, ros_env: dict[str, str], tmp_path: Path, release: str) -> None:
    """v3 (Jazzy): recovery action, hardware component active, controllers active; v2
    (Humble): deactivate the controllers first; v1: the action alone, as before v2.4."""
    subscribe_states(ros_probe)
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState,
                        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    with start_sim(tmp_path, f'franka_ros2:={release}') as sim:
        commands = command_publisher(ros_probe)
        home = settled(ros_probe)
        trip_velocity_reflex(ros_probe, commands, home)
        slow = home.copy()
        slow[0] += 0.05
        if release == 'v3':
            assert arm_state(ros_probe) == ('inactive', 'unconfigured')
        elif release == 'v2':   # Humble's controller manager leaves the controllers active
            assert arm_state(ros_probe) == ('active', 'unconfigured')
        else:
            assert arm_state(ros_probe) == ('active', 'active')

        action = ros_probe.action_client(ErrorRecovery, '/action_server/error_recovery')
        assert action.wait_for_server(timeout_sec=20)
        sent = action.send_goal_async(ErrorRecovery.Goal())
        assert wait_until(sent.done, 10)
        result = sent.result().get_result_async()
        assert wait_until(result.done, 10)
        stream(commands, slow)
        if release == 'v1':
            assert np.abs(settled(ros_probe) - slow).max() < 3e-3         # the action sufficed
            assert sim.stop() == 0, sim.output
            return
        assert np.abs(settled(ros_probe) - home).max() < 1e-3             # still refused
        hardware = SetHardwareComponentState.Request(
            name='FrankaHardwareInterface', target_state=State(id=3, label='active'))
        answer = call(ros_probe, SetHardwareComponentState,
                      f'{MANAGER}/set_hardware_component_state', hardware)
        if release == 'v2':     # out of order: the controllers must be deactivated first
            assert not answer.ok and answer.state.label == 'unconfigured'

        # The documented procedure, as a user runs it from a terminal on the arm.
        with NodeProcess([str(installed_executable('simops_bringup', 'simops-recover')),
                          '--franka-ros2', release], tmp_path / 'recover.log',
                         env=ros_env) as recover:
            assert wait_until(lambda: recover.proc.poll() is not None, 60), recover.output
            assert recover.proc.returncode == 0, recover.output
        assert arm_state(ros_probe) == ('active', 'active')
        stream(commands, slow)
        assert np.abs(settled(ros_probe) - slow).max() < 3e-3             # moves again
        Recovery(ros_probe, release)()                                  # nothing to do: fine
        assert sim.stop() == 0, sim.output


def test_a_target_beyond_the_position_based_limit_sent_by_hand_trips_the_reflex(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """fr3_joint7 brought 0.1 rad short of its upper limit, then a streamed target 0.05 rad
    further in one 50 ms period: 1 rad/s, well under the constant 5.26 rad/s, beyond the
    position-based 0.85 rad/s at the target. The sim stops the arm as the FR3 would."""
    subscribe_states(ros_probe)
    ros_probe.subscribe(ROBOT_STATE, FrankaRobotState,
                        QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT))
    with start_sim(tmp_path) as sim:
        arm = client_for(ros_probe)
        commands = command_publisher(ros_probe)
        home = settled(ros_probe)
        near = home.copy()
        near[6] = SPEC.position_upper[6] - 0.1
        assert Goal(arm, smooth_goal(home, near - home, 4.0)).result(30)[0] == 4   # SUCCEEDED
        time.sleep(1.0)                      # joint 7's servo (p = 50 N*m/rad) settles
        _, near = measured(ros_probe)
        step = near.copy()
        step[6] = SPEC.position_upper[6] - 0.05
        commands.publish(Float64MultiArray(data=step.tolist()))
        assert wait_until(lambda: ros_probe.messages(ROBOT_STATE)[-1].robot_mode
                          == FrankaRobotState.ROBOT_MODE_REFLEX, 5)
        assert ros_probe.messages(ROBOT_STATE)[-1].current_errors.joint_velocity_violation
        time.sleep(0.5)
        _, held = measured(ros_probe)
        assert abs(held[6] - near[6]) < 5e-3, held[6] - near[6]         # it never went there
        log = sim.output
        assert sim.stop() == 0, log
    assert 'position-based limit' in log and 'fr3_joint7' in log


def test_arm_setup_gives_the_arm_its_collision_behaviour_and_the_fitted_payload(
        ros_probe: RosProbe, ros_env: dict[str, str], tmp_path: Path) -> None:
    """real_robot.launch.py's arm_setup against the simulator's franka_hardware services:
    the spec's thresholds (the reflex's own) and a fitted payload are taken; bad values are
    refused with the reason, as the arm refuses them."""
    fitted = tmp_path / 'fitted.yaml'
    fitted.write_text('version: 1\npayload: {mass: 0.35, com_x: 0.0, com_y: 0.01, '
                      'com_z: 0.12}\n')
    with start_sim(tmp_path) as sim, NodeProcess.ros2_run(
            'simops_ros', 'arm_setup', '--ros-args', '-p', f'payload_file:={fitted}',
            log_path=tmp_path / 'arm_setup.log', env=ros_env) as setup:
        assert wait_until(lambda: setup.proc.poll() is not None, 60), setup.output
        assert setup.proc.returncode == 0, setup.output
        assert wait_until(lambda: 'load set: 0.35 kg' in sim.output, 10), sim.output
        assert ('collision behaviour set: joint reflex at '
                f'{SPEC.collision_torque.tolist()} N*m') in sim.output
        bad = SetFullCollisionBehavior.Request(upper_torque_thresholds_nominal=[-1.0] * 7)
        answer = call(ros_probe, SetFullCollisionBehavior,
                      '/service_server/set_full_collision_behavior', bad)
        assert not answer.success and 'upper_torque_thresholds_nominal' in answer.error
        assert sim.stop() == 0, sim.output


def test_arm_setup_without_the_arm_says_so_and_exits_4(ros_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    with NodeProcess.ros2_run('simops_ros', 'arm_setup', '--ros-args', '-p', 'timeout:=1.0',
                              log_path=tmp_path / 'arm_setup.log', env=ros_env) as setup:
        assert wait_until(lambda: setup.proc.poll() is not None, 30), setup.output
        assert setup.proc.returncode == 4, setup.output
    assert 'no service /service_server/set_full_collision_behavior within 1 s' in setup.output


def test_every_franka_hardware_parameter_service_answers_on_the_simulator(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    """franka_hardware's seven services (v3.4.0's service_server): a franka client calling
    any of them gets an answer; the force/torque one moves the joint reflex like the full one,
    and bad values are refused with the field named."""
    identity = np.eye(4).T.ravel().tolist()   # column-major
    flipped = np.diag([1.0, 1.0, -1.0, 1.0]).T.ravel().tolist()   # a reflection: not rigid
    cases = [
        (SetJointStiffness, 'set_joint_stiffness', {'joint_stiffness': [3000.0] * 7},
         {'joint_stiffness': [-1.0] * 7}),
        (SetCartesianStiffness, 'set_cartesian_stiffness',
         {'cartesian_stiffness': [3000.0] * 3 + [300.0] * 3},
         {'cartesian_stiffness': [float('nan')] * 6}),
        (SetTCPFrame, 'set_tcp_frame', {'transformation': identity},
         {'transformation': flipped}),
        (SetStiffnessFrame, 'set_stiffness_frame', {'transformation': identity},
         {'transformation': [0.0] * 16}),
        (SetForceTorqueCollisionBehavior, 'set_force_torque_collision_behavior',
         {'lower_torque_thresholds_nominal': [20.0] * 7,
          'upper_torque_thresholds_nominal': [50.0] * 7,
          'lower_force_thresholds_nominal': [20.0] * 6,
          'upper_force_thresholds_nominal': [40.0] * 6},
         {'upper_torque_thresholds_nominal': [-1.0] * 7}),
    ]
    with start_sim(tmp_path) as sim:
        for kind, name, good, bad in cases:
            answer = call(ros_probe, kind, f'/service_server/{name}', kind.Request(**good))
            assert answer.success and answer.error == '', (name, answer.error)
            answer = call(ros_probe, kind, f'/service_server/{name}', kind.Request(**bad))
            assert not answer.success and next(iter(bad)) in answer.error, (name, answer.error)
        assert wait_until(lambda: 'collision behaviour set: joint reflex at '
                          f'{[50.0] * 7} N*m' in sim.output, 10), sim.output
        assert sim.stop() == 0, sim.output
