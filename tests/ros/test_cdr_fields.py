"""Fields read from CDR bytes agree with rclpy's full deserialisation, for any message.

Random franka_msgs/FrankaRobotState messages (strings and sequences of any length before the
wanted fields, so every alignment case comes up) are serialised by rclpy; the reader's
robot mode and errors must be the message's own.
"""

from __future__ import annotations

import pytest
from franka_msgs.msg import Errors, FrankaRobotState
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.serialization import serialize_message
from sensor_msgs.msg import PointCloud2, PointField, Range

from simops_core.franka_ros2 import ArmModeWatch
from simops_ros.arm_stop import read_robot_mode
from simops_ros.cdr_fields import CdrError, FieldReader

ERROR_NAMES = tuple(Errors.get_fields_and_field_types())
JOINT_STATES = ('measured_joint_state', 'desired_joint_state', 'measured_joint_motor_state',
                'tau_ext_hat_filtered')
STAMPED = ('k_f_ext_hat_k', 'o_f_ext_hat_k', 'inertia_ee', 'inertia_load', 'inertia_total',
           'o_t_ee', 'o_t_ee_d', 'o_t_ee_c', 'f_t_ee', 'ee_t_k', 'o_dp_ee_d', 'o_dp_ee_c',
           'o_ddp_ee_c')
READ = FieldReader(FrankaRobotState, ('robot_mode', 'current_errors', 'last_motion_errors'))
floats = st.lists(st.floats(allow_nan=False, width=64), max_size=9)


@st.composite
def robot_states(draw: st.DrawFn) -> FrankaRobotState:
    state = FrankaRobotState(robot_mode=draw(st.integers(0, 255)),
                             time=draw(st.floats(allow_nan=False)))
    state.header.frame_id = draw(st.text(max_size=12))
    for name in JOINT_STATES:
        joints = getattr(state, name)
        joints.header.frame_id = draw(st.text(max_size=5))
        joints.name = draw(st.lists(st.text(max_size=6), max_size=9))
        joints.position, joints.velocity, joints.effort = draw(floats), draw(floats), draw(floats)
    for name in STAMPED:
        getattr(state, name).header.frame_id = draw(st.text(max_size=7))
    for errors in (state.current_errors, state.last_motion_errors):
        for flag in ERROR_NAMES:
            setattr(errors, flag, draw(st.booleans()))
    return state


@settings(max_examples=300, deadline=None)
@given(robot_states())
def test_the_robot_mode_and_errors_are_the_messages_own(state: FrankaRobotState) -> None:
    read = READ(serialize_message(state))
    assert read['robot_mode'] == state.robot_mode
    for name in ('current_errors', 'last_motion_errors'):
        assert read[name] == {flag: getattr(getattr(state, name), flag) for flag in ERROR_NAMES}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=9), st.lists(st.tuples(st.text(max_size=6), st.integers(0, 2**32 - 1),
                                               st.integers(0, 255)), max_size=4),
       st.booleans(), st.integers(0, 2**32 - 1), st.binary(max_size=11), st.booleans())
def test_fields_after_a_sequence_of_messages_with_strings(
        frame: str, points: list[tuple[str, int, int]], big: bool, step: int, data: bytes,
        dense: bool) -> None:
    """sensor_msgs/PointCloud2: wanted fields after a sequence of PointFields (each with a
    name), and after a byte sequence of any length."""
    cloud = PointCloud2(is_bigendian=big, point_step=step, data=list(data), is_dense=dense)
    cloud.header.frame_id = frame
    cloud.fields = [PointField(name=name, offset=offset, datatype=kind)
                    for name, offset, kind in points]
    read = FieldReader(PointCloud2, ('is_bigendian', 'point_step', 'is_dense'))
    assert read(serialize_message(cloud)) == {'is_bigendian': big, 'point_step': step,
                                              'is_dense': dense}


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=9), st.integers(0, 255), st.floats(width=32, allow_nan=False))
def test_primitives_of_every_alignment_after_a_string(frame: str, kind: int,
                                                      value: float) -> None:
    reading = Range(radiation_type=kind, range=value)
    reading.header.frame_id = frame
    read = FieldReader(Range, ('radiation_type', 'range'))(serialize_message(reading))
    assert read == {'radiation_type': kind, 'range': value}


def test_bad_bytes_and_bad_fields_are_refused() -> None:
    data = serialize_message(FrankaRobotState(robot_mode=4))
    with pytest.raises(CdrError, match='truncated'):
        READ(data[:200])
    cloud = serialize_message(PointCloud2())   # its fields' count set to 2**32 - 1
    with pytest.raises(CdrError, match='a sequence of 4294967295 elements'):
        FieldReader(PointCloud2, ('is_dense',))(cloud[:28] + b'\xff' * 4 + cloud[32:])
    with pytest.raises(CdrError, match='not plain little-endian'):
        READ(b'\x00\x00' + data[2:])
    with pytest.raises(ValueError, match="no field 'mode'"):
        FieldReader(FrankaRobotState, ('mode',))
    with pytest.raises(ValueError, match='not decodable'):
        FieldReader(FrankaRobotState, ('o_t_ee',))


def test_the_arm_stop_reason_from_the_bytes_or_else_from_the_whole_message() -> None:
    stopped = FrankaRobotState(robot_mode=FrankaRobotState.ROBOT_MODE_REFLEX)
    stopped.current_errors.joint_velocity_violation = True
    data = serialize_message(stopped)

    def reason(raw: bytes) -> str | None:
        state = read_robot_mode(raw)
        return None if state is None else ArmModeWatch().read(*state)

    assert read_robot_mode(data) == (4, ['joint_velocity_violation'])
    assert 'protective stop: joint_velocity_violation' in reason(data)
    assert reason(serialize_message(FrankaRobotState(robot_mode=2))) == ''
    assert "the arm's user stop is pressed" in reason(serialize_message(
        FrankaRobotState(robot_mode=5)))
    assert reason(data[:300]) is None            # neither reader can decode it
    # another encapsulation id: the reader refuses it, rclpy's whole message decides
    assert reason(b'\x00\x03' + data[2:]) == reason(data)
