"""Benchmark what following ``/clock`` costs an rclpy node, by the rate of the clock.

A bare node with ``use_sim_time:=true`` spins a SingleThreadedExecutor while another process
publishes ``rosgraph_msgs/Clock`` at each rate; the node's process CPU time over the run,
as a share of one core. Two ways of following the clock: rclpy's TimeSource (its
subscription in the node's default callback group, so the executor wakes per message), and
SimOps' :class:`~simops_ros.sim_clock.PolledSimClock` (a thread takes the newest message
every millisecond), which every SimOps node runs. The simulator publishes ``/clock`` with
every joint state (1 kHz).

    .venv/bin/python bench/clock_cost.py [--seconds 10] [--rates 1000 250 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from simops_core.dds_isolation import claim_domain_id, isolated_env
from simops_ros.sim_clock import PolledSimClock


def publish(rate: float, seconds: float) -> None:
    """Publish /clock at ``rate`` Hz of wall time for ``seconds``, sim time = wall time."""
    import rclpy
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock

    with rclpy.init():
        node = Node('clock_cost_publisher')
        publisher = node.create_publisher(Clock, '/clock', 10)
        message, started = Clock(), time.monotonic()
        ticks = 0
        while time.monotonic() - started < seconds:
            ticks += 1
            sec, nanosec = divmod(round(ticks * 1e9 / rate), 1_000_000_000)
            message.clock.sec, message.clock.nanosec = sec, nanosec
            publisher.publish(message)
            delay = started + ticks / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)


def follow(seconds: float, polled: bool) -> None:
    """Spin a use_sim_time node for ``seconds``; print its CPU (% of a core) and sim time.

    ``polled``: the node follows /clock with :class:`PolledSimClock`, else rclpy's own way.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    with rclpy.init():
        node = Node('clock_cost_follower',
                    parameter_overrides=[Parameter('use_sim_time', value=True)])
        clock = PolledSimClock(node) if polled else None
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        started, cpu = time.monotonic(), time.process_time()
        while time.monotonic() - started < seconds:
            executor.spin_once(timeout_sec=0.1)
        share = 100.0 * (time.process_time() - cpu) / (time.monotonic() - started)
        if clock is not None:
            clock.stop()
        print(f'{share:.1f} {1e-9 * node.get_clock().now().nanoseconds:.2f}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='wall time per rate')
    parser.add_argument('--rates', type=float, nargs='+', default=[1000.0, 250.0, 100.0],
                        help='/clock rates (Hz)')
    parser.add_argument('--role', choices=('publish', 'follow', 'follow-polled'),
                        help=argparse.SUPPRESS)
    parser.add_argument('--rate', type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == 'publish':
        publish(args.rate, args.seconds + 2.0)
        return 0
    if args.role in ('follow', 'follow-polled'):
        follow(args.seconds, polled=args.role == 'follow-polled')
        return 0
    claim = claim_domain_id()
    env = isolated_env(claim.domain_id)
    print(f'an rclpy node with use_sim_time following /clock, {args.seconds:g} s per rate:')
    for rate in args.rates:
        for role, how in (('follow', "rclpy's TimeSource"), ('follow-polled', 'PolledSimClock')):
            publisher = subprocess.Popen([sys.executable, __file__, '--role', 'publish',
                                          '--rate', str(rate), '--seconds', str(args.seconds)],
                                         env=env)
            time.sleep(1.0)
            result = subprocess.run([sys.executable, __file__, '--role', role,
                                     '--seconds', str(args.seconds)], env=env,
                                    capture_output=True, text=True, check=True)
            publisher.wait()
            share, sim = result.stdout.split()
            print(f'  /clock at {rate:6.0f} Hz, {how:18}: {share:>5} % of one core (sim time '
                  f'at the end {sim} s)')
    print(f'load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    return 0


if __name__ == '__main__':
    sys.exit(main())
