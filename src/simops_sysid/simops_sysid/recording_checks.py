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
- :func:`tracking`: the arm follows its streamed commands far closer (shifted by the best
  lag, less a constant offset per joint) than the effort JTC's replay can at its best
  delay: a stiffer loop tracked them (Gaz et al.'s Panda: 0.36 mrad against the replay's 3.80).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from simops_core.robot_spec import ARM_DOF, RobotSpec
from simops_core.sim_params import END_EFFECTORS, SimParams
from simops_sim.model_index import index_model
from simops_sim.model_params import apply_sim_params
from simops_sysid.recording import Recording, States
from simops_sysid.replay import STREAM_PERIOD
from simops_sysid.torque_fit import TorqueDataError, rigid_body_model, torque_data

BETTER = 0.6          # the other end effector's torque error at most this fraction: warn
MIN_GAIN = 0.3        # N*m RMS that the other end effector must explain at least
FAST_STREAM = 4.0     # commands this many times faster than the control period: warn
STIFFER = 2.0         # the replay's best error this many times the arm's own tracking: warn
LAG_STEP = 0.001      # s between the lags own_tracking tries


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
            'which the arm tracks with its own joint-impedance loop, not the '
            'fr3_arm_controller law fitted here; if it was, fit with --controller '
            'joint_impedance')


def own_tracking(rec: Recording, max_lag: float) -> tuple[float, float] | None:
    """How closely the arm followed its streamed targets: (RMS rad, lag s), or None.

    The measured arm positions against the targets shifted by each lag in
    ``[0, max_lag]`` every :data:`LAG_STEP`, less each joint's mean difference (encoder
    offsets); the best lag's RMS over joints and samples. None for trajectory commands.
    """
    log = rec.commands
    if log.targets is None or len(log) < 3:
        return None
    inside = (rec.t >= log.t[0] + max_lag) & (rec.t <= log.t[-1])
    if inside.sum() < 10:
        return None
    t, q = rec.t[inside], rec.q[inside, :ARM_DOF]
    best = None
    for lag in np.arange(0.0, max_lag + 1e-9, LAG_STEP):
        target = np.column_stack([np.interp(t - lag, log.t, log.targets[:, j])
                                  for j in range(ARM_DOF)])
        error = q - target
        rms = float(np.sqrt(np.nanmean((error - np.nanmean(error, axis=0)) ** 2)))
        if best is None or rms < best[0]:
            best = (rms, float(lag))
    return best


def tracking(recordings: Sequence[Recording], replay_error: float, max_lag: float
             ) -> str | None:
    """One line when the arm tracked its streams far closer than ``replay_error`` (rad).

    ``replay_error``: the effort JTC replay's position RMS at its best delay (the delay
    profile's lowest point); ``max_lag`` s, the delay's bound.
    """
    found = [own for rec in recordings if (own := own_tracking(rec, max_lag)) is not None]
    if not found:
        return None
    own, lag = min(found)
    if replay_error < STIFFER * own:
        return None
    return (f'the arm followed its commands within {own * 1e3:.2f} mrad RMS ({lag * 1e3:.0f} ms '
            f'later, less constant offsets), where the fr3_arm_controller law replays them at '
            f'best at {replay_error * 1e3:.2f} mrad: a stiffer loop tracked them; if it was '
            'the arm\'s own behind a position interface, fit with --controller '
            'joint_impedance')
