"""Benchmark the sim node as a real process over DDS: real-time tracking and free-running speed.

Prints, for realtime_factor 1.0 (1 kHz physics, 1 kHz /joint_states, /clock on) and for
realtime_factor 0 (as fast as possible, still publishing every 1 ms of sim time):
the achieved real-time factor, how far sim time strays from wall time, the /joint_states
rate a subscriber receives, the node's mean step time and its CPU use (from /proc).

    .venv/bin/python bench/sim_rtf.py [--seconds 10]

Then factor 1.0 again with a learned sensor model (``bench/learned_sensor.py``: the fitted
model's shape, a 40 ms window at 1 kHz) named by ``sim_params_file``.

Targets: factor 1.0 sustained with < 50 % of one core; free-running >= 10x; with the
learned sensor model, factor 1.0 under 35 % of a core.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from learned_sensor import write_bench_model
from proc_stats import cpu_seconds

from simops_core.dds_isolation import claim_domain_id, isolated_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))


def run(factor: float, seconds: float, log_dir: Path, subscribe: bool,
        sim_params: Path | None = None) -> dict[str, float]:
    """Start the node at ``factor``, measure for ``seconds`` of wall time, return figures.

    ``sim_params``: the node's ``sim_params_file`` (None: nominal physics).

    With ``subscribe`` a subscriber in this process takes every /joint_states message
    (serialized, with a deep queue, so that it keeps up); sim time comes from /diagnostics.
    """
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile
    from rclpy.serialization import deserialize_message
    from ros_helpers import NodeProcess, RosProbe
    from sensor_msgs.msg import JointState

    from simops_core.topics import load_topics

    topics = load_topics()
    state = topics['joint_states']
    probe = RosProbe('sim_bench')
    arrivals: list[tuple[float, bytes]] = []   # (wall receive time, serialized message)
    if subscribe:
        probe.node.create_subscription(
            JointState, state.name, lambda raw: arrivals.append((time.monotonic(), raw)),
            QoSProfile(**{**state.qos.as_profile_kwargs(), 'depth': 2000}), raw=True)
    diagnostics = topics['diagnostics'].name
    probe.subscribe(diagnostics, DiagnosticArray)
    args = ['--ros-args', '-p', f'realtime_factor:={factor}', '-p', 'joint_state_rate:=1000.0']
    if sim_params is not None:
        args += ['-p', f'sim_params_file:={sim_params}']
    try:
        with NodeProcess.ros2_run('simops_sim', 'sim', *args,
                                  log_path=log_dir / f'sim_{factor:g}.log') as node:
            probe.wait_for_messages(diagnostics, count=2, timeout=30)
            first, diag0 = len(arrivals), len(probe.messages(diagnostics))
            cpu0, wall0 = cpu_seconds(node.proc.pid), time.monotonic()
            time.sleep(seconds)
            cpu1, wall1 = cpu_seconds(node.proc.pid), time.monotonic()
            window = arrivals[first:]
            diags = probe.messages(diagnostics)[diag0:]
            node.stop()
    finally:
        probe.close()
    text = ('paused', 'last_divergence', 'protective_stop')   # values that are not numbers
    values = [{kv.key: float(kv.value) for kv in d.status[0].values if kv.key not in text}
              for d in diags]
    figures = {
        'rtf': ((values[-1]['sim_time_s'] - values[0]['sim_time_s'])
                / (len(values) - 1) if len(values) > 1 else float('nan')),
        'rtf_worst': min(v['realtime_factor'] for v in values),
        'published_hz': sum(v['joint_state_rate_hz'] for v in values) / len(values),
        'step_us': sum(v['step_time_mean_us'] for v in values) / len(values),
        'cpu_pct': 100.0 * (cpu1 - cpu0) / (wall1 - wall0),
        'overruns': max(v['overruns'] for v in values),
        'lag_ms': max(v['lag_max_ms'] for v in values),
    }
    if window:
        stamps = []
        for wall, raw in window:
            msg = deserialize_message(raw, JointState)
            stamps.append((wall, msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec))
        (w0, s0), (w1, _) = stamps[0], stamps[-1]
        offsets = [(s - s0) - factor * (w - w0) for w, s in stamps]
        figures['received_hz'] = len(window) / (w1 - w0)
        figures['track_ms'] = 1e3 * (max(offsets) - min(offsets))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='wall time per run (s)')
    args = parser.parse_args()
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    print(f'load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    with tempfile.TemporaryDirectory() as tmp:
        paced = run(1.0, args.seconds, Path(tmp), subscribe=True)
        free = run(0.0, args.seconds, Path(tmp), subscribe=False)
        free_sub = run(0.0, args.seconds, Path(tmp), subscribe=True)
        model = run(1.0, args.seconds, Path(tmp), subscribe=True,
                    sim_params=write_bench_model(Path(tmp)))
    claim.release()
    print(f'realtime_factor 1.0: 1 kHz physics, 1 kHz /joint_states and /clock, one '
          f'subscriber, {args.seconds:g} s')
    print(f'  achieved real-time factor   {paced["rtf"]:.4f} '
          f'(worst 1 s window {paced["rtf_worst"]:.4f}, {paced["overruns"]:.0f} overruns)')
    print(f'  real-time tracking error    {paced["lag_ms"]:.2f} ms max lateness of a step '
          'against its wall-clock deadline (node side)')
    print(f'                              {paced["track_ms"]:.2f} ms peak-to-peak sim stamp vs '
          'receive time (subscriber side, includes DDS and probe latency)')
    print(f'  /joint_states               published {paced["published_hz"]:.1f} Hz, '
          f'received {paced["received_hz"]:.1f} Hz')
    print(f'  node step time (mean)       {paced["step_us"]:.1f} us stepping'
          ' (publishing follows, outside the physics lock)')
    print(f'  node CPU                    {paced["cpu_pct"]:.1f} % of one core')
    for label, figures in (('no subscriber', free), ('one subscriber', free_sub)):
        print(f'realtime_factor 0 (free-running), /joint_states + /clock every 1 ms of sim '
              f'time, {label}:')
        print(f'  real-time factor            {figures["rtf"]:.2f}x '
              f'({100 * figures["rtf"] / figures["cpu_pct"]:.1f}x per core-second of node CPU)')
        print(f'  node step time (mean)       {figures["step_us"]:.1f} us stepping'
              ' (publishing follows, outside the physics lock)')
        print(f'  node CPU                    {figures["cpu_pct"]:.1f} % of one core')
    print('realtime_factor 1.0 with a learned sensor model (40 ms window at 1 kHz), one '
          'subscriber:')
    print(f'  achieved real-time factor   {model["rtf"]:.4f} '
          f'(worst 1 s window {model["rtf_worst"]:.4f}, {model["overruns"]:.0f} overruns)')
    print(f'  node step time (mean)       {model["step_us"]:.1f} us stepping '
          f'(without: {paced["step_us"]:.1f} us)')
    print(f'  node CPU                    {model["cpu_pct"]:.1f} % of one core '
          f'(without: {paced["cpu_pct"]:.1f} %)')
    print(f'load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores '
          '(other processes disturb these figures)')
    met = paced['rtf'] > 0.98 and paced['cpu_pct'] < 50 and free['rtf'] >= 10
    print('targets (factor 1.0 under 50 % of a core, free-running >= 10x):',
          'met' if met else 'NOT met')
    met = model['rtf'] > 0.98 and model['cpu_pct'] < 35
    print('target with the learned sensor model (factor 1.0 under 35 % of a core):',
          'met' if met else 'NOT met')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
