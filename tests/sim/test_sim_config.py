"""A bad model, spec, params file or parameter: exit code 2 and one clear line, no traceback."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml
from sim_helpers import renamed_scene, start_sim

from simops_core.paths import resolve_resource


def write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


def bad_spec(tmp_path: Path) -> Path:
    raw = yaml.safe_load(resolve_resource('config/robot/fr3.yaml').read_text())
    raw['arm']['home'] = [0.0] * 6
    return write(tmp_path, 'spec.yaml', yaml.safe_dump(raw))


def changed_model(tmp_path: Path) -> Path:
    """SimParams naming a learned model whose bytes changed after the fit."""
    (tmp_path / 'fit.actuator.pt').write_bytes(b'the fitted model, then edited')
    fitted = hashlib.sha256(b'the fitted model').hexdigest()
    return write(tmp_path, 'fit.yaml', 'version: 1\nactuator_model: {path: fit.actuator.pt, '
                                       f'sha256: {fitted}}}\n')


CASES = {
    'missing model': (lambda t: ['model:=/nonexistent/scene.xml'], 'does not exist'),
    'invalid model': (lambda t: [f'model:={write(t, "bad.xml", "<mujoco><worldbody><body>")}'],
                      'cannot load model'),
    'renamed model without joint_map': (lambda t: [f'model:={renamed_scene(t)}'],
                                        'joint_map'),
    'missing spec': (lambda t: ['robot:=/nonexistent/robot.yaml'], 'does not exist'),
    'invalid spec': (lambda t: [f'robot:={bad_spec(t)}'], "'arm.home'"),
    'missing params': (lambda t: ['sim_params_file:=/nonexistent/p.yaml'], 'does not exist'),
    'invalid params': (lambda t: [f'sim_params_file:={write(t, "p.yaml", PARAMS_BAD)}'],
                       "'joints.fr3_joint2.damping'"),
    'params for an unknown joint': (
        lambda t: [f'sim_params_file:={write(t, "p.yaml", PARAMS_UNKNOWN)}'], 'fr3_joint9'),
    'a changed actuator model': (lambda t: [f'sim_params_file:={changed_model(t)}'],
                                 "'actuator_model.sha256'"),
    'unknown sync_mode': (lambda t: ['sync_mode:=turbo'], 'sync_mode'),
    'unknown sim profile': (lambda t: ['sim_profile:=turbo'], "no sim profile 'turbo'"),
    'missing keyframe': (lambda t: ['initial_keyframe:=sitting'], 'keyframe'),
    'out-of-range parameter': (lambda t: ['joint_state_rate:=-5.0'], 'joint_state_rate'),
    'absurd mass scale': (lambda t: [f'sim_params_file:={write(t, "p.yaml", PARAMS_MASS)}'],
                          "'body_mass_scale.fr3_link3' must lie in [0.1, 10]"),
    'absurd command delay': (
        lambda t: [f'sim_params_file:={write(t, "p.yaml", PARAMS_DELAY)}'],
        "'command_delay' must lie in [0, 1] s"),
    'absurd gain': (lambda t: [f'sim_params_file:={write(t, "p.yaml", PARAMS_KP)}'],
                    "'joints.fr3_joint1.kp' must lie in (0, 1e+06] N*m/rad"),
    'arms on a single-arm model': (lambda t: ["arms:=['left', 'right']"],
                                   "no joint 'left_fr3_joint1'"),
    'an arm named twice': (lambda t: ['model:=models/fr3_duo/scene.xml',
                                      "arms:=['left', 'left']"], 'names an arm twice'),
    'an arm name that is no namespace': (lambda t: ['model:=models/fr3_duo/scene.xml',
                                                    "arms:=['left arm']"], "bad arm name"),
}
PARAMS_BAD = 'version: 1\njoints:\n  fr3_joint2: {damping: -3.0}\n'
PARAMS_UNKNOWN = 'version: 1\njoints:\n  fr3_joint9: {damping: 3.0}\n'
PARAMS_MASS = 'version: 1\nbody_mass_scale: {fr3_link3: 1.0e+300}\n'
PARAMS_DELAY = 'version: 1\ncommand_delay: 1.0e+12\n'
PARAMS_KP = 'version: 1\njoints:\n  fr3_joint1: {kp: 1.0e+9}\n'


@pytest.mark.parametrize('case', list(CASES))
def test_bad_configuration_exits_2_with_one_line(tmp_path: Path, case: str) -> None:
    params, expected = CASES[case]
    with start_sim(tmp_path, *params(tmp_path)) as node:
        code = node.wait(timeout=60)
        output = node.output
    lines = output.strip().splitlines()
    assert code == 2, output
    assert len(lines) == 1, output
    assert lines[0].startswith('sim: error: ') and '; ' in lines[0], lines[0]
    assert expected in lines[0], lines[0]
