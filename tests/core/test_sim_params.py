"""SimParams YAML: round trip, example files, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import mujoco
import pytest
import yaml

from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import (
    JointParams,
    ObjectParams,
    PayloadParams,
    SimParams,
    SimParamsError,
    load_sim_params,
    merge_sim_params,
    parse_sim_params,
    save_sim_params,
)
from simops_sim.physics import Physics


def test_round_trip(tmp_path: Path) -> None:
    params = SimParams(
        joints={'fr3_joint1': JointParams(damping=3.0, kp=4000.0),
                'fr3_finger_joint1': JointParams(frictionloss=0.2)},
        command_delay=0.002, body_mass_scale={'fr3_link7': 1.1},
        object=ObjectParams(mass=0.2), payload=PayloadParams(mass=0.5, com_z=0.1),
        end_effector='none', controller='joint_impedance',
        provenance={'bags': ['a.mcap'], 'rms': 0.01})
    save_sim_params(params, tmp_path / 'p.yaml')
    assert load_sim_params(tmp_path / 'p.yaml') == params
    assert 'armature' not in (tmp_path / 'p.yaml').read_text()  # unset stays unset


def test_nominal_read_back_round_trips(tmp_path: Path) -> None:
    model = mujoco.MjModel.from_xml_path(str(resolve_resource('models/fr3/scene.xml')))
    nominal = Physics(model, load_robot_spec('fr3')).nominal
    # Gaz et al.'s Coulomb level and transition (2 / 5.12 rad/s), a small viscous term, no
    # armature, franka_ros2's gains.
    assert nominal.joints['fr3_joint1'] == JointParams(
        damping=0.05, armature=0.0, frictionloss=0.273, friction_transition=0.3906, kp=600.0,
        kv=30.0, encoder_offset=0.0, torque_offset=0.0)
    assert nominal.object == ObjectParams(mass=0.1, friction=1.0)
    save_sim_params(nominal, tmp_path / 'nominal.yaml')
    assert load_sim_params(tmp_path / 'nominal.yaml') == nominal


@pytest.mark.parametrize('path', sorted(Path(resolve_resource('config/sim_params')).glob('*.yaml')),
                         ids=lambda p: p.name)
def test_shipped_params_files_load(path: Path) -> None:
    params = load_sim_params(path)
    robot = 'panda' if any(j.startswith('panda_') for j in params.joints) else 'fr3'
    model = mujoco.MjModel.from_xml_path(str(resolve_resource(f'models/{robot}/scene.xml')))
    Physics(model, load_robot_spec(robot), params=params)  # names exist in the model


@pytest.mark.parametrize(('raw', 'field'), [
    ({'version': 2}, "'version'"),
    ({'joints': {}}, "'version'"),
    ({'version': 1, 'damping': 1.0}, "'damping'"),
    ({'version': 1, 'joints': {'fr3_joint1': {'damping': -1.0}}}, "'joints.fr3_joint1.damping'"),
    ({'version': 1, 'joints': {'fr3_joint1': {'kp': 0.0}}}, "'joints.fr3_joint1.kp'"),
    ({'version': 1, 'joints': {'fr3_joint1': {'stiffness': 1.0}}},
     "'joints.fr3_joint1.stiffness'"),
    ({'version': 1, 'joints': {'fr3_joint1': {'damping': 'high'}}}, "'joints.fr3_joint1.damping'"),
    ({'version': 1, 'joints': {'fr3_joint1': {'damping': float('nan')}}},
     "'joints.fr3_joint1.damping'"),
    ({'version': 1, 'joints': ['fr3_joint1']}, "'joints'"),
    ({'version': 1, 'command_delay': True}, "'command_delay'"),
    ({'version': 1, 'body_mass_scale': {'fr3_link1': 0}}, "'body_mass_scale.fr3_link1'"),
    ({'version': 1, 'object': {'mass': -0.1}}, "'object.mass'"),
    ({'version': 1, 'object': {'colour': 'red'}}, "'object.colour'"),
    ({'version': 1, 'payload': {'mass': -0.1}}, "'payload.mass'"),
    ({'version': 1, 'payload': {'mass': 21.0}}, "'payload.mass'"),
    ({'version': 1, 'payload': {'com_z': 0.6}}, "'payload.com_z'"),
    ({'version': 1, 'payload': {'inertia': 0.1}}, "'payload.inertia'"),
    ({'version': 1, 'end_effector': 'robotiq'}, "'end_effector'"),
    ({'version': 1, 'end_effector': False}, "'end_effector'"),
    ({'version': 1, 'controller': 'joint_velocity'}, "'controller'"),
    ({'version': 1, 'provenance': 'sysid'}, "'provenance'"),
    ({'version': 1, 'actuator_model': 'm.pt'}, "'actuator_model'"),
    ({'version': 1, 'actuator_model': {'path': 'm.pt'}}, "'actuator_model.sha256'"),
    ({'version': 1, 'actuator_model': {'path': 'm.pt', 'sha256': 'abc'}},
     "'actuator_model.sha256'"),
    ({'version': 1, 'actuator_model': {'sha256': '0' * 64}}, "'actuator_model.path'"),
    ({'version': 1, 'actuator_model': {'path': 'm.pt', 'sha256': '0' * 64, 'role': 'x'}},
     "'actuator_model.role'"),
    ([1, 2], "'<root>'"),
])
def test_errors_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(SimParamsError, match=field):
        parse_sim_params(raw, source='p.yaml')


def test_file_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SimParamsError, match='does not exist'):
        load_sim_params(tmp_path / 'missing.yaml')
    broken = tmp_path / 'broken.yaml'
    broken.write_text('version: 1\njoints: {fr3_joint1: [\n')
    with pytest.raises(SimParamsError, match='cannot parse') as info:
        load_sim_params(broken)
    assert '\n' not in str(info.value)


def test_yaml_from_sysid_style_dict_parses() -> None:
    text = yaml.safe_dump({'version': 1, 'joints': {'fr3_joint4': {'damping': 2}},
                           'provenance': {'date': '2026-01-01', 'residual_rms': 0.003}})
    params = parse_sim_params(yaml.safe_load(text))
    assert params.joints['fr3_joint4'].damping == 2.0
    assert params.provenance['residual_rms'] == 0.003


def test_merge_overrides_only_set_fields() -> None:
    base = SimParams(joints={'fr3_joint1': JointParams(damping=1.0, kp=4500.0)},
                     command_delay=0.0, object=ObjectParams(mass=0.1, friction=1.0))
    fitted = SimParams(joints={'fr3_joint1': JointParams(damping=2.5)},
                       object=ObjectParams(friction=0.7), provenance={'rms': 0.1})
    merged = merge_sim_params(base, fitted)
    assert merged.joints['fr3_joint1'] == JointParams(damping=2.5, kp=4500.0)
    assert merged.object == ObjectParams(mass=0.1, friction=0.7)
    assert merged.command_delay == 0.0 and merged.provenance == {'rms': 0.1}
    assert merge_sim_params(SimParams(end_effector='none'), fitted).end_effector == 'none'
    assert merge_sim_params(SimParams(controller='joint_impedance'),
                            fitted).controller == 'joint_impedance'
