"""Checks of the model against the recording before a fit: what the data contradict.

A fit assumes what the robot carries and how it was commanded. Where the recording says
otherwise, each check returns one line that names what it saw and the flag to try; a fit
on a wrong assumption still runs, but its numbers absorb the difference (no rclpy).

- :func:`flange_load`: the measured efforts (Franka's link-side ``tau_J``) against the
  rigid-body torques of the measured motion, with and without the Franka Hand. The hand's
  0.76 kg hangs 0.1-0.6 m from joints 2, 4 and 6, newton-metres of gravity that no friction
  or offset explains. Only a recording with efforts is checked.
- :func:`command_rate`: commands streamed far faster than the policies' 20 Hz (Gaz et al.'s
  Panda recording streams at 1 kHz) come through a position or velocity interface, which
  the arm tracks with its own joint-impedance loop, stiffer than fr3_arm_controller's
  gains, where SimOps models franka_ros2's effort JointTrajectoryController.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import END_EFFECTORS, SimParams
from simops_sim.model_index import index_model
from simops_sim.model_params import apply_sim_params
from simops_sysid.recording import Recording, States
from simops_sysid.replay import STREAM_PERIOD
from simops_sysid.torque_fit import TorqueDataError, rigid_body_model, torque_data

BETTER = 0.6          # the other end effector's torque error at most this fraction: warn
MIN_GAIN = 0.3        # N*m RMS that the other end effector must explain at least
FAST_STREAM = 4.0     # commands this many times faster than the control period: warn


def torque_error(model_path: Path, robot: RobotSpec, recordings: Sequence[States],
                 end_effector: str) -> float | None:
    """RMS (N*m) over the arm joints of the efforts less the rigid-body torques.

    The rigid body carries ``end_effector`` (one of :data:`END_EFFECTORS`). Friction and
    the sensors' offsets stay in it (tenths of a N*m on a Franka arm), against newton-metres
    of the hand's weight. None when no recording has efforts.
    """
    model = mujoco.MjModel.from_xml_path(str(model_path))
    index = index_model(model, robot)
    apply_sim_params(model, SimParams(end_effector=end_effector), index)
    rigid = rigid_body_model(model, index)
    residuals = []
    for states in recordings:
        try:
            data = torque_data(rigid, index, states.t, states.q, states.qd, states.effort)
        except TorqueDataError:
            continue
        residuals.append(data.effort - data.rigid_body)
    if not residuals:
        return None
    return float(np.sqrt(np.mean(np.square(np.concatenate(residuals)))))


def flange_load(model_path: Path, robot: RobotSpec, recordings: Sequence[States],
                end_effector: str) -> str | None:
    """One line when the efforts fit the other end effector far better, else None."""
    other = next(e for e in END_EFFECTORS if e != end_effector)
    assumed = torque_error(model_path, robot, recordings, end_effector)
    if assumed is None:
        return None
    alternative = torque_error(model_path, robot, recordings, other)
    if alternative is None or not (alternative <= BETTER * assumed
                                   and assumed - alternative >= MIN_GAIN):
        return None
    carried = {'none': 'an arm without its hand', 'franka_hand': 'an arm with the Franka Hand'}
    return (f'the efforts fit {carried[other]} far better than the assumed {end_effector} '
            f'(rigid-body torque error {alternative:.2f} against {assumed:.2f} N*m RMS); '
            f'fit with --end-effector {other}')


def command_rate(recordings: Sequence[Recording], control_period: float = STREAM_PERIOD
                 ) -> str | None:
    """One line when commands stream much faster than ``control_period`` s, else None.

    ``control_period``: the simulator's (a streamed target's span outside a paced stream).
    """
    rates = [1.0 / float(np.median(np.diff(r.commands.t))) for r in recordings
             if r.commands.t.size >= 3]
    if not rates or max(rates) * control_period < FAST_STREAM:
        return None
    return (f'commands stream at {max(rates):.0f} Hz, {max(rates) * control_period:.0f}x the '
            f'{1 / control_period:g} Hz control period: a position or velocity interface, '
            'which the arm tracks with its own joint-impedance loop, stiffer than the '
            'fr3_arm_controller law fitted here; expect high gains and a delay that absorbs '
            'its filtering')
