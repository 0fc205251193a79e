"""The teleop node over DDS: latency from a twist to the next command, and tracking.

Starts the simulator (1 kHz, realtime) and ``ros2 run simops_teleop teleop`` (enabled at
start, as on a simulator), in a DDS domain of its own on loopback. A probe in this process
stands in for the operator's device:

1. **Latency.** Twists (±0.02 m/s along y, alternating each message) at 50 Hz, the
   scripted operator's rate, for ``--seconds``; per twist, the time from its publication to
   the first ``/joint_commands`` message sent after it, by that message's DDS source
   timestamp (the node's latency: delivery to it, the wait for its next tick, which a
   timer runs once a period, and its work) and by its receipt here (plus delivery back and
   this process's own delays), and the gaps between the commands sent. Measured at the
   default 100 Hz and at 500 Hz (``teleop_rate``).
2. **Tracking.** A constant +0.1 m/s twist along x in the base frame for 2 s at 100 Hz;
   from ``/ee_pose``, the TCP's speed along x over the middle second and its largest
   cross-track deviation (y and z) from the straight line.

    .venv/bin/python bench/teleop.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from simops_core.dds_isolation import claim_domain_id, isolated_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))
OPERATOR_RATE = 50.0   # Hz: the scripted operator's twists
SPEED = 0.1            # m/s: the tracking run's twist


def latency(probe: object, twists: object, commands: list[tuple[float, int]], seconds: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Publish alternating twists at OPERATOR_RATE: each one's delay to the next command sent
    and to the next command received (s), and the gaps between the commands sent (s).

    ``commands``: (monotonic receipt s, DDS source timestamp ns) of each command received.
    """
    from geometry_msgs.msg import TwistStamped

    sent = []
    message = TwistStamped()
    message.header.frame_id = 'fr3_link0'
    end = time.monotonic() + seconds
    k = 0
    while time.monotonic() < end:
        message.twist.linear.y = 0.02 if k % 2 else -0.02
        sent.append((time.monotonic(), time.time_ns()))
        twists.publish(message)
        k += 1
        time.sleep(1.0 / OPERATOR_RATE)
    time.sleep(0.2)
    received = np.array([c[0] for c in commands])
    source = np.array([c[1] for c in commands], dtype=np.int64)
    sent_at = np.array([s[0] for s in sent])
    sent_ns = np.array([s[1] for s in sent], dtype=np.int64)
    after = np.searchsorted(received, sent_at)
    ok = after < received.size
    at_probe = received[after[ok]] - sent_at[ok]
    after = np.searchsorted(source, sent_ns)
    ok = after < source.size
    return (source[after[ok]] - sent_ns[ok]) * 1e-9, at_probe, np.diff(source) * 1e-9


def tracking(probe: object, twists: object, poses: list[tuple[float, np.ndarray]]
             ) -> tuple[float, float]:
    """(speed along x over the middle second (m/s), largest cross-track deviation (m))."""
    from geometry_msgs.msg import TwistStamped

    message = TwistStamped()
    message.header.frame_id = 'fr3_link0'
    message.twist.linear.x = SPEED
    start = time.monotonic()
    poses.clear()
    while time.monotonic() - start < 2.0:
        twists.publish(message)
        time.sleep(0.01)
    end = time.monotonic()
    time.sleep(0.5)
    t = np.array([p[0] for p in poses])
    xyz = np.array([p[1] for p in poses])
    middle = (t > start + 0.5) & (t < end - 0.5)
    speed = np.polyfit(t[middle], xyz[middle, 0], 1)[0]
    moving = (t > start) & (t < end + 0.3)
    cross = np.abs(xyz[moving, 1:] - xyz[np.argmax(moving), 1:]).max()
    return float(speed), float(cross)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=20.0,
                        help='latency run per teleop rate')
    args = parser.parse_args()
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    from geometry_msgs.msg import PoseStamped, TwistStamped
    from ros_helpers import NodeProcess, RosProbe
    from sim_helpers import qos
    from std_msgs.msg import Float64MultiArray

    from simops_core.topics import load_topics

    topics = load_topics()
    results = {}
    with tempfile.TemporaryDirectory(prefix='teleop_bench_') as tmp:
        work = Path(tmp)
        probe = RosProbe('teleop_bench')
        commands: list[tuple[float, int]] = []
        poses: list[tuple[float, np.ndarray]] = []
        lock = threading.Lock()

        def on_command(_: Float64MultiArray, info: dict) -> None:
            with lock:
                commands.append((time.monotonic(), info['source_timestamp']))

        def on_pose(msg: PoseStamped) -> None:
            p = msg.pose.position
            poses.append((time.monotonic(), np.array([p.x, p.y, p.z])))

        probe.node.create_subscription(Float64MultiArray, topics['joint_commands'].name,
                                       on_command, qos('joint_commands'))
        probe.node.create_subscription(PoseStamped, topics['ee_pose'].name, on_pose,
                                       qos('ee_pose'))
        twists = probe.node.create_publisher(TwistStamped, '/teleop/delta_twist_cmds', 10)
        sim = NodeProcess.ros2_run('simops_sim', 'sim', log_path=work / 'sim.log')
        try:
            for rate in (100.0, 500.0):
                teleop = NodeProcess.ros2_run(
                    'simops_teleop', 'teleop', '--ros-args', '-p', f'teleop_rate:={rate}',
                    '-p', 'start_enabled:=true', log_path=work / f'teleop_{rate:g}.log')
                try:
                    deadline = time.monotonic() + 60
                    while not (commands and poses and twists.get_subscription_count()):
                        if time.monotonic() > deadline:
                            raise SystemExit(f'teleop at {rate:g} Hz did not come up: '
                                             f'{teleop.output[-2000:]}')
                        time.sleep(0.1)
                    time.sleep(1.0)   # ramped in
                    commands.clear()
                    delays = latency(probe, twists, commands, args.seconds)
                    time.sleep(0.5)
                    results[rate] = (*delays, *tracking(probe, twists, poses))
                finally:
                    teleop.stop()
                    commands.clear()
                    poses.clear()
        finally:
            sim.stop()
            probe.close()
    load = os.getloadavg()
    print(f'{os.cpu_count()} cores, load average {load[0]:.2f}; operator twists at '
          f'{OPERATOR_RATE:g} Hz, {args.seconds:g} s per rate')
    for rate, (sent, received, gaps, speed, cross) in results.items():
        ms, back, gap = 1e3 * sent, 1e3 * received, 1e3 * gaps
        print(f'teleop_rate {rate:5.0f} Hz: twist -> command sent p50 '
              f'{np.percentile(ms, 50):.2f} ms, p99 {np.percentile(ms, 99):.2f} ms, max '
              f'{ms.max():.2f} ms ({ms.size} twists); received here p50 '
              f'{np.percentile(back, 50):.2f} ms, p99 {np.percentile(back, 99):.2f} ms; '
              f'commands sent at {gap.size / gaps.sum():.1f} Hz, gaps {gap.min():.2f}-'
              f'{gap.max():.2f} ms; tracking {SPEED:g} m/s along x: {speed:.4f} m/s, '
              f'cross-track {1e3 * cross:.2f} mm')
    claim.release()


if __name__ == '__main__':
    main()
