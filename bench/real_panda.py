"""``fit`` on a real Panda recording: Gaz et al. 2019's exciting trajectory, as a user runs it.

The recording (C. Gaz, M. Cognetti, A. Oliva, P. Robuffo Giordano, A. De Luca, "Dynamic
Identification of the Franka Emika Panda Robot With Retrieval of Feasible Parameters Using
Penalty-Based Optimization", IEEE RA-L 2019) is public, under the GPL, in
github.com/marcocognetti/FrankaEmikaPandaDynModel (``matlab/data/Exciting_Traj/
Trajectory_1``); it is not shipped here: pass the folder that holds its text files.

- ``gen_time.txt``, ``gen_q0.txt``, ``gen_dq.txt``: the commanded joint velocities (rad/s,
  7 per sample) streamed at 1 kHz from ``gen_q0``; the commanded positions are their
  integral over ``gen_time``.
- ``exciting_traj_time.txt``, ``_positions``, ``_velocity``, ``_torques``: what the arm
  measured (rad, rad/s, link-side ``tau_J`` N*m), about 1 kHz. The arm carried no hand.

The script writes two rosbag2 MCAP bags as ``ros2 bag record`` would have: the arm's joint
states on ``/franka/joint_states`` and the commanded positions as ``Float64MultiArray`` on
``--topic``, a forward command controller's on the position interface by default (stamps
and receive times on the recording's clock), split by time into training (0-14 s) and
held-out (14-21 s), the split of the docs. It then runs the installed ``fit`` with its
defaults and ``--end-effector none`` and prints fit's own report lines and its
wall time; ``--extra`` passes further options.

    .venv/bin/python bench/real_panda.py --data DIR [--topic T] [--extra '--skip-check']
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))

from ros_helpers import installed_executable  # noqa: E402

from simops_core.robot_spec import load_robot_spec  # noqa: E402

STORE = get_typestore(Stores.ROS2_JAZZY)
EPOCH = 1_560_000_000.0   # s added to the recording's clock (any positive time will do)
SPLIT = 14.0              # s: training before, held out after
LATENCY = 200e-6          # s from the arm to the recorder


def load(folder: Path) -> dict[str, np.ndarray]:
    """The recording's arrays: command times and positions, measured times and states."""
    def rows(name: str) -> np.ndarray:
        return np.loadtxt(folder / name).reshape(-1, 7)

    command_t = np.loadtxt(folder / 'gen_time.txt')
    velocity = rows('gen_dq.txt')
    start = np.loadtxt(folder / 'gen_q0.txt')
    steps = np.diff(command_t, prepend=command_t[0])[:, None]
    return {'command_t': command_t, 'command_q': start + np.cumsum(velocity * steps, axis=0),
            't': np.loadtxt(folder / 'exciting_traj_time.txt'),
            'q': rows('exciting_traj_positions.txt'), 'qd': rows('exciting_traj_velocity.txt'),
            'effort': rows('exciting_traj_torques.txt')}


def write(path: Path, data: dict[str, np.ndarray], span: tuple[float, float], topic: str,
          joints: list[str]) -> Path:
    """Write the part of ``data`` inside ``span`` s as an MCAP bag at ``path``."""
    types = STORE.types

    def header(t: float, frame: str) -> object:
        ns = round((t + EPOCH) * 1e9)
        return types['std_msgs/msg/Header'](
            stamp=types['builtin_interfaces/msg/Time'](sec=ns // 10**9, nanosec=ns % 10**9),
            frame_id=frame)

    def receive(t: float) -> int:
        return round((t + EPOCH + LATENCY) * 1e9)

    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        states = writer.add_connection('/franka/joint_states', 'sensor_msgs/msg/JointState',
                                       typestore=STORE)
        commands = writer.add_connection(topic, 'std_msgs/msg/Float64MultiArray',
                                         typestore=STORE)
        inside = np.flatnonzero((data['t'] >= span[0]) & (data['t'] < span[1]))
        sent = np.flatnonzero((data['command_t'] >= span[0]) & (data['command_t'] < span[1]))
        events = sorted([(data['t'][k], 0, k) for k in inside]
                        + [(data['command_t'][k], 1, k) for k in sent])
        layout = types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0)
        for t, kind, k in events:
            if kind == 0:
                msg = types['sensor_msgs/msg/JointState'](
                    header=header(t, ''), name=joints, position=data['q'][k],
                    velocity=data['qd'][k], effort=data['effort'][k])
                writer.write(states, receive(t), STORE.serialize_cdr(msg, msg.__msgtype__))
            else:
                msg = types['std_msgs/msg/Float64MultiArray'](layout=layout,
                                                              data=data['command_q'][k])
                writer.write(commands, receive(t), STORE.serialize_cdr(msg, msg.__msgtype__))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--data', type=Path, required=True,
                        help="folder with Gaz et al.'s Trajectory_1 text files")
    parser.add_argument('--topic', default='/joint_position_controller/commands',
                        help='the commands\' topic in the bags (default '
                             '/joint_position_controller/commands: a forward command '
                             'controller on the position interface)')
    parser.add_argument('--extra', default='', help='further fit options, one string')
    parser.add_argument('--keep', type=Path, help='write the bags and outputs here')
    options = parser.parse_args()
    data = load(options.data)
    joints = list(load_robot_spec('panda').arm_joints)
    folder = options.keep or Path(tempfile.mkdtemp(prefix='real_panda_'))
    folder.mkdir(parents=True, exist_ok=True)
    end = float(max(data['t'][-1], data['command_t'][-1])) + 1.0
    train = write(folder / 'train', data, (0.0, SPLIT), options.topic, joints)
    held = write(folder / 'holdout', data, (SPLIT, end), options.topic, joints)
    args = [str(installed_executable('simops_sysid', 'fit')), '--bag', str(train),
            '--holdout', str(held), '--end-effector', 'none', '--robot', 'panda',
            '--out', str(folder / 'fitted.yaml'), '--report', str(folder / 'report'),
            *shlex.split(options.extra)]
    print('$', ' '.join(args), flush=True)
    started = time.monotonic()
    code = subprocess.run(args, cwd=REPO).returncode
    print(f'fit exit {code}, wall {time.monotonic() - started:.1f} s; bags and outputs in '
          f'{folder}')
    return code


if __name__ == '__main__':
    sys.exit(main())
