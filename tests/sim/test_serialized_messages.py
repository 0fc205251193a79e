"""The simulator's pre-serialized messages decode, with rclpy, to exactly what was set."""

from __future__ import annotations

import numpy as np
from franka_msgs.msg import Errors, FrankaRobotState
from rclpy.serialization import deserialize_message

from simops_core.robot_spec import load_robot_spec
from simops_sim.serialized_messages import RobotStateEncoder

SPEC = load_robot_spec('fr3')


def test_robot_state_decodes_to_the_fields_set_and_zeros_elsewhere() -> None:
    wire = RobotStateEncoder(SPEC.arm_joints, SPEC.base_frame)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(6, 7))
    for row, data in zip(wire.rows, values, strict=True):
        row[:] = data
    blob = wire.encode(12_345_678_901, 12.3456789, FrankaRobotState.ROBOT_MODE_REFLEX,
                       'joint_reflex', 'joint_velocity_violation')
    msg = deserialize_message(blob, FrankaRobotState)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 345_678_901)
    assert msg.header.frame_id == SPEC.base_frame and msg.time == 12.3456789
    assert msg.robot_mode == FrankaRobotState.ROBOT_MODE_REFLEX
    measured, desired = msg.measured_joint_state, msg.desired_joint_state
    assert list(measured.name) == list(desired.name) == list(SPEC.arm_joints)
    np.testing.assert_array_equal([measured.position, measured.velocity, measured.effort,
                                   desired.position, desired.velocity,
                                   msg.tau_ext_hat_filtered.effort], values)
    assert len(desired.effort) == 0
    flags = list(Errors.get_fields_and_field_types())
    assert [f for f in flags if getattr(msg.current_errors, f)] == ['joint_reflex']
    assert [f for f in flags if getattr(msg.last_motion_errors, f)] == [
        'joint_velocity_violation']
    assert msg.o_t_ee.pose.position.x == 0.0 and msg.control_command_success_rate == 0.0

    # A later message overwrites every flag: none, then another one.
    none = deserialize_message(wire.encode(0, 0.0, FrankaRobotState.ROBOT_MODE_MOVE, None,
                                           None), FrankaRobotState)
    assert none.robot_mode == FrankaRobotState.ROBOT_MODE_MOVE
    assert not any(getattr(none.current_errors, f) or getattr(none.last_motion_errors, f)
                   for f in flags)
    last = deserialize_message(wire.encode(0, 0.0, 2, None, 'instability_detected'),
                               FrankaRobotState)
    assert [f for f in flags if getattr(last.last_motion_errors, f)] == [
        'instability_detected']
