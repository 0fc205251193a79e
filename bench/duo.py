"""Benchmark ``simops-launch sim layout:=fr3_duo``: two arms, one physics, a policy per arm.

Runs the dual-arm graph (one simulator, ``/left/policy`` and ``/right/policy`` at 20 Hz of
sim time) for a while, each arm reaching a goal, and prints from the nodes' own
``/diagnostics``: the simulator's real-time factor and step time, each policy's period
(p50 / p99) and observation-to-command latency, and each process's CPU use (from /proc).

    .venv/bin/python bench/duo.py [--seconds 20]

Target (issue #15): two policies at 20 Hz against one physics, in real time on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from proc_stats import cpu_seconds

from simops_core.dds_isolation import claim_domain_id, isolated_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))

GOALS = {'left': (0.5, 0.15, 0.3), 'right': (0.35, -0.25, 0.15)}   # m, each arm's base frame
TEXT = ('state', 'reason', 'control_thread_scheduling', 'paused', 'last_divergence',
        'protective_stop')   # diagnostic values that are not numbers


def run(seconds: float, log: Path) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """The last diagnostics values of every status, and each node's CPU (% of one core)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped
    from launch_helpers import node_pids
    from ros_helpers import NodeProcess, RosProbe, installed_executable, wait_until

    from simops_core.topics import load_topics
    from simops_ros.qos import qos_profile

    topics = load_topics()
    probe = RosProbe('duo_bench')
    probe.subscribe(topics['diagnostics'].name, DiagnosticArray, 100)
    for arm, goal in GOALS.items():
        msg = PoseStamped()
        msg.header.frame_id = 'fr3_link0'
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = goal
        msg.pose.orientation.w = 1.0
        probe.publisher(f'/{arm}{topics["goal_pose"].name}', PoseStamped,
                        qos_profile(topics['goal_pose'])).publish(msg)
    argv = [str(installed_executable('simops_bringup', 'simops-launch')), 'sim',
            'layout:=fr3_duo']
    try:
        with NodeProcess(argv, log, env=dict(os.environ)) as proc:
            names = {'sim', 'left/policy', 'right/policy'}
            if not wait_until(lambda: set(node_pids(proc.output)) == names, 60):
                raise SystemExit(f'the graph did not start:\n{proc.output[-2000:]}')
            pids = node_pids(proc.output)
            time.sleep(5.0)   # past start-up
            cpu0, wall0 = {n: cpu_seconds(p) for n, p in pids.items()}, time.monotonic()
            time.sleep(seconds)
            cpu = {n: 100.0 * (cpu_seconds(p) - cpu0[n]) / (time.monotonic() - wall0)
                   for n, p in pids.items()}
            proc.stop()
    finally:
        probe.close()
    last: dict[str, dict[str, float]] = {}
    for array in probe.messages(topics['diagnostics'].name):
        for status in array.status:
            last[status.name] = {kv.key: float(kv.value) for kv in status.values
                                 if kv.key not in TEXT}
    return last, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='wall time measured (s)')
    args = parser.parse_args()
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    print(f'load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    with tempfile.TemporaryDirectory() as tmp:
        status, cpu = run(args.seconds, Path(tmp) / 'launch.log')
    claim.release()
    sim = status['sim: physics']
    print(f'fr3_duo, {args.seconds:g} s: one simulator (2 arms, 1 kHz physics, 2 x 1 kHz '
          '/joint_states, one /clock), two policies')
    print(f'  simulator real-time factor  {sim["realtime_factor"]:.3f} (last 1 s window), '
          f'step {sim["step_time_mean_us"]:.1f} us mean, {sim["step_time_max_us"]:.0f} us max, '
          f'{sim["protective_stops"]:.0f} protective stops')
    for arm in GOALS:
        loop = status[f'{arm}/policy: control loop']
        print(f'  {arm} policy                 period p50 {loop["period_p50_ms"]:.1f} ms, '
              f'p99 {loop["period_p99_ms"]:.1f} ms; latency p50 {loop["latency_p50_ms"]:.2f} '
              f'ms, p99 {loop["latency_p99_ms"]:.2f} ms; {loop["commands"]:.0f} commands, '
              f'{loop["overruns"]:.0f} overruns')
    print('  CPU (% of one core)         ' + ', '.join(f'{n} {c:.1f}' for n, c in cpu.items()))
    print(f'load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    periods = [status[f'{arm}/policy: control loop']['period_p50_ms'] for arm in GOALS]
    met = sim['realtime_factor'] > 0.98 and all(abs(p - 50.0) < 1.0 for p in periods)
    print('target (real time, both policies at 20 Hz):', 'met' if met else 'NOT met')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
