"""Synthetic episodes written by rosbags' own rosbag2 writer (independent of SimOps)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

STORE = get_typestore(Stores.ROS2_JAZZY)
JOINTS = tuple(f'fr3_joint{i}' for i in range(1, 8))
FINGERS = ('fr3_finger_joint1', 'fr3_finger_joint2')
HOME = np.array([0.0, -0.785398163, 0.0, -2.35619449, 0.0, 1.57079633, 0.785398163])
T0 = 1_700_000_000.0   # s, the arm's clock at the first joint state


TWIST_TICKS = np.arange(0.0, 60.0, 0.01) + 0.0003   # s from T0: the teleop node's 100 Hz


def operator_twist(t: float) -> np.ndarray:
    """The synthetic operator's twist (6,) m/s, rad/s at tick ``t`` s: unique per tick."""
    return np.array([0.01 * t, -0.02 * t, 0.05, 0.0, 0.1 * t, -0.3])


def gripper_command(t: float) -> float:
    """The synthetic teleop node's hand width (m) at tick ``t`` s: closing at 0.1 m/s."""
    return max(0.08 - 0.1 * t, 0.0)


def joint_position(t: np.ndarray) -> np.ndarray:
    """The synthetic arm's positions (N, 7) rad at stamp times ``t`` (N,) s (from T0)."""
    return HOME + 0.2 * np.sin(np.outer(t, np.linspace(0.5, 1.1, 7)))


@dataclass(frozen=True)
class Synthetic:
    """What was written: command ticks (s from T0), targets (M, 7) rad, goal (3,) m."""

    ticks: np.ndarray
    targets: np.ndarray
    goal: np.ndarray


def _time(t: float) -> object:
    sec = int(np.floor(t))
    return STORE.types['builtin_interfaces/msg/Time'](sec=sec, nanosec=round((t - sec) * 1e9))


def write_episode(path: Path, duration: float = 3.0, joints: tuple[str, ...] = JOINTS,
                  latency: float = 0.002, pause: tuple[float, float] | None = None,
                  robot: str = 'fr3', storage: StoragePlugin = StoragePlugin.MCAP,
                  success: str = 'true', teleop: bool = False) -> Synthetic:
    """A policy episode: 1 kHz joint states, 20 Hz one-point trajectories (none during
    ``pause`` (start, end) s), 100 Hz object poses, one latched goal, custom_data.

    With ``teleop``, a demonstration instead: no policy output, the teleop node's operator
    twist at 100 Hz (:func:`operator_twist` at ticks 0.3 ms after each 10 ms) and the hand's
    width it sends franka_gripper (:func:`gripper_command`, 0.1 ms later), source teleop.
    """
    types = STORE.types
    header = types['std_msgs/msg/Header']
    pose_t = types['geometry_msgs/msg/PoseStamped']
    pose = types['geometry_msgs/msg/Pose']
    point = types['geometry_msgs/msg/Point']
    quat = types['geometry_msgs/msg/Quaternion']
    goal = np.array([0.5, 0.1, 0.3])
    messages: list[tuple[float, str, object, str]] = []
    t = np.arange(0.0, duration, 0.001)
    q = joint_position(t)
    for k, stamp in enumerate(t):
        msg = types['sensor_msgs/msg/JointState'](
            header=header(stamp=_time(T0 + stamp), frame_id=''), name=[*joints, *FINGERS],
            position=np.append(q[k], [0.04, 0.04]), velocity=np.zeros(9),
            effort=np.zeros(9))
        messages.append((stamp + latency, '/joint_states', msg, 'sensor_msgs/msg/JointState'))
    ticks = np.arange(0.0, duration, 0.05) + 0.0005
    if pause is not None:
        ticks = ticks[(ticks < pause[0]) | (ticks >= pause[1])]
    targets = joint_position(ticks) + 0.01
    for tick, target in zip(ticks, targets, strict=True):
        traj = types['trajectory_msgs/msg/JointTrajectory'](
            header=header(stamp=_time(0.0), frame_id=''), joint_names=list(joints),
            points=[types['trajectory_msgs/msg/JointTrajectoryPoint'](
                positions=target, velocities=np.empty(0), accelerations=np.empty(0),
                effort=np.empty(0), time_from_start=types['builtin_interfaces/msg/Duration'](
                    sec=0, nanosec=50_000_000))])
        messages.append((tick + latency, '/fr3_arm_controller/joint_trajectory', traj,
                         'trajectory_msgs/msg/JointTrajectory'))
        action = types['std_msgs/msg/Float64MultiArray'](
            layout=types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0),
            data=np.append(target - HOME, 1.0))
        if not teleop:
            messages.append((tick + latency + 1e-4, '/policy/action', action,
                             'std_msgs/msg/Float64MultiArray'))
    twist_t, twist = types['geometry_msgs/msg/TwistStamped'], types['geometry_msgs/msg/Twist']
    vector = types['geometry_msgs/msg/Vector3']
    for tick in TWIST_TICKS[:np.searchsorted(TWIST_TICKS, duration)] if teleop else ():
        v = operator_twist(tick)
        msg = twist_t(header=header(stamp=_time(T0 + tick), frame_id='fr3_link0'),
                      twist=twist(linear=vector(x=v[0], y=v[1], z=v[2]),
                                  angular=vector(x=v[3], y=v[4], z=v[5])))
        messages.append((tick + latency, '/teleop/operator_twist', msg,
                         'geometry_msgs/msg/TwistStamped'))
        width = types['std_msgs/msg/Float64MultiArray'](
            layout=types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0),
            data=np.array([gripper_command(tick)]))
        messages.append((tick + latency + 1e-4, '/simops/gripper_command', width,
                         'std_msgs/msg/Float64MultiArray'))
    for stamp in np.arange(0.0, duration, 0.01):
        msg = pose_t(header=header(stamp=_time(T0 + stamp), frame_id='fr3_link0'),
                     pose=pose(position=point(x=0.5 + stamp, y=0.0, z=0.02),
                               orientation=quat(x=0.0, y=0.0, z=0.0, w=1.0)))
        messages.append((stamp + latency, '/object_pose', msg, 'geometry_msgs/msg/PoseStamped'))
    goal_msg = pose_t(header=header(stamp=_time(T0), frame_id='fr3_link0'),
                      pose=pose(position=point(x=goal[0], y=goal[1], z=goal[2]),
                                orientation=quat(x=0.0, y=0.0, z=0.0, w=1.0)))
    messages.append((-0.5, '/goal_pose', goal_msg, 'geometry_msgs/msg/PoseStamped'))
    messages.sort(key=lambda m: m[0])
    with Writer(path, version=8, storage_plugin=storage) as writer:
        connections = {}
        for _, topic, _, msgtype in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=STORE)
        for received, topic, msg, msgtype in messages:
            writer.write(connections[topic], round((T0 + received) * 1e9),
                         STORE.serialize_cdr(msg, msgtype))
        writer.set_custom_data('simops.robot', robot)
        writer.set_custom_data('simops.success', success)
        writer.set_custom_data('simops.label', 'synthetic')
        writer.set_custom_data('simops.end_reason', 'operator')
        if teleop:
            writer.set_custom_data('simops.source', 'teleop')
            writer.set_custom_data('simops.task', 'put the cube on the goal')
    return Synthetic(ticks, targets, goal)
