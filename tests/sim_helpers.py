"""Shared helpers for the simulator tests: generated models, node start-up, lockstep driving."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from rclpy.qos import QoSProfile
from ros_helpers import NodeProcess, RosProbe, wait_until
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simops_core.franka_ros2 import franka_release
from simops_core.observation import JointIndex
from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import TopicSpec, load_topics
from simops_ros.franka_recovery import FrankaRecovery
from simops_sim.follow_action import action_name

SCENE_XML = resolve_resource('models/fr3/scene.xml')
TOPICS = load_topics()
FR3 = load_robot_spec('fr3')
ACTION = action_name(TOPICS['joint_trajectory'].name)   # the arm's FollowJointTrajectory


def may_use_fifo(priority: int) -> bool:
    """Whether this process may schedule a thread SCHED_FIFO at ``priority``, from the
    kernel's own accounts: CAP_SYS_NICE (bit 23 of CapEff) or RLIMIT_RTPRIO."""
    import resource

    status = Path('/proc/self/status').read_text().splitlines()
    caps = next(line for line in status if line.startswith('CapEff:'))
    return bool(int(caps.split()[1], 16) >> 23 & 1) or \
        resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= priority


def fifo_threads(pid: int) -> list[int]:
    """The real-time priorities of process ``pid``'s SCHED_FIFO threads (proc(5): fields 40
    rt_priority and 41 policy of /proc/<pid>/task/<tid>/stat)."""
    found = []
    for stat in Path(f'/proc/{pid}/task').glob('*/stat'):
        fields = stat.read_text().rsplit(')', 1)[1].split()   # from field 3 on
        if int(fields[41 - 3]) == 1:   # SCHED_FIFO
            found.append(int(fields[40 - 3]))
    return found


def qos(key: str) -> QoSProfile:
    """The QoS profile of topic ``key`` from config/topics.yaml."""
    return QoSProfile(**TOPICS[key].qos.as_profile_kwargs())


def topic(key: str) -> TopicSpec:
    """Topic ``key`` from config/topics.yaml."""
    return TOPICS[key]


def renamed_scene(directory: Path) -> Path:
    """The FR3 scene with arm joints renamed ``arm_0`` .. ``arm_6``, written to ``directory``.

    Generated from the real MJCF by text substitution, so it never drifts from it.
    """
    robot = (SCENE_XML.parent / 'fr3.xml').read_text()
    robot = re.sub(r'([":])fr3_joint(\d)"',   # joint names, and the numerics named for them
                   lambda m: f'{m.group(1)}arm_{int(m.group(2)) - 1}"', robot)
    (directory / 'fr3.xml').write_text(robot)
    (directory / 'scene.xml').write_text(SCENE_XML.read_text())
    return directory / 'scene.xml'


def start_sim(tmp_path: Path, *params: str, name: str = 'sim',
              env: dict[str, str] | None = None) -> NodeProcess:
    """Start ``ros2 run simops_sim sim`` with ``name:=value`` parameters."""
    args = ['--ros-args']
    for param in params:
        args += ['-p', param]
    return NodeProcess.ros2_run('simops_sim', 'sim', *args, log_path=tmp_path / f'{name}.log',
                                env=env)


def subscribe_states(probe: RosProbe) -> str:
    """Subscribe the probe to /joint_states with the contract's QoS; return the topic name."""
    probe.subscribe(topic('joint_states').name, JointState, qos('joint_states'))
    return topic('joint_states').name


def stamp(msg: Any) -> float:
    """A message header's stamp in s."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def command_publisher(probe: RosProbe) -> Any:
    """A /joint_commands publisher, returned once the node's subscription has matched it."""
    pub = probe.publisher(topic('joint_commands').name, Float64MultiArray, qos('joint_commands'))
    assert wait_until(lambda: pub.get_subscription_count() > 0, timeout=20)
    time.sleep(0.3)  # let the node's side of discovery settle too
    return pub


def trajectory_publisher(probe: RosProbe) -> Any:
    """A JointTrajectory publisher, returned once the node's subscription has matched it."""
    pub = probe.publisher(topic('joint_trajectory').name, JointTrajectory,
                          qos('joint_trajectory'))
    assert wait_until(lambda: pub.get_subscription_count() > 0, timeout=20)
    time.sleep(0.3)  # let the node's side of discovery settle too
    return pub


def until_refused(pub: Any, bad: Any, node: NodeProcess, line: str,
                  timeout: float = 30.0) -> None:
    """Publish ``bad`` every 0.1 s until ``node`` logs ``line``, its refusal of it.

    The publisher matching the node's reader says nothing of the reader matching the
    publisher (DDS matches each side on its own); once the node refuses a message, its side
    is up and every message sent after is heard.
    """
    assert wait_until(lambda: pub.publish(bad) or line in node.output, timeout, interval=0.1), \
        f'no {line!r} within {timeout:g} s:\n{node.output}'


def drive_lockstep(probe: RosProbe, node: NodeProcess, commands: Sequence[np.ndarray],
                   period: float) -> list[JointState]:
    """Send ``commands`` one control period at a time; return the state after each period.

    Expects the node to run with ``sync_mode:=lockstep`` and ``joint_state_rate`` equal to
    1 / ``period``, so every period ends with exactly one /joint_states message, and the
    probe to be subscribed already (:func:`subscribe_states`).
    """
    states = topic('joint_states').name
    pub = command_publisher(probe)
    seen = len(probe.messages(states))
    out = []
    for k, command in enumerate(commands):
        pub.publish(Float64MultiArray(data=[float(v) for v in command]))
        due = round((k + 1) * period, 9)

        def arrived(due: float = due) -> bool:
            return any(abs(stamp(m) - due) < 1e-9 for m in probe.messages(states)[seen:])

        assert wait_until(arrived, timeout=10), f'no state at t={due}:\n{node.output}'
        out.append(next(m for m in probe.messages(states)[seen:] if abs(stamp(m) - due) < 1e-9))
    return out


def stream_until(probe: RosProbe, pub: Any, data: Sequence[float], until: float,
                 timeout: float = 20.0) -> None:
    """Publish ``data`` at 20 Hz until /joint_states reach sim time ``until`` (s)."""
    states = topic('joint_states').name
    command = Float64MultiArray(data=[float(v) for v in data])
    deadline = time.monotonic() + timeout
    while stamp(probe.messages(states)[-1]) < until:
        assert time.monotonic() < deadline, f'sim time did not reach {until} s'
        pub.publish(command)
        time.sleep(0.05)


def duration(seconds: float) -> Duration:
    """``seconds`` as a builtin_interfaces Duration."""
    whole = int(seconds)
    return Duration(sec=whole, nanosec=round((seconds - whole) * 1e9))


def smooth_goal(start: np.ndarray, step: np.ndarray, span: float, points: int = 3
                ) -> FollowJointTrajectory.Goal:
    """``start`` to ``start + step`` (7,) rad over ``span`` s on a cubic, as a planner times
    it: every FR3 arm joint, positions, velocities and accelerations per point."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(FR3.arm_joints)
    for k in range(1, points + 1):
        tau = k / points
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=(start + step * (3 * tau**2 - 2 * tau**3)).tolist(),
            velocities=(step * (6 * tau - 6 * tau**2) / span).tolist(),
            accelerations=(step * (6 - 12 * tau) / span**2).tolist(),
            time_from_start=duration(span * tau)))
    return goal


def measured(probe: RosProbe) -> tuple[float, np.ndarray]:
    """The latest /joint_states: its stamp (s) and the FR3 arm positions (7,) rad."""
    msg = probe.wait_for_messages(topic('joint_states').name)[-1]
    return stamp(msg), JointIndex(FR3.arm_joints).select(msg.name, msg.position, np.zeros(7))


def hand(probe: RosProbe) -> np.ndarray:
    """The newest TCP position (3,) m, base frame, from the probe's /ee_pose."""
    p = probe.messages(topic('ee_pose').name)[-1].pose.position
    return np.array([p.x, p.y, p.z])


def still(samples: Sequence[tuple[float, np.ndarray]], seconds: float, within: float) -> bool:
    """Whether ``samples`` ((stamp s, values), oldest first) span more than ``seconds`` and
    their values stayed within ``within`` of each other over the last ``seconds`` of stamps:
    a rest judged on the node's clock, not the test's."""
    if not samples or samples[-1][0] - samples[0][0] <= seconds:
        return False
    recent = [values for t, values in samples if t >= samples[-1][0] - seconds]
    return float(np.ptp(recent, axis=0).max()) < within


def hand_at_rest(probe: RosProbe, seconds: float = 0.2, within: float = 1e-4) -> bool:
    """Whether the hand stayed within ``within`` m over its last ``seconds`` of /ee_pose."""
    poses = probe.messages(topic('ee_pose').name)[-1000:]
    return still([(stamp(m), np.array([m.pose.position.x, m.pose.position.y,
                                       m.pose.position.z])) for m in poses], seconds, within)


def joints_at_rest(probe: RosProbe, seconds: float = 0.2, within: float = 1e-4) -> bool:
    """Whether the FR3 arm joints stayed within ``within`` rad over their last ``seconds`` of
    /joint_states (the probe subscribed with :func:`subscribe_states`)."""
    index = JointIndex(FR3.arm_joints)
    states = probe.messages(topic('joint_states').name)[-1000:]
    return still([(stamp(m), index.select(m.name, m.position, np.zeros(7))) for m in states],
                 seconds, within)


def servoed(probe: RosProbe, since: int = 0) -> list[tuple[float, np.ndarray]]:
    """The twists a servo node reported on /teleop/operator_twist from message ``since`` on:
    the node's stamp (s) and the twist (6,) m/s, rad/s in the base frame, one per tick."""
    return [(stamp(m), np.array([m.twist.linear.x, m.twist.linear.y, m.twist.linear.z,
                                 m.twist.angular.x, m.twist.angular.y, m.twist.angular.z]))
            for m in probe.messages(topic('operator_twist').name)[since:]]


def braked(probe: RosProbe, since: int) -> bool:
    """Whether the node servoed a twist since message ``since`` of /teleop/operator_twist,
    has servoed zero since, and the hand is at rest."""
    ticks = servoed(probe, since)
    return (any(np.any(twist) for _, twist in ticks) and not np.any(ticks[-1][1])
            and hand_at_rest(probe))


def settled(probe: RosProbe, seconds: float = 0.5) -> np.ndarray:
    """The arm's position after ``seconds``, checked to be still (within 1 mrad)."""
    _, before = measured(probe)
    time.sleep(seconds)
    _, after = measured(probe)
    assert np.abs(after - before).max() < 1e-3, after - before
    return after


class Recovery:
    """franka_hardware's whole recovery procedure from ``probe``, as a user clears a protective
    stop: the steps of franka_ros2 ``release`` ('' = the newest, the simulator's default)."""

    def __init__(self, probe: RosProbe, release: str = '', namespace: str = '') -> None:
        self.run = FrankaRecovery(probe, franka_release(release), namespace)

    def __call__(self, timeout: float = 30.0) -> None:
        """Run every step; a refused or unanswered step fails the test."""
        self.run(timeout)
