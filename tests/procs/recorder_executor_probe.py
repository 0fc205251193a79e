"""Measure one way of receiving raw /joint_states: executor x callback signature.

Subscribes raw (CDR) to /joint_states with ``--executor`` (``single``: rclpy's
SingleThreadedExecutor, ``events``: rclpy.experimental.EventsExecutor) and a one-argument
callback (``--callback data``) or a two-argument one that also gets the MessageInfo with
the DDS publication sequence number (``--callback info``), or with no callback at all,
taking batches from the subscription every 10 ms (``--callback drain``, what the recorder
does). Starts tests/procs/trajectory_publisher.py at ``--rate`` Hz for 6 s, spins with
spin_once (EventsExecutor.spin() does not run timers in rclpy 9.1.2), and prints one line:
``cpu <percent of one core> received <n> published <n> sequence <ok|none>`` or
``error <exception>``.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

PUBLISHER = Path(__file__).with_name('trajectory_publisher.py')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--executor', choices=('single', 'events'), required=True)
    parser.add_argument('--callback', choices=('data', 'info', 'drain'), required=True)
    parser.add_argument('--rate', type=float, default=1000.0)
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node('executor_probe')
    received: list[int | None] = []

    def with_info(data: bytes, info: dict) -> None:
        received.append(info['publication_sequence_number'])

    def data_only(data: bytes) -> None:
        received.append(None)

    qos = QoSProfile(depth=5000)
    if args.callback == 'drain':
        reader = rclpy.create_node('executor_probe_io')
        sub = reader.create_subscription(JointState, '/joint_states', with_info, qos, raw=True)

        def drain() -> None:
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, True)) is not None:
                    with_info(*taken)

        node.create_timer(0.01, drain)
    else:
        callback = with_info if args.callback == 'info' else data_only
        node.create_subscription(JointState, '/joint_states', callback, qos, raw=True)
    executor = EventsExecutor() if args.executor == 'events' else SingleThreadedExecutor()
    executor.add_node(node)
    publisher = subprocess.Popen([sys.executable, str(PUBLISHER), '--duration', '6',
                                  '--joint-rate', str(args.rate), '--joint-states-only'],
                                 stdout=subprocess.PIPE, text=True)
    try:
        while not received and publisher.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        cpu_start, wall_start = time.process_time(), time.monotonic()
        while publisher.poll() is None and time.monotonic() - wall_start < 5.0:
            executor.spin_once(timeout_sec=0.1)
        cpu = 100 * (time.process_time() - cpu_start) / (time.monotonic() - wall_start)
        while publisher.poll() is None:
            executor.spin_once(timeout_sec=0.1)
        for _ in range(5):
            executor.spin_once(timeout_sec=0.05)
    except Exception as exc:
        publisher.kill()
        print(f'error {type(exc).__name__}: {exc}', flush=True)
        return 0
    published = int(publisher.stdout.read().split()[-1])
    sequence = 'none' if received[0] is None else 'ok'
    print(f'cpu {cpu:.1f} received {len(received)} published {published} '
          f'sequence {sequence}', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
