"""The servo law: twists and jogs to joint velocities by moveit_servo's rules (no ROS).

Expected values come from moveit_servo's formulas (moveit2 2.15.0) written here again, and
from finite differences of the MJCF's kinematics, not from the law's own intermediate
results."""

from __future__ import annotations

import numpy as np
import pytest

from simops_core.robot_spec import load_robot_spec
from simops_sim.model_index import load_model
from simops_teleop.servo_law import (
    ServoSettings,
    ServoStatus,
    TcpKinematics,
    jog_command,
    jog_velocities,
    twist_velocities,
)

SPEC = load_robot_spec('fr3')
KIN = TcpKinematics(load_model('models/fr3/scene.xml'), SPEC)
SETTINGS = ServoSettings.defaults()
ANYWHERE = ((-2.0, -2.0, -2.0), (2.0, 2.0, 2.0))   # m: a box that never binds
PERIOD = 0.01   # s: the 100 Hz teleop rate


def tcp_after(q: np.ndarray, velocity: np.ndarray, dt: float = 1e-4) -> np.ndarray:
    """TCP velocity (3,) m/s by a finite difference of the kinematics."""
    return (KIN.at(q + velocity * dt)[0] - KIN.at(q)[0]) / dt


def condition(q: np.ndarray) -> float:
    s = np.linalg.svd(KIN.at(q)[1], compute_uv=False)
    return float(s[0] / s[-1])


def test_a_twist_moves_the_tcp_that_way_at_home() -> None:
    for axis in range(3):
        twist = np.zeros(6)
        twist[axis] = 0.05
        out = twist_velocities(KIN, SPEC.home, twist, PERIOD, SETTINGS)
        assert out.status == ServoStatus.NO_WARNING
        np.testing.assert_allclose(tcp_after(SPEC.home, out.velocity), twist[:3], atol=2e-4)


def test_speeds_are_capped_keeping_the_direction() -> None:
    twist = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])   # 1.41 m/s, capped at 0.2
    out = twist_velocities(KIN, SPEC.home, twist, PERIOD, SETTINGS)
    moved = tcp_after(SPEC.home, out.velocity)
    assert np.linalg.norm(moved) == pytest.approx(SETTINGS.linear, rel=2e-3)
    assert moved[0] == pytest.approx(moved[1], rel=2e-3) and abs(moved[2]) < 1e-3


def shoulder(j4: float) -> np.ndarray:
    """Home with joint 4 opened: the wrist nears joint 1's axis (a shoulder singularity)."""
    q = SPEC.home.copy()
    q[3] = j4
    return q


def test_near_a_singularity_it_slows_as_moveit_servo_does() -> None:
    q = shoulder(-1.1)
    kappa = condition(q)
    assert 17.0 < kappa < 30.0
    twist = np.array([-0.05, 0.0, 0.0, 0.0, 0.0, 0.0])   # towards joint 1's axis
    free = twist_velocities(KIN, q, twist, PERIOD, ServoSettings.defaults(
        lower_singularity_threshold=1e3, hard_stop_singularity_threshold=2e3, box=ANYWHERE))
    settings = ServoSettings.defaults(box=ANYWHERE)
    out = twist_velocities(KIN, q, twist, PERIOD, settings)
    assert out.status == ServoStatus.DECELERATE_FOR_APPROACHING_SINGULARITY
    expected = 1.0 - (kappa - 17.0) / (30.0 - 17.0)   # common.cpp:348-366, moving towards
    np.testing.assert_allclose(out.velocity, expected * free.velocity, rtol=1e-9)
    away = twist_velocities(KIN, q, -twist, PERIOD, settings)
    assert away.status == ServoStatus.DECELERATE_FOR_LEAVING_SINGULARITY
    leaving = 1.0 - (kappa - 17.0) / (17.0 + 2.0 * (30.0 - 17.0) - 17.0)
    np.testing.assert_allclose(away.velocity, -leaving * free.velocity, rtol=1e-9)


def test_beyond_the_hard_stop_it_halts() -> None:
    q = shoulder(-0.9)
    assert condition(q) >= 30.0
    out = twist_velocities(KIN, q, np.array([0.0, 0.05, 0.0, 0.0, 0.0, 0.0]), PERIOD,
                           ServoSettings.defaults(box=ANYWHERE))
    assert out.status == ServoStatus.HALT_FOR_SINGULARITY
    assert not out.velocity.any()


@pytest.mark.parametrize('joint', range(7))
def test_a_joint_near_its_bound_halts_every_joint_only_when_moving_towards_it(
        joint: int) -> None:
    q = SPEC.home.copy()
    q[joint] = SPEC.position_lower[joint] + 0.05   # inside the 0.1 rad margin
    towards = np.zeros(7)
    towards[joint] = -0.1
    towards[(joint + 1) % 7] = 0.2
    out = jog_velocities(q, towards, SPEC, SETTINGS)
    assert out.status == ServoStatus.JOINT_BOUND and not out.velocity.any()
    away = jog_velocities(q, -towards, SPEC, SETTINGS)
    assert away.status == ServoStatus.NO_WARNING
    np.testing.assert_array_equal(away.velocity, -towards)


def test_a_jog_beyond_a_velocity_limit_is_scaled_down_as_a_whole() -> None:
    velocity = np.zeros(7)
    velocity[0] = 2.0 * SPEC.velocity[0]
    velocity[1] = 0.1
    out = jog_velocities(SPEC.home, velocity, SPEC, SETTINGS)
    np.testing.assert_allclose(out.velocity, velocity / 2.0)


def test_the_box_keeps_the_tcp_above_the_table() -> None:
    q = SPEC.home.copy()
    low = np.array(SETTINGS.box[0])
    # a box whose floor is where the TCP is: a downward twist loses its z part only
    at_floor = ServoSettings.defaults(box=((low[0], low[1], float(KIN.at(q)[0][2])),
                                           SETTINGS.box[1]))
    twist = np.array([0.03, 0.0, -0.05, 0.0, 0.0, 0.0])
    out = twist_velocities(KIN, q, twist, PERIOD, at_floor)
    np.testing.assert_allclose(tcp_after(q, out.velocity), [0.03, 0.0, 0.0], atol=2e-4)


@pytest.mark.parametrize('bad', [np.nan, np.inf])
def test_non_finite_commands_are_invalid_and_move_nothing(bad: float) -> None:
    twist = np.array([0.01, bad, 0.0, 0.0, 0.0, 0.0])
    out = twist_velocities(KIN, SPEC.home, twist, PERIOD, SETTINGS)
    assert out.status == ServoStatus.INVALID and not out.velocity.any()
    jog = jog_velocities(SPEC.home, np.full(7, bad), SPEC, SETTINGS)
    assert jog.status == ServoStatus.INVALID and not jog.velocity.any()


def test_the_tcp_frame_points_down_at_home() -> None:
    """franka_description's hand TCP: z along the fingers, down at home."""
    rotation = KIN.rotation(SPEC.home)
    np.testing.assert_allclose(rotation @ [0.0, 0.0, 1.0], [0.0, 0.0, -1.0], atol=1e-6)
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-12)


def test_a_joint_jog_is_read_by_moveit_servos_rules() -> None:
    """command.cpp:95-120 and servo_node.cpp:235-238 (moveit2 2.15.0): named joints only,
    one velocity per name, displacements not served."""
    joints = SPEC.arm_joints
    velocity, note = jog_command([joints[3], joints[0]], [0.2, -0.1], [], joints)
    np.testing.assert_array_equal(velocity, [-0.1, 0, 0, 0.2, 0, 0, 0])
    assert note == ''
    assert jog_command([joints[3]], [0.2, 0.1], [], joints)[0] is None
    velocity, note = jog_command(['elbow'], [0.2], [], joints)
    assert velocity is None and "no arm joint 'elbow'" in note
    velocity, note = jog_command([joints[3]], [], [0.01], joints)
    assert velocity is None and note == 'displacements are not served; send velocities'
    velocity, note = jog_command([joints[3]], [0.2], [0.01], joints)
    assert velocity[3] == 0.2 and 'displacements are ignored' in note
    assert jog_command([joints[3]], [float('nan')], [], joints)[0] is None
