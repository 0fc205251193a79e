"""The controller a fit replays is chosen by the recording's commands; its gains move together."""

from __future__ import annotations

import numpy as np
from sysid_helpers import SPEC

from simops_core.sim_params import JointParams, SimParams
from simops_sim.trajectory_plan import point_goal
from simops_sysid import controller_models, fit_parameters
from simops_sysid.replay import CommandLog

STREAM = '/joint_commands'   # SimOps' own stream (config/topics.yaml)


def stream(rate: float, topic: str) -> CommandLog:
    t = np.arange(200) / rate
    return CommandLog(topic, t, targets=np.repeat(SPEC.home[None, :7], t.size, axis=0))


def test_a_forward_controller_s_stream_selects_the_arm_s_impedance_loop() -> None:
    chosen, why = controller_models.choose(
        [stream(1000.0, '/joint_position_controller/commands')], STREAM)
    assert chosen == 'joint_impedance' and '1000 Hz' in why


def test_simops_stream_at_any_rate_and_trajectories_select_the_effort_jtc() -> None:
    for rate in (20.0, 100.0, 1000.0):
        assert controller_models.choose([stream(rate, STREAM)], STREAM)[0] == 'joint_trajectory'
    goals = CommandLog('/fr3_arm_controller/joint_trajectory', np.arange(3) * 0.05,
                       goals=tuple(point_goal(SPEC.home[:7], 0.05) for _ in range(3)))
    assert controller_models.choose([goals], STREAM)[0] == 'joint_trajectory'


def test_the_impedance_gains_are_the_spec_s_and_gain_scale_moves_them_together() -> None:
    base = SimParams(joints={name: JointParams(kp=1.0, kv=1.0) for name in SPEC.arm_joints})
    base = controller_models.nominal_gains('joint_impedance', base, SPEC)
    assert [base.joints[j].kp for j in SPEC.arm_joints] == list(SPEC.impedance_p)
    params = fit_parameters.build_parameters(base, ['gain_scale'], list(SPEC.arm_joints), [])
    params[fit_parameters.GAIN_SCALE].update_from_vector(np.array([1.5]))
    scaled = fit_parameters.to_sim_params(params, base)
    np.testing.assert_allclose([scaled.joints[j].kp for j in SPEC.arm_joints],
                               1.5 * SPEC.impedance_p)
    np.testing.assert_allclose([scaled.joints[j].kv for j in SPEC.arm_joints],
                               1.5 * SPEC.impedance_d)
    fresh = fit_parameters.build_parameters(base, ['gain_scale'], list(SPEC.arm_joints), [])
    assert fit_parameters.set_from_sim_params(fresh, scaled, base)[0] == 1.5
