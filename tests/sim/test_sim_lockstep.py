"""Lockstep mode: deterministic control periods, and fitted physics the node and wrapper share."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
from ros_helpers import RosProbe
from sim_helpers import SCENE_XML, drive_lockstep, start_sim, subscribe_states

from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import JointParams, SimParams, save_sim_params
from simops_sim.physics import Physics
from simops_sim.trajectory_plan import TrajectoryPlan, point_goal

SPEC = load_robot_spec('fr3')
PERIOD = 0.05
LOCKSTEP = ('sync_mode:=lockstep', f'control_period:={PERIOD}',
            f'joint_state_rate:={1 / PERIOD}', 'lockstep_timeout:=60.0')
# A step on every joint (2 rad/s over the first period, within every velocity limit), then a
# move back part of the way: 12 periods = 0.6 s of sim time.
COMMANDS = [np.clip(SPEC.home + 0.1, SPEC.position_lower, SPEC.position_upper)] * 6 + [
    SPEC.home + 0.05] * 6


def offline(params: SimParams) -> np.ndarray:
    """Joint positions (periods, 9) that the wrapper predicts for COMMANDS."""
    physics = Physics(mujoco.MjModel.from_xml_path(str(SCENE_XML)), SPEC, params=params,
                      reflexes=True)
    physics.reset_keyframe('home')
    out = []
    for command in COMMANDS:   # each reached over one period
        assert physics.follow(TrajectoryPlan(point_goal(command, PERIOD), physics.time,
                                             physics.arm_target)) is None
        physics.step(round(PERIOD / physics.timestep))
        out.append(physics.state().position)
    assert physics.stop is None
    return np.array(out)


def as_arrays(states: list) -> np.ndarray:
    return np.array([[*m.position, *m.velocity, *m.effort] for m in states])


def test_same_seed_gives_bit_identical_joint_states(ros_probe: RosProbe, tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    runs = []
    for run in range(2):
        with start_sim(tmp_path, *LOCKSTEP, 'randomize:=true', 'seed:=7',
                       name=f'sim{run}') as node:
            runs.append(as_arrays(drive_lockstep(ros_probe, node, COMMANDS, PERIOD)))
            assert node.stop() == 0, node.output
    assert np.array_equal(runs[0], runs[1])                       # bit-identical
    assert np.abs(runs[0][5, :7] - runs[0][0, :7]).max() > 1e-3    # the arm moved
    assert not np.array_equal(runs[0][:, :9], offline(SimParams()))  # physics was randomised


def test_triple_damping_matches_the_wrapper_prediction(ros_probe: RosProbe,
                                                      tmp_path: Path) -> None:
    subscribe_states(ros_probe)
    triple = SimParams(joints={j: JointParams(damping=3.0) for j in SPEC.arm_joints},
                       provenance={'note': '3x nominal damping'})
    params_file = tmp_path / 'triple_damping.yaml'
    save_sim_params(triple, params_file)
    measured = {}
    for label, extra in (('nominal', ()), ('triple', (f'sim_params_file:={params_file}',))):
        with start_sim(tmp_path, *LOCKSTEP, *extra, name=label) as node:
            states = drive_lockstep(ros_probe, node, COMMANDS, PERIOD)
            measured[label] = np.array([m.position for m in states])
            assert node.stop() == 0, node.output
    change = np.abs(measured['triple'] - measured['nominal']).max()
    assert change > 1e-3, change                                   # measurable
    assert np.allclose(measured['nominal'], offline(SimParams()), atol=1e-12)
    assert np.allclose(measured['triple'], offline(triple), atol=1e-12)
    predicted_change = offline(triple) - offline(SimParams())
    assert np.allclose(measured['triple'] - measured['nominal'], predicted_change, atol=1e-12)
