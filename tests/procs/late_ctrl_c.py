"""A one-shot node (like ``arm_setup``) that gets its Ctrl-C while it exits, after rclpy's
shutdown: run_node returns the node's exit code (3) and the process exits with it."""

from __future__ import annotations

import os
import signal
import sys
import time

import rclpy

from simops_ros.scaffold import run_node


def late_ctrl_c(_node: object) -> int:
    os.kill(os.getpid(), signal.SIGINT)   # as a launcher's SIGINT lands after the work
    time.sleep(0.2)                       # Python runs its handler here, if it has one
    return 3


if __name__ == '__main__':
    sys.exit(run_node('late_ctrl_c', 'a node that ends while a Ctrl-C comes',
                      lambda: rclpy.create_node('late_ctrl_c'), args=['late_ctrl_c'],
                      spin=lambda node: None, exit_code=late_ctrl_c))
