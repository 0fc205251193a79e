"""Run inside a private network namespace (``unshare --net``) by tests/core/test_executor.py.

Starts a Ray head with two worker CPUs (``ray start``), runs tasks on it through
RayExecutor at its address, kills a worker mid-run, stops the cluster, and prints one JSON
line with what it saw.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from executor_tasks import die_once, square

from simops_core.executor import RayExecutor, isolate_for_local_ray


def main() -> int:
    isolate_for_local_ray(sys.argv)   # already private: brings loopback up
    os.environ.update(RAY_USAGE_STATS_ENABLED='0', RAY_AUTH_MODE='disabled')
    ray = str(Path(sys.executable).with_name('ray'))
    temp = tempfile.mkdtemp(prefix='ray')
    port = '6390'
    started = subprocess.run([ray, 'start', '--head', '--port', port, '--num-cpus', '2',
                              '--include-dashboard', 'false', '--disable-usage-stats',
                              '--temp-dir', temp], capture_output=True, text=True, timeout=180)
    out: dict[str, object] = {'interfaces': [n for _, n in socket.if_nameindex()],
                              'started': started.returncode}
    try:
        executor = RayExecutor(f'127.0.0.1:{port}')
        out['squares'] = executor.map(square, [(i, 0.01) for i in range(10)])
        marker = Path(temp) / 'killed'
        out['after_kill'] = [v for v, _ in RayExecutor(f'127.0.0.1:{port}').map(
            die_once, [(i, str(marker)) for i in range(8)])]
        out['killed'] = marker.exists()
    finally:
        subprocess.run([ray, 'stop', '--force'], capture_output=True, timeout=120)
    print(json.dumps(out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
