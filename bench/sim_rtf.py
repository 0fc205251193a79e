"""Benchmark the sim node as a real process over DDS: real-time tracking and free-running speed.

Prints, for realtime_factor 1.0 (1 kHz physics, 1 kHz /joint_states, /clock on) and for
realtime_factor 0 (as fast as possible, still publishing every 1 ms of sim time):
the achieved real-time factor, how far sim time strays from wall time, the /joint_states
rate a subscriber receives, the node's mean step time and its CPU use (from /proc).

    .venv/bin/python bench/sim_rtf.py [--seconds 10]

Targets (issue #3): factor 1.0 sustained with < 50 % of one core; free-running >= 10x.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from simops_core.dds_isolation import claim_domain_id, isolated_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (s), from /proc/<pid>/stat."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def run(factor: float, seconds: float, log_dir: Path) -> dict[str, float]:
    """Start the node at ``factor``, measure for ``seconds`` of wall time, return figures."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile
    from ros_helpers import NodeProcess, RosProbe
    from sensor_msgs.msg import JointState

    from simops_core.topics import load_topics

    topics = load_topics()
    state = topics['joint_states']
    probe = RosProbe('sim_bench')
    stamps: list[tuple[float, float]] = []   # (wall receive time, sim stamp)

    def on_state(msg: JointState) -> None:
        stamps.append((time.monotonic(), msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec))

    probe.node.create_subscription(JointState, state.name, on_state,
                                   QoSProfile(**state.qos.as_profile_kwargs()))
    probe.subscribe(topics['diagnostics'].name, DiagnosticArray)
    args = ['--ros-args', '-p', f'realtime_factor:={factor}', '-p', 'joint_state_rate:=1000.0']
    try:
        with NodeProcess.ros2_run('simops_sim', 'sim', *args,
                                  log_path=log_dir / f'sim_{factor:g}.log') as node:
            deadline = time.monotonic() + 30
            while not stamps and time.monotonic() < deadline:
                time.sleep(0.05)
            if not stamps:
                raise SystemExit(f'no /joint_states from the node:\n{node.output}')
            time.sleep(1.0)  # settle: discovery, first diagnostics window
            first = len(stamps)
            cpu0, wall0 = cpu_seconds(node.proc.pid), time.monotonic()
            diag0 = len(probe.messages(topics['diagnostics'].name))
            time.sleep(seconds)
            cpu1, wall1 = cpu_seconds(node.proc.pid), time.monotonic()
            window = stamps[first:]
            diags = probe.messages(topics['diagnostics'].name)[diag0:]
            node.stop()
    finally:
        probe.close()
    values = [{kv.key: float(kv.value) for kv in d.status[0].values
               if kv.key not in ('paused',)} for d in diags]
    (w0, s0), (w1, s1) = window[0], window[-1]
    offsets = [(s - s0) - factor * (w - w0) for w, s in window] if factor else [0.0]
    return {
        'rtf': (s1 - s0) / (w1 - w0),
        'rtf_diag': min(v['realtime_factor'] for v in values) if values else float('nan'),
        'track_ms': 1e3 * (max(offsets) - min(offsets)),
        'received_hz': len(window) / (w1 - w0),
        'published_hz': (sum(v['joint_state_rate_hz'] for v in values) / len(values)
                         if values else float('nan')),
        'step_us': (sum(v['step_time_mean_us'] for v in values) / len(values)
                    if values else float('nan')),
        'cpu_pct': 100.0 * (cpu1 - cpu0) / (wall1 - wall0),
        'overruns': max((v['overruns'] for v in values), default=0.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='wall time per run (s)')
    args = parser.parse_args()
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    print(f'load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    with tempfile.TemporaryDirectory() as tmp:
        paced = run(1.0, args.seconds, Path(tmp))
        free = run(0.0, args.seconds, Path(tmp))
    claim.release()
    print(f'realtime_factor 1.0, 1 kHz physics + 1 kHz /joint_states + /clock, '
          f'{args.seconds:g} s:')
    print(f'  achieved real-time factor   {paced["rtf"]:.4f} (worst 1 s window '
          f'{paced["rtf_diag"]:.4f})')
    print(f'  sim-vs-wall tracking error  {paced["track_ms"]:.2f} ms peak-to-peak '
          '(receive-side, includes DDS latency)')
    print(f'  /joint_states received      {paced["received_hz"]:.1f} Hz '
          f'(published {paced["published_hz"]:.1f} Hz)')
    print(f'  node step time (mean)       {paced["step_us"]:.1f} us incl. publishing')
    print(f'  node CPU                    {paced["cpu_pct"]:.1f} % of one core')
    print('realtime_factor 0 (free-running), /joint_states every 1 ms of sim time:')
    print(f'  real-time factor            {free["rtf"]:.2f}x')
    print(f'  node step time (mean)       {free["step_us"]:.1f} us incl. publishing')
    print(f'  node CPU                    {free["cpu_pct"]:.1f} % of one core')
    print(f'load average after: {os.getloadavg()[0]:.2f}')
    ok = paced['rtf'] > 0.98 and paced['cpu_pct'] < 50 and free['rtf'] >= 10
    print('targets (factor 1.0 under 50 % CPU, free-running >= 10x):',
          'met' if ok else 'NOT met')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
