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
  ``joint_impedance`` stiffness and damping, several times stiffer.

:func:`choose` picks one from the recordings; :func:`nominal_gains` writes its gains into
the fit's starting point. The impedance loop compensates the arm's dynamics along the
targets (:mod:`simops_sim.feedforward`). On Gaz et al.'s Panda recording (1 kHz through the
position interface) the effort law with its p and d gains replays the held-out part at
0.92 mrad, its kp pushed to the 5x bound; the impedance loop at 0.53 mrad with no
parameter at a bound (docs/sysid.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import CONTROLLER_LAWS, SimParams
from simops_sysid.replay import CommandLog

CONTROLLERS = CONTROLLER_LAWS
# Parameter kinds fitted by default per controller. The impedance loop's stiffness is known up
# to how the arm was set (set_joint_stiffness), so its gains move together (gain_scale); the
# arm compensates its joint friction (Franka's FCI documentation, overview.rst: "gravity &
# friction compensated"), and what is left shows in the efforts as a Coulomb level; its
# viscous part and transition speed the positions do not resolve (on Gaz et al.'s recording
# every transition's interval was wider than half its value, and the viscous terms went to
# their bound of 0).
DEFAULT_KINDS = {
    'joint_trajectory': 'damping,frictionloss,friction_transition,kp,kv,encoder_offset,'
                        'torque_offset,delay',
    'joint_impedance': 'frictionloss,gain_scale,encoder_offset,torque_offset,delay',
}


def choose(logs: Sequence[CommandLog], stream_topic: str) -> tuple[str, str]:
    """The controller (one of :data:`CONTROLLERS`) that tracked the commands, and why.

    The busiest of the recordings' ``logs`` decides. A forward command controller's stream
    (any Float64MultiArray topic but SimOps' own ``stream_topic``): ``joint_impedance``.
    Trajectory commands and ``stream_topic`` (the simulator follows it by the stream rule with
    the effort law, at any rate): ``joint_trajectory``.
    """
    busiest = max(logs, key=len)
    if busiest.targets is None:
        return 'joint_trajectory', f'{busiest.source} holds JointTrajectory commands'
    period = float(np.median(np.diff(busiest.t))) if len(busiest) > 2 else np.inf
    rate = f'{busiest.source} streams positions at {1.0 / period:.0f} Hz'
    if busiest.source != stream_topic:
        return 'joint_impedance', f'{rate} to a position interface: the arm\'s impedance loop'
    return 'joint_trajectory', f'{rate}, followed by the stream rule and the effort law'


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
