"""Helpers for the sysid tests: stand-in data from the simulator's physics wrapper, as bags.

:func:`simulate` drives :class:`simops_sim.physics.Physics` (the wrapper the simulator node
runs) with an excitation streamed as one-point JointTrajectory commands, exactly as the
node would apply them: stamped when computed (each is reached at its stamp plus one period,
from the target where it arrives) or unstamped (one period after arrival).
:func:`write_bag` stores the result as a rosbag2 MCAP bag that looks like the recorder's:
header stamps on the arm's clock, receive times on the recorder's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np
from ros_helpers import REPO
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from simops_core.robot_spec import RobotSpec, load_robot_spec
from simops_core.sim_params import SimParams, load_sim_params
from simops_sim.physics import Physics
from simops_sim.trajectory_plan import parse_trajectory
from simops_sysid.excitation import fourier_excitation
from simops_sysid.replay import CommandLog, controller_inputs

STORE = get_typestore(Stores.ROS2_JAZZY)
SPEC: RobotSpec = load_robot_spec('fr3')
HIDDEN = REPO / 'config/sim_params/standin_hidden.yaml'   # smooth friction
MODEL = REPO / 'models/fr3/scene.xml'
TRAJECTORY_TOPIC = '/fr3_arm_controller/joint_trajectory'
CLOCK_OFFSET = 1_700_000_000.0   # s between the receive clock and the stamp clock
RECORDER_LATENCY = 200_000       # ns from the arm to the recorder, for every topic
REPLAY_KINDS = ('damping', 'armature', 'frictionloss', 'kp', 'kv', 'encoder_offset',
                'torque_offset', 'delay')


def impedance_truth(scale: float = 0.85) -> SimParams:
    """The stand-in's hidden physics behind a position interface: the arm's own impedance
    loop with ``scale`` times the spec's stiffness and damping (as ``set_joint_stiffness``
    would set them), ``controller: joint_impedance``."""
    hidden = load_sim_params(HIDDEN)
    joints = dict(hidden.joints)
    for name, p, d in zip(SPEC.arm_joints, SPEC.impedance_p, SPEC.impedance_d, strict=True):
        joints[name] = replace(joints[name], kp=scale * float(p), kv=scale * float(d))
    return replace(hidden, joints=joints, controller='joint_impedance')


def replayable(params: SimParams) -> SimParams:
    """``params`` with dry friction (transition 0) on every joint: what the replay rolls out
    exactly.

    The fit's rollouts approximate smooth (tanh) friction by four saturating lines; tests of
    the replay rule itself simulate with dry friction, which they represent exactly.
    """
    joints = {name: replace(joint, friction_transition=0.0)
              for name, joint in params.joints.items()}
    return replace(params, joints=joints)


@dataclass(frozen=True)
class StandinData:
    """Joint states ``t`` (N,) s, ``q``/``qd``/``effort`` (N, 9); command arrival ``arrival``
    (M,) s and targets ``commands`` (M, 7) rad sent as one-point trajectories of ``period`` s,
    with header ``stamps`` (M,) s (all zero when unstamped). Times on the arm's clock.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    effort: np.ndarray
    arrival: np.ndarray
    commands: np.ndarray
    period: float
    stamps: np.ndarray


def simulate(duration: float, seed: int = 0, params: SimParams | None = None,
             noise: float = 1e-4, rate: float = 50.0, stamped: bool = True,
             stream: bool = False, law: str = 'joint_trajectory',
             torque_lag: float = 0.0, taken_late: dict[int, float] | None = None
             ) -> StandinData:
    """Run the stand-in (hidden physics by default) through an excitation of ``duration`` s.

    Commands are computed every ``1 / rate`` s and arrive 0.2-1.5 ms later, in order;
    ``stream``: as
    streamed targets (``/joint_commands``, the node's stream rule) instead of one-point
    trajectories (write the bag with ``stream='/joint_commands'``). ``law``: the controller
    law the simulator runs (``joint_impedance``: a position interface's, write the bag with
    ``stream`` a forward controller's ``~/commands``). ``torque_lag`` s: the joints receive
    the actuators' torque through a first-order lag of this time constant (0: none).
    ``taken_late``: command index -> s the arm took it after it arrived (a stalled arm);
    ``arrival`` stays when it arrived, as a recorder sees it.
    """
    params = params or load_sim_params(HIDDEN)
    rng = np.random.default_rng(seed)
    excitation = fourier_excitation(SPEC, duration, seed, 0.25, rate)
    period = 1.0 / rate
    computed = excitation.t + 0.5
    # in order, as one reliable DDS writer delivers (at 1 kHz the jitter alone would swap some)
    arrival = np.maximum.accumulate(computed + rng.uniform(0.2e-3, 1.5e-3, computed.size))
    stamps = computed if stamped else np.zeros_like(computed)
    goals = tuple(parse_trajectory(list(SPEC.arm_joints), [period], [list(q)], [[]],
                                   SPEC.arm_joints, stamp if stamped else None)
                  for q, stamp in zip(excitation.q, stamps, strict=True))
    physics = Physics(mujoco.MjModel.from_xml_path(str(MODEL)), SPEC, params=params)
    physics.reset_keyframe('home')
    physics.set_controller(law)
    physics.set_torque_lag(torque_lag)
    dt = physics.timestep
    steps = round((duration + 1.5) / dt)
    rows = np.empty((steps, 3, len(SPEC.joint_names)))
    encoder = rng.normal(0.0, noise, rows[:, 0].shape)   # the position noise of each reading
    k = 0

    def measured(_: float) -> tuple[np.ndarray, np.ndarray]:
        # The controller reads the encoder the recording logs: the state after the previous
        # step with that reading's noise (at rest before the first).
        position, velocity = physics.arm_measured()
        return (position + encoder[k - 1, :7] if k else position), velocity

    # the node's rule, closed loop: each goal starts from the arm's measured state then
    taken = arrival.copy()
    for index, late in (taken_late or {}).items():
        taken[index] += late
    log = (CommandLog('sim', taken, targets=excitation.q, limits=SPEC) if stream
           else CommandLog('sim', taken, goals=goals))
    inputs = controller_inputs(log, 0.0, dt, SPEC.home, measured)
    for k in range(steps):   # measured() reads k
        target = next(inputs)
        physics.set_arm_target(target[:7], target[7:])
        physics.step()
        physics.read_joints(rows[k])
    t = dt * np.arange(1, steps + 1)
    q = rows[:, 0] + encoder
    return StandinData(t, q, rows[:, 1], rows[:, 2], arrival, excitation.q, period, stamps)


def write_bag(path: Path, data: StandinData, names: list[str] | None = None,
              topic: str = '/franka/joint_states', stamps: np.ndarray | None = None,
              commands: bool = True, stream: str | None = None,
              received: np.ndarray | None = None) -> Path:
    """Store ``data`` as an MCAP bag; ``names``/``stamps`` override what the states carry.

    ``received`` (N,) s on the arm's clock: when the recorder received each joint state
    (default: at its time ``t``, plus the recorder's latency).

    ``stream``: write the commands as ``Float64MultiArray`` positions on this topic (a
    position interface's stream) instead of one-point trajectories.
    """
    types = STORE.types
    names = list(names or SPEC.joint_names)
    stamps = data.t if stamps is None else stamps
    received = data.t if received is None else received
    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        states = writer.add_connection(topic, 'sensor_msgs/msg/JointState', typestore=STORE)
        for k, stamp in enumerate(stamps):
            ns = round(stamp * 1e9)
            header = types['std_msgs/msg/Header'](
                stamp=types['builtin_interfaces/msg/Time'](sec=ns // 10**9, nanosec=ns % 10**9),
                frame_id='fr3_link0')
            msg = types['sensor_msgs/msg/JointState'](
                header=header, name=names, position=data.q[k], velocity=data.qd[k],
                effort=data.effort[k])
            writer.write(states, round((received[k] + CLOCK_OFFSET) * 1e9) + RECORDER_LATENCY,
                         STORE.serialize_cdr(msg, msg.__msgtype__))
        if commands and stream:
            _write_stream(writer, data, stream)
        elif commands:
            _write_commands(writer, data)
    return path


def _write_stream(writer: Writer, data: StandinData, topic: str) -> None:
    types = STORE.types
    connection = writer.add_connection(topic, 'std_msgs/msg/Float64MultiArray', typestore=STORE)
    layout = types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0)
    for arrival, target in zip(data.arrival, data.commands, strict=True):
        msg = types['std_msgs/msg/Float64MultiArray'](layout=layout, data=target.copy())
        writer.write(connection, round((arrival + CLOCK_OFFSET) * 1e9) + RECORDER_LATENCY,
                     STORE.serialize_cdr(msg, msg.__msgtype__))


def _write_commands(writer: Writer, data: StandinData) -> None:
    types = STORE.types
    connection = writer.add_connection(TRAJECTORY_TOPIC, 'trajectory_msgs/msg/JointTrajectory',
                                       typestore=STORE)
    period = types['builtin_interfaces/msg/Duration'](sec=0, nanosec=round(data.period * 1e9))
    empty = np.zeros(0)
    for arrival, target, stamp in zip(data.arrival, data.commands, data.stamps, strict=True):
        ns = round(stamp * 1e9)
        header = types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](sec=ns // 10**9, nanosec=ns % 10**9),
            frame_id='')
        point = types['trajectory_msgs/msg/JointTrajectoryPoint'](
            positions=target.copy(), velocities=empty, accelerations=empty, effort=empty,
            time_from_start=period)
        msg = types['trajectory_msgs/msg/JointTrajectory'](
            header=header, joint_names=list(SPEC.arm_joints), points=[point])
        writer.write(connection, round((arrival + CLOCK_OFFSET) * 1e9) + RECORDER_LATENCY,
                     STORE.serialize_cdr(msg, msg.__msgtype__))
