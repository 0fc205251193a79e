"""Recorder benchmark: messages lost and recorder CPU at 1, 2 and 5 kHz /joint_states.

Starts the installed recorder (continuous mode, MCAP) and the deterministic publisher
(tests/procs/trajectory_publisher.py, joint states only) as real processes in an isolated
DDS domain, then prints per rate: published, recorded, lost (published - recorded, and
the recorder's own sequence-gap count, messages before the first and after the last
recorded one) and the recorder's CPU in % of one core while the
publisher runs. Targets: 0 lost up to 5 kHz, < 20% of one core at 1 kHz.

    .venv/bin/python bench/recorder.py [--duration 10] [--rates 1000 2000 5000]
    .venv/bin/python bench/recorder.py --executors   # how raw 1 kHz input costs per executor

``--executors`` runs tests/procs/recorder_executor_probe.py for every executor and callback
style at 1 kHz and prints CPU, messages received and whether sequence numbers arrived.

CPU figures depend on the machine's other load; the load average is printed alongside.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from proc_stats import cpu_seconds

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))

from simops_core.bag_reader import read_bag  # noqa: E402
from simops_core.dds_isolation import claim_domain_id, isolated_env  # noqa: E402


def run(rate: float, duration: float, env: dict[str, str], workdir: Path,
        depth: int) -> dict[str, float]:
    from ros_helpers import NodeProcess, wait_until

    root = workdir / f'rate_{int(rate)}'
    with NodeProcess.ros2_run('simops_recorder', 'record', '--ros-args', '-p', f'root:={root}',
                              '-p', 'mode:=continuous', log_path=workdir / f'rec_{rate}.log',
                              env=env) as rec:
        assert wait_until(lambda: 'recording' in rec.output, 30), rec.output
        with NodeProcess.python(REPO / 'tests/procs/trajectory_publisher.py', '--duration',
                                str(duration), '--joint-rate', str(rate),
                                '--joint-states-only', '--depth', str(depth),
                                log_path=workdir / f'pub_{rate}.log',
                                env=env) as pub:
            assert wait_until(lambda: 'publishing' in pub.output, 30), pub.output
            before, start = cpu_seconds(rec.proc.pid), time.monotonic()
            time.sleep(duration)
            after, wall = cpu_seconds(rec.proc.pid), time.monotonic() - start
            pub.wait(60)
            published = int(re.search(r'published /joint_states (\d+)', pub.output)[1])
        rec.stop()
    bag_dir = next(p for p in root.iterdir() if p.is_dir())
    bag = read_bag(bag_dir, ['/joint_states'])
    recorded = bag.info()['/joint_states'].count
    ks = [int(msg.position[0]) for msg in bag.decode('/joint_states')]
    custom = yaml.safe_load((bag_dir / 'metadata.yaml').read_text())[
        'rosbag2_bagfile_information']['custom_data']
    gaps = sum(json.loads(custom['simops.sequence_gaps']).get('/joint_states', {}).values())
    cpu = (after - before) / wall
    return {'published': published, 'recorded': recorded, 'lost': published - recorded,
            'gaps': gaps, 'first': ks[0], 'after': published - 1 - ks[-1], 'cpu': 100 * cpu}


def executors(env: dict[str, str]) -> None:
    """Print the executor x callback comparison (see the module docstring)."""
    probe = REPO / 'tests' / 'procs' / 'recorder_executor_probe.py'
    print(f'{"executor":>9} {"callback":>9}  result at 1 kHz')
    for executor in ('single', 'events'):
        for callback in ('data', 'info', 'drain'):
            result = subprocess.run([sys.executable, str(probe), '--executor', executor,
                                     '--callback', callback], env=env, capture_output=True,
                                    text=True, timeout=60, check=False)
            lines = result.stdout.strip().splitlines() or [f'exit {result.returncode}']
            print(f'{executor:>9} {callback:>9}  {lines[-1]}  (load {os.getloadavg()[0]:.2f})',
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--duration', type=float, default=10.0, help='s per rate')
    parser.add_argument('--rates', type=float, nargs='+', default=[1000.0, 2000.0, 5000.0])
    parser.add_argument('--publisher-depth', type=int, default=0,
                        help='joint state publisher history depth (0: config/topics.yaml, 10)')
    parser.add_argument('--executors', action='store_true',
                        help='compare executors and callback styles instead')
    args = parser.parse_args()
    claim = claim_domain_id()
    env = isolated_env(claim.domain_id)
    try:
        if args.executors:
            executors(env)
            return
        with tempfile.TemporaryDirectory(prefix='simops-bench-recorder-') as tmp:
            print(f'{"rate Hz":>8} {"published":>10} {"recorded":>9} {"lost":>5} '
                  f'{"seq gaps":>8} {"before 1st":>10} {"after last":>10} '
                  f'{"recorder CPU %":>15} {"load avg":>9}')
            for rate in args.rates:
                result = run(rate, args.duration, env, Path(tmp), args.publisher_depth)
                print(f'{rate:8.0f} {result["published"]:10.0f} {result["recorded"]:9.0f} '
                      f'{result["lost"]:5.0f} {result["gaps"]:8.0f} {result["first"]:10.0f} '
                      f'{result["after"]:10.0f} {result["cpu"]:15.1f} '
                      f'{os.getloadavg()[0]:9.2f}', flush=True)
    finally:
        claim.release()


if __name__ == '__main__':
    main()
