"""A stand-in for a SimOps node in the runner's process tests (no rclpy: fast to start).

Reads its node name from ``-r __node:=NAME``, prints ``NAME up pid=PID``, its ROS arguments
and its DDS environment, then behaves as ``RUNNER_FAKE_<NAME>`` says:

- unset: run until SIGINT or SIGTERM, print ``NAME stopped by SIG...``, exit 0;
- ``exit:CODE:DELAY``: exit with CODE after DELAY seconds;
- ``ignore_sigint``: ignore SIGINT, exit 0 on SIGTERM;
- ``stubborn``: ignore SIGINT and SIGTERM (only SIGKILL stops it).

With ``RUNNER_FAKE_CHILD_DIR`` set, it first starts a ``sleep`` child in its process group
and writes the child's pid to ``<dir>/<NAME>.child``, to check that no process is orphaned.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

args = sys.argv[1:]
name = next(a.split(':=', 1)[1] for a in args if a.startswith('__node:='))
behaviour = os.environ.get(f'RUNNER_FAKE_{name.upper()}', '')
child_dir = os.environ.get('RUNNER_FAKE_CHILD_DIR')
stopped = []


def stop(signum, frame):
    stopped.append(signum)


if child_dir:
    child = subprocess.Popen(['sleep', '300'])
    Path(child_dir, f'{name}.child').write_text(str(child.pid))

signal.signal(signal.SIGINT, signal.SIG_IGN if behaviour in ('ignore_sigint', 'stubborn')
              else stop)
signal.signal(signal.SIGTERM, signal.SIG_IGN if behaviour == 'stubborn' else stop)
print(f'{name} up pid={os.getpid()}')
print(f'{name} args {" ".join(args)}')
print(f'{name} env ROS_DOMAIN_ID={os.environ.get("ROS_DOMAIN_ID")} '
      f'ROS_AUTOMATIC_DISCOVERY_RANGE={os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")}')
sys.stdout.flush()

if behaviour.startswith('exit:'):
    _, code, delay = behaviour.split(':')
    time.sleep(float(delay))
    print(f'{name} failing with {code}', file=sys.stderr)
    sys.exit(int(code))
while not stopped:
    time.sleep(0.02)
print(f'{name} stopped by {signal.Signals(stopped[0]).name}')
sys.exit(0)
