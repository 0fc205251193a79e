"""franka_gripper's interface on the sim: grasp the 4 cm cube, fail on nothing, move, stop.

A real ``sim`` process over DDS. The arm is brought over the cube with FollowJointTrajectory
goals (joint targets from a damped least-squares IK on the same model), then the probe
drives the gripper through ``/franka_gripper``'s actions, as a franka_ros2 user would.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory, GripperCommand
from franka_msgs.action import ErrorRecovery, Grasp, Homing, Move
from franka_msgs.msg import GraspEpsilon
from rclpy.qos import qos_profile_sensor_data
from ros_helpers import NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import JointState
from sim_helpers import ACTION, SCENE_XML, measured, smooth_goal, start_sim, subscribe_states, topic
from std_srvs.srv import Trigger

from simops_core.robot_spec import load_robot_spec
from simops_sim.physics import Physics

SPEC = load_robot_spec('fr3')
GRIPPER = '/franka_gripper'
CUBE = np.array([0.5, 0.0, 0.02])   # m, the scene's cube centre on the table
TCP = np.array([0.0, 0.0, 0.1034])  # m, Franka's TCP in the hand frame (between the fingertips)


def ik(target: np.ndarray, physics: Physics, start: np.ndarray | None = None) -> np.ndarray:
    """Arm joints (7,) rad putting the TCP at ``target`` (3,) m with home's hand orientation,
    searched from ``start`` (7,) rad (home by default) within the joint limits."""
    model, data = physics.model, physics.data
    hand = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, 'fr3_hand')
    physics.reset_keyframe('home')
    goal_rot = data.xmat[hand].reshape(3, 3).copy()
    dofs, adr = physics.index.dof_adr[:7], physics.index.qpos_adr[:7]
    if start is not None:
        data.qpos[adr] = start
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)   # mj_jac needs both
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    for _ in range(1000):
        rot = data.xmat[hand].reshape(3, 3)
        tcp = data.xpos[hand] + rot @ TCP
        twist = np.concatenate((target - tcp, 0.5 * sum(np.cross(rot[:, k], goal_rot[:, k])
                                                      for k in range(3))))
        if np.linalg.norm(twist) < 1e-6:
            break
        mujoco.mj_jac(model, data, jacp, jacr, tcp, hand)
        jac = np.vstack((jacp[:, dofs], jacr[:, dofs]))
        step = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), twist)
        step *= min(1.0, 0.05 / np.abs(step).max())   # rad per iteration, stays on the branch
        data.qpos[adr] = np.clip(data.qpos[adr] + step, SPEC.position_lower,
                                 SPEC.position_upper)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
    return data.qpos[adr].copy()


class Client:
    """Send one goal on ``action`` and wait for its outcome."""

    def __init__(self, probe: RosProbe, action: type, name: str) -> None:
        self.client = probe.action_client(action, name)
        assert self.client.wait_for_server(timeout_sec=30.0), f'no {name} server'
        self.feedback: list[Any] = []

    def run(self, goal: Any, timeout: float = 20.0) -> tuple[int, Any]:
        sent = self.client.send_goal_async(goal, feedback_callback=lambda f: self.feedback
                                           .append(f.feedback))
        assert wait_until(sent.done, 20) and sent.result().accepted
        outcome = sent.result().get_result_async()
        assert wait_until(outcome.done, timeout), 'no result'
        return outcome.result().status, outcome.result().result


def opening(probe: RosProbe) -> tuple[float, float]:
    """The gripper node's opening (m) and the simulator's own (sum of finger joints)."""
    hand = probe.wait_for_messages(f'{GRIPPER}/joint_states')[-1]
    arm = probe.wait_for_messages(topic('joint_states').name)[-1]
    fingers = [arm.position[list(arm.name).index(j)] for j in SPEC.gripper.joints]
    return float(sum(hand.position)), float(sum(fingers))


def test_grasp_the_cube_fail_on_nothing_move_and_stop(ros_probe: RosProbe,
                                                      tmp_path: Path) -> None:
    physics = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC)
    above = ik(CUBE + np.array([0.0, 0.0, 0.15]), physics)
    at = ik(CUBE, physics, start=above)   # the TCP at the cube centre, fingers around it
    subscribe_states(ros_probe)
    ros_probe.subscribe(f'{GRIPPER}/joint_states', JointState, qos_profile_sensor_data)
    with start_sim(tmp_path) as sim:
        assert wait_until(lambda: 'franka_gripper' in ros_probe.node.get_node_names(), 20)
        arm = Client(ros_probe, FollowJointTrajectory, ACTION)
        grasp = Client(ros_probe, Grasp, f'{GRIPPER}/grasp')
        move = Client(ros_probe, Move, f'{GRIPPER}/move')
        _, home = measured(ros_probe)
        assert arm.run(smooth_goal(home, above - home, 3.0))[0] == GoalStatus.STATUS_SUCCEEDED

        # Nothing between the fingers: they close fully, and the grasp fails.
        empty = Grasp.Goal(width=0.04, epsilon=GraspEpsilon(), speed=0.1, force=20.0)
        status, result = grasp.run(empty)
        assert status == GoalStatus.STATUS_ABORTED and not result.success
        assert 'outside' in result.error and opening(ros_probe)[0] < 0.01

        assert move.run(Move.Goal(width=0.08, speed=0.1))[1].success
        assert arm.run(smooth_goal(above, at - above, 2.0))[0] == GoalStatus.STATUS_SUCCEEDED
        status, result = grasp.run(Grasp.Goal(width=0.04, epsilon=GraspEpsilon(), speed=0.05,
                                              force=30.0))
        assert status == GoalStatus.STATUS_SUCCEEDED and result.success, result.error
        assert grasp.feedback and abs(grasp.feedback[-1].current_width - 0.04) < 0.005
        hand, fingers = opening(ros_probe)
        assert abs(hand - 0.04) < 0.005 and abs(hand - fingers) < 1e-3   # the two agree

        # Open again: move reports the final width; GripperCommand and homing work too.
        status, result = move.run(Move.Goal(width=0.08, speed=0.1))
        assert status == GoalStatus.STATUS_SUCCEEDED and result.success
        assert abs(move.feedback[-1].current_width - 0.08) < 0.003
        command = Client(ros_probe, GripperCommand, f'{GRIPPER}/gripper_action')
        goal = GripperCommand.Goal()
        goal.command.position = 0.02   # half the opening, as franka_gripper reads it
        status, result = command.run(goal)
        assert status == GoalStatus.STATUS_SUCCEEDED and result.reached_goal
        assert abs(result.position - 0.04) < 0.003
        assert Client(ros_probe, Homing, f'{GRIPPER}/homing').run(Homing.Goal())[1].success

        # ~/stop holds the fingers where they are and ends the running goal.
        stop = ros_probe.node.create_client(Trigger, f'{GRIPPER}/stop')
        assert stop.wait_for_service(timeout_sec=10)
        slow = move.client.send_goal_async(Move.Goal(width=0.0, speed=0.01))
        assert wait_until(slow.done, 10)
        answer = stop.call_async(Trigger.Request())
        assert wait_until(answer.done, 10) and answer.result().success
        result = slow.result().get_result_async()
        assert wait_until(result.done, 10)
        assert result.result().status == GoalStatus.STATUS_ABORTED
        assert 0.06 < opening(ros_probe)[0] < 0.08
        assert sim.proc.poll() is None


@pytest.mark.parametrize('how', ['sim_params', 'parameter'])
def test_an_arm_without_a_hand_has_no_gripper_node(ros_probe: RosProbe, tmp_path: Path,
                                                   how: str) -> None:
    """``end_effector: none`` in the SimParams, or the node's ``gripper:=false``."""
    params = tmp_path / 'no_hand.yaml'
    params.write_text('version: 1\nend_effector: none\n')
    subscribe_states(ros_probe)
    with start_sim(tmp_path, f'sim_params_file:={params}' if how == 'sim_params'
                   else 'gripper:=false') as sim:
        ros_probe.wait_for_messages(topic('joint_states').name, timeout=30)
        assert wait_until(lambda: {'sim', 'action_server'}
                          <= set(ros_probe.node.get_node_names()), 20)
        time.sleep(1.0)   # the gripper node is made before physics starts publishing
        assert 'franka_gripper' not in ros_probe.node.get_node_names()
        assert sim.proc.poll() is None
        assert sim.stop() == 0, sim.output


def test_the_companions_follow_the_simulators_namespace(ros_probe: RosProbe,
                                                        tmp_path: Path) -> None:
    """``__ns:=/lab`` (namespace:=lab in the launch files): the gripper and the error
    recovery serve under /lab, as franka_ros2 puts them in the arm's namespace."""
    with NodeProcess.ros2_run('simops_sim', 'sim', '--ros-args', '-r', '__ns:=/lab',
                              log_path=tmp_path / 'sim.log') as sim:
        expected = {('franka_gripper', '/lab'), ('action_server', '/lab'), ('sim', '/lab')}
        assert wait_until(lambda: expected <= set(
            ros_probe.node.get_node_names_and_namespaces()), 20), \
            ros_probe.node.get_node_names_and_namespaces()
        client = ros_probe.action_client(ErrorRecovery, '/lab/action_server/error_recovery')
        assert client.wait_for_server(timeout_sec=20.0)
        # the node logs its summary once every interface exists: stop it after that
        assert wait_until(lambda: 'Hz physics' in sim.output, 20), sim.output
        assert sim.stop() == 0, sim.output
