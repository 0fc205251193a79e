"""Which controller tracked a recording's commands, and its nominal gains (no rclpy).

Two controllers move a Franka arm through ros2_control, and a fit must replay the one that
ran:

- ``joint_trajectory``: franka_ros2's ``fr3_arm_controller``, a JointTrajectoryController on
  the effort interface, ``tau = p (q_d - q) + d (qd_d - qd)`` with the robot spec's
  ``controller`` gains; trajectory commands, and SimOps' own ``/joint_commands`` stream
  (the simulator follows it by the stream rule with that law).
- ``joint_impedance``: the arm's own joint-impedance loop behind a joint position or velocity
  interface (libfranka's, franka_hardware's, a ros2_controllers forward command controller's
  ``~/commands``: forward_controllers_base.cpp:74 at ros2_controllers 4.x), with the spec's
  ``joint_impedance`` stiffness and damping, several times stiffer. Such a stream comes at
  the interface's 1 kHz, so :data:`INTERFACE_PERIOD` tells it from a policy's stream.

:func:`choose` picks one from the recordings; :func:`nominal_gains` writes its gains into
the fit's starting point. On Gaz et al.'s Panda recording (1 kHz through the position
interface) the effort law with its p and d gains replays the held-out part at 1.29 mrad,
its kp pushed to the 5x bound; the impedance law at 0.54 mrad (docs/sysid.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import SimParams
from simops_sysid.replay import CommandLog

CONTROLLERS = ('joint_trajectory', 'joint_impedance')
INTERFACE_PERIOD = 0.002   # s: streams at least this fast are a ros2_control interface's
# Parameter kinds fitted by default per controller: the impedance loop's stiffness is known up
# to how the arm was set (set_joint_stiffness), so its gains move together (gain_scale).
DEFAULT_KINDS = {
    'joint_trajectory': 'damping,frictionloss,friction_transition,kp,kv,encoder_offset,'
                        'torque_offset,delay',
    'joint_impedance': 'damping,frictionloss,friction_transition,gain_scale,encoder_offset,'
                       'torque_offset,delay',
}


def choose(logs: Sequence[CommandLog]) -> tuple[str, str]:
    """The controller (one of :data:`CONTROLLERS`) that tracked the commands, and why.

    Trajectory commands: ``joint_trajectory``. Streamed targets at a median period of at
    most :data:`INTERFACE_PERIOD`: ``joint_impedance``; slower streams: ``joint_trajectory``
    (SimOps' ``/joint_commands``). The busiest of the recordings' ``logs`` decides.
    """
    busiest = max(logs, key=len)
    if busiest.targets is None:
        return 'joint_trajectory', f'{busiest.source} holds JointTrajectory commands'
    period = float(np.median(np.diff(busiest.t))) if len(busiest) > 2 else np.inf
    rate = f'{busiest.source} streams targets at {1.0 / period:.0f} Hz'
    if period <= INTERFACE_PERIOD:
        return 'joint_impedance', f'{rate}: a position interface, the arm\'s impedance loop'
    return 'joint_trajectory', f'{rate}: followed by the stream rule and the effort law'


def nominal_gains(controller: str, base: SimParams, robot: RobotSpec) -> SimParams:
    """``base`` with the arm joints' kp and kv those of ``controller``."""
    if controller == 'joint_trajectory':
        p, d = robot.gain_p, robot.gain_d
    else:
        p, d = robot.impedance_p, robot.impedance_d
    joints = dict(base.joints)
    for name, kp, kv in zip(robot.arm_joints, p, d, strict=True):
        joints[name] = replace(joints[name], kp=float(kp), kv=float(kv))
    return replace(base, joints=joints)
