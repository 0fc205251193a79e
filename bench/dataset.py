"""Dataset export throughput and memory: `simops-dataset export` against a bare MCAP read.

Writes a synthetic policy episode of ``--minutes`` (1 kHz joint states, 20 Hz trajectories and
policy actions, 100 Hz object poses, a latched goal) with rosbags' writer, then in the same
run: reads every message of it with the bare `mcap` reader (no decoding), and exports it with
`simops-dataset export` in a child process. Prints MB of bag per second for both and the
export's peak RSS.

    python bench/dataset.py --minutes 60
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

REPO = Path(__file__).resolve().parents[1]
STORE = get_typestore(Stores.ROS2_JAZZY)
T0 = 1_700_000_000.0
JOINTS = [f'fr3_joint{i}' for i in range(1, 8)] + ['fr3_finger_joint1', 'fr3_finger_joint2']


def write_bag(path: Path, seconds: float) -> None:
    """The synthetic episode, written in receive order 1 s at a time."""
    types = STORE.types
    header, stamp_t = types['std_msgs/msg/Header'], types['builtin_interfaces/msg/Time']
    state_t = 'sensor_msgs/msg/JointState'
    traj_t, pose_t = 'trajectory_msgs/msg/JointTrajectory', 'geometry_msgs/msg/PoseStamped'
    action_t = 'std_msgs/msg/Float64MultiArray'

    def stamp(t: float) -> object:
        sec = int(t)
        return stamp_t(sec=sec, nanosec=round((t - sec) * 1e9))

    def pose(t: float, x: float) -> object:
        return types[pose_t](header=header(stamp=stamp(T0 + t), frame_id='fr3_link0'),
                             pose=types['geometry_msgs/msg/Pose'](
                                 position=types['geometry_msgs/msg/Point'](x=x, y=0.1, z=0.3),
                                 orientation=types['geometry_msgs/msg/Quaternion'](
                                     x=0.0, y=0.0, z=0.0, w=1.0)))

    with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {topic: writer.add_connection(topic, kind, typestore=STORE) for topic, kind in (
            ('/joint_states', state_t), ('/fr3_arm_controller/joint_trajectory', traj_t),
            ('/policy/action', action_t), ('/object_pose', pose_t), ('/goal_pose', pose_t))}

        def put(topic: str, t: float, kind: str, msg: object) -> None:
            data = STORE.serialize_cdr(msg, kind)
            writer.write(conns[topic], round((T0 + t + 0.002) * 1e9), data)

        put('/goal_pose', 0.0, pose_t, pose(0.0, 0.5))
        zeros = np.zeros(9)
        for second in range(int(seconds)):
            batch = []
            for k in range(1000):
                t = second + k * 0.001
                q = 0.2 * np.sin(t * np.linspace(0.5, 1.1, 9))
                batch.append(('/joint_states', t, state_t, types[state_t](
                    header=header(stamp=stamp(T0 + t), frame_id=''), name=JOINTS,
                    position=q, velocity=zeros, effort=zeros)))
                if k % 10 == 0:
                    batch.append(('/object_pose', t, pose_t, pose(t, 0.5)))
                if k % 50 == 0:
                    target = 0.2 * np.sin(t * np.linspace(0.5, 1.1, 7))
                    batch.append(('/fr3_arm_controller/joint_trajectory', t + 0.0005, traj_t,
                                  types[traj_t](
                        header=header(stamp=stamp(0.0), frame_id=''), joint_names=JOINTS[:7],
                        points=[types['trajectory_msgs/msg/JointTrajectoryPoint'](
                            positions=target, velocities=np.empty(0),
                            accelerations=np.empty(0), effort=np.empty(0),
                            time_from_start=types['builtin_interfaces/msg/Duration'](
                                sec=0, nanosec=50_000_000))])))
                    batch.append(('/policy/action', t + 0.0006, action_t, types[action_t](
                        layout=types['std_msgs/msg/MultiArrayLayout'](dim=[], data_offset=0),
                        data=np.append(target, 1.0))))
            for topic, t, kind, msg in sorted(batch, key=lambda m: m[1]):
                put(topic, t, kind, msg)
        writer.set_custom_data('simops.robot', 'fr3')


def bare_read(bag: Path) -> float:
    """Seconds to read every message of the bag's MCAP files without decoding them."""
    started = time.perf_counter()
    count = 0
    for file in sorted(bag.glob('*.mcap')):
        with file.open('rb') as stream:
            for _ in make_reader(stream).iter_messages(log_time_order=True):
                count += 1
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--minutes', type=float, default=60.0)
    parser.add_argument('--workdir', help='where to write the bag (default: a temp dir)')
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix='simops-dataset-bench-'))
    bag, out = work / 'bag', work / 'dataset'
    shutil.rmtree(bag, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    write_bag(bag, args.minutes * 60)
    size = sum(f.stat().st_size for f in bag.iterdir()) / 1e6
    print(f'bag: {args.minutes:g} min, {size:.0f} MB, written in '
          f'{time.perf_counter() - started:.0f} s', flush=True)
    bare = bare_read(bag)
    print(f'bare MCAP read (mcap reader, no decoding): {bare:.1f} s, {size / bare:.1f} MB/s',
          flush=True)
    exe = Path(sys.executable).with_name('simops-dataset')
    card = REPO / 'models/policy/fr3_reach.yaml'
    started = time.perf_counter()
    result = subprocess.run([str(exe), 'export', str(bag), '--card', str(card), '--out',
                             str(out), '--workers', '1'], capture_output=True, text=True,
                            check=False)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return 1
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(result.stdout.strip().splitlines()[0])
    print(f'simops-dataset export: {elapsed:.1f} s, {size / elapsed:.1f} MB/s of bag '
          f'({bare / elapsed:.0%} of the bare read), peak RSS {peak:.0f} MB')
    shutil.rmtree(work)
    return 0


if __name__ == '__main__':
    sys.exit(main())
