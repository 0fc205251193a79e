"""The robot spec loader: published numbers load, malformed files name the bad field."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from simops_core.paths import resolve_resource
from simops_core.robot_spec import SpecError, load_robot_spec


def test_fr3_published_limits() -> None:
    spec = load_robot_spec('fr3')
    assert spec.arm_joints == tuple(f'fr3_joint{i}' for i in range(1, 8))
    assert spec.gripper.joints == ('fr3_finger_joint1', 'fr3_finger_joint2')
    assert list(spec.velocity) == [2.62] * 4 + [5.26, 4.18, 5.26]
    assert list(spec.effort) == [87.0] * 4 + [12.0] * 3
    # Franka's current FR3 table (control-parameters-joint-fr3.csv), position-based limits too
    assert spec.position_upper[3] == pytest.approx(-0.1169)
    assert list(spec.position_lower) == [-2.9007, -1.8361, -2.9007, -3.0770, -2.8763, 0.4398,
                                         -3.0508]
    assert list(spec.velocity_offset) == [0.6599, 0.2517, 0.2, 0.3533, 0.5757, 0.4878, 0.4628]
    assert list(spec.deceleration) == [6.0, 2.585, 3.5, 4.0, 17.0, 5.5, 17.0]
    assert spec.gripper.width_max == pytest.approx(0.08)
    assert np.all(spec.home >= spec.position_lower) and np.all(spec.home <= spec.position_upper)


def test_panda_published_limits() -> None:
    spec = load_robot_spec('config/robot/panda.yaml')
    # The Panda keeps its constant velocity limits (no position-based ones published for it)
    low, high = spec.velocity_bounds(spec.position_upper)
    assert list(high) == list(spec.velocity) and list(low) == list(-spec.velocity)
    assert spec.arm_joints[0] == 'panda_joint1'
    assert list(spec.velocity) == [2.175] * 4 + [2.61] * 3
    assert list(spec.effort) == [87.0] * 4 + [12.0] * 3


def test_controller_constraints_are_joint_trajectory_controller_defaults() -> None:
    """franka_ros2 sets no constraints, so the FR3's are JointTrajectoryController's own."""
    constraints = load_robot_spec('fr3').constraints
    assert constraints.goal_time == 0.0 and constraints.stopped_velocity_tolerance == 0.01
    assert not constraints.trajectory.any() and not constraints.goal.any()


def test_spec_arrays_are_read_only() -> None:
    spec = load_robot_spec('fr3')
    with pytest.raises(ValueError):
        spec.velocity[0] = 100.0


def _fr3() -> dict[str, Any]:
    return yaml.safe_load(resolve_resource('config/robot/fr3.yaml').read_text())


def _set(tree: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    tree = copy.deepcopy(tree)
    *parents, leaf = dotted.split('.')
    node = tree
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[leaf]
    else:
        node[leaf] = value
    return tree


@pytest.mark.parametrize(('field', 'value', 'named'), [
    ('version', 2, 'version'),
    ('name', KeyError, 'name'),
    ('arm.velocity', KeyError, 'velocity'),
    ('arm.velocity', [2.62] * 6, 'arm.velocity'),
    ('arm.velocity', [2.62] * 6 + [-1.0], 'arm.velocity'),
    ('arm.effort', [87.0] * 6 + ['x'], 'arm.effort'),
    ('arm.position_lower', [3.0] * 7, 'arm.position_upper'),
    ('arm.home', [0.0] * 7, 'arm.home'),
    ('arm.joints', ['fr3_joint1'] * 7, 'arm.joints'),
    ('arm.joints', ['a', 'b'], 'arm.joints'),
    ('gripper.width_max', -0.08, 'gripper.width_max'),
    ('gripper.home_width', 0.5, 'gripper.home_width'),
    ('gripper.joints', ['fr3_joint1', 'fr3_finger_joint2'], 'gripper.joints'),
    ('arm', [1, 2], 'arm'),
    ('controller.constraints', KeyError, 'controller.constraints'),
    ('controller.constraints.goal', [0.0] * 6 + [-0.1], 'controller.constraints.goal'),
    ('controller.constraints.goal_time', -1.0, 'controller.constraints.goal_time'),
    ('arm.deceleration', KeyError, 'arm.velocity_offset'),      # the pair, or neither
    ('arm.velocity_offset', [0.5] * 6 + [0.0], 'arm.velocity_offset'),
])
def test_malformed_spec_names_the_field(tmp_path: Path, field: str, value: Any,
                                        named: str) -> None:
    path = tmp_path / 'bad.yaml'
    path.write_text(yaml.safe_dump(_set(_fr3(), field, value)))
    with pytest.raises(SpecError) as err:
        load_robot_spec(path)
    message = str(err.value)
    assert repr(named) in message or named in message
    assert str(path) in message
    assert '\n' not in message


def test_unparseable_and_missing_files(tmp_path: Path) -> None:
    broken = tmp_path / 'broken.yaml'
    broken.write_text('arm: [unclosed')
    with pytest.raises(SpecError, match='cannot parse'):
        load_robot_spec(broken)
    with pytest.raises(SpecError, match='does not exist'):
        load_robot_spec(tmp_path / 'missing.yaml')
    with pytest.raises(SpecError, match='not found'):
        load_robot_spec('no_such_robot')
