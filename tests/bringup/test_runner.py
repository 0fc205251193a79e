"""simops-launch: the exact command lines it runs, executable lookup, and its CLI errors."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from ros_helpers import REPO

from simops_bringup import runner
from simops_bringup.command_lines import (
    ExecutableNotFoundError,
    command_line,
    find_executable,
    format_value,
)
from simops_bringup.graph import build_graph
from simops_core.paths import resolve_resource

PREFIX = Path('/opt/prefix')
STANDIN = str(resolve_resource('config/standin_robot.yaml'))
PANDA_MAP = ('[panda_joint1=fr3_joint1, panda_joint2=fr3_joint2, panda_joint3=fr3_joint3, '
             'panda_joint4=fr3_joint4, panda_joint5=fr3_joint5, panda_joint6=fr3_joint6, '
             'panda_joint7=fr3_joint7, panda_finger_joint1=fr3_finger_joint1, '
             'panda_finger_joint2=fr3_finger_joint2]')
ROBOT_STATE_REMAP = ('/franka_robot_state_broadcaster/robot_state:='
                     'franka_robot_state_broadcaster/robot_state')
NS_REMAPS = ['-r', '/joint_states:=joint_states', '-r', '/joint_commands:=joint_commands',
             '-r', '/joint_position_controller/commands:=joint_position_controller/commands',
             '-r', '/fr3_arm_controller/joint_trajectory:=fr3_arm_controller/joint_trajectory',
             '-r', '/object_pose:=object_pose', '-r', '/ee_pose:=ee_pose',
             '-r', '/goal_pose:=goal_pose', '-r', '/policy/action:=policy/action',
             '-r', '/teleop/operator_twist:=teleop/operator_twist',
             '-r', '/simops/gripper_command:=simops/gripper_command',
             '-r', '/policy/state:=policy/state', '-r', '/simops/estop:=simops/estop',
             '-r', ROBOT_STATE_REMAP]


def fake_resolve(package: str, executable: str) -> Path:
    return PREFIX / 'lib' / package / executable


def exe(package: str, executable: str) -> str:
    return str(fake_resolve(package, executable))


# real_robot's remappings in the namespace /NS1: every topic relative
NS1_REMAPS = ['-r', '/joint_states:=franka/joint_states', '-r', '/joint_commands:=joint_commands',
              '-r', '/joint_position_controller/commands:=joint_position_controller/commands',
              '-r', '/fr3_arm_controller/joint_trajectory:=fr3_arm_controller/joint_trajectory',
              '-r', '/object_pose:=object_pose', '-r', '/ee_pose:=ee_pose',
              '-r', '/goal_pose:=goal_pose', '-r', '/policy/action:=policy/action',
              '-r', '/teleop/operator_twist:=teleop/operator_twist',
              '-r', '/simops/gripper_command:=simops/gripper_command',
              '-r', '/policy/state:=policy/state', '-r', '/simops/estop:=simops/estop',
              '-r', ROBOT_STATE_REMAP]
# real_robot's arm_setup, as the runner starts it without a namespace
ARM_SETUP = [exe('simops_ros', 'arm_setup'), '--ros-args', '-r', '__node:=arm_setup',
             '-p', 'robot:=config/robot/fr3.yaml', '-p', 'use_sim_time:=false',
             '-r', '/joint_states:=/franka/joint_states']
CASES = {
    'sim-defaults': ('sim', {}, [
        [exe('simops_sim', 'sim'), '--ros-args', '-r', '__node:=sim',
         '-p', 'model:=models/fr3/scene.xml', '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'sync_mode:=realtime', '-p', 'viewer:=false',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'cameras:=[scene, wrist]', '-p', 'publish_clock:=true',
         '-p', 'use_sim_time:=false'],
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-p', 'model_path:=models/policy/fr3_reach.pt', '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3', '-p', 'command_interface:=float64_array',
         '-p', 'start_enabled:=true',
         '-p', 'use_sim_time:=true'],
    ]),
    'sim-panda-on-the-fr3-model': ('sim', {'robot': 'panda', 'model': 'models/fr3/scene.xml'}, [
        [exe('simops_sim', 'sim'), '--ros-args', '-r', '__node:=sim',
         '-p', 'model:=models/fr3/scene.xml', '-p', 'robot:=config/robot/panda.yaml',
         '-p', f'joint_map:={PANDA_MAP}',
         '-p', 'sync_mode:=realtime', '-p', 'viewer:=false',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'cameras:=[scene, wrist]', '-p', 'publish_clock:=true',
         '-p', 'use_sim_time:=false'],
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-p', 'model_path:=models/policy/panda_reach.pt',
         '-p', 'robot:=config/robot/panda.yaml', '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'command_interface:=float64_array', '-p', 'start_enabled:=true',
         '-p', 'use_sim_time:=true'],
    ]),
    'sim-panda-record-lockstep-namespace': ('sim', {
        'robot': 'panda', 'record': 'true', 'record_dir': '2024', 'sync_mode': 'lockstep',
        'sim_params': 'fit.yaml', 'namespace': 'lab', 'viewer': 'true'}, [
        [exe('simops_sim', 'sim'), '--ros-args', '-r', '__node:=sim', '-r', '__ns:=/lab',
         '-p', 'model:=models/panda/scene.xml', '-p', 'robot:=config/robot/panda.yaml',
         '-p', 'sim_params_file:=fit.yaml',
         '-p', 'sync_mode:=lockstep', '-p', 'viewer:=true',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'cameras:=[scene, wrist]', '-p', 'publish_clock:=true',
         '-p', 'use_sim_time:=false', *NS_REMAPS],
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-r', '__ns:=/lab', '-p', 'model_path:=models/policy/panda_reach.pt',
         '-p', 'robot:=config/robot/panda.yaml', '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'command_interface:=float64_array',
         '-p', 'start_enabled:=true', '-p', 'use_sim_time:=true', *NS_REMAPS],
        [exe('simops_recorder', 'record'), '--ros-args', '-r', '__node:=recorder',
         '-r', '__ns:=/lab', '-p', "root:='2024'", '-p', 'robot:=panda',
         '-p', 'robot_mode:=sim', '-p', 'success_criterion:=reach',
         '-p', 'sim_params_file:=fit.yaml',
         '-p', 'use_sim_time:=true', *NS_REMAPS],
    ]),
    'real-robot-defaults': ('real_robot', {}, [
        ARM_SETUP,
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-p', 'model_path:=models/policy/fr3_reach.pt', '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'command_interface:=joint_trajectory',
         '-p', 'start_enabled:=false',
         '-p', 'use_sim_time:=false',
         '-p', 'require_promotion:=true', '-p', "calibration:=''",
         '-p', 'allow_unvalidated:=false', '-r', '/joint_states:=/franka/joint_states'],
        [exe('simops_recorder', 'record'), '--ros-args', '-r', '__node:=recorder',
         '-p', 'root:=episodes', '-p', 'robot:=fr3', '-p', 'robot_mode:=real',
         '-p', 'use_sim_time:=false', '-r', '/joint_states:=/franka/joint_states'],
    ]),
    'real-robot-standin-excite': ('real_robot', {
        'standin': 'true', 'excite': 'true', 'record': 'false', 'policy': 'my policy.pt'}, [
        [exe('simops_sim', 'sim'), '--ros-args', '-r', '__node:=standin',
         '--params-file', STANDIN, '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'model:=models/fr3/scene.xml',
         '-p', 'sim_params_file:=config/sim_params/standin_hidden.yaml',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'joint_state_rate:=1000.0', '-p', 'publish_clock:=false',
         '-p', 'use_sim_time:=false', '-r', '/joint_states:=/franka/joint_states'],
        ARM_SETUP,
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-p', 'model_path:=my policy.pt', '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'command_interface:=joint_trajectory',
         '-p', 'start_enabled:=false',
         '-p', 'use_sim_time:=false',
         '-p', 'require_promotion:=true', '-p', "calibration:=''",
         '-p', 'allow_unvalidated:=false', '-r', '/joint_states:=/franka/joint_states'],
        [exe('simops_sysid', 'excite'), '--ros-args', '-r', '__node:=excite',
         '-p', 'robot:=config/robot/fr3.yaml', '-p', 'command_interface:=joint_trajectory',
         '-p', 'use_sim_time:=false', '-r', '/joint_states:=/franka/joint_states'],
    ]),
    'real-robot-namespace': ('real_robot', {'namespace': '/NS1', 'record': 'false'}, [
        [exe('simops_ros', 'arm_setup'), '--ros-args', '-r', '__node:=arm_setup',
         '-r', '__ns:=/NS1', '-p', 'robot:=config/robot/fr3.yaml',
         '-p', 'use_sim_time:=false',
         *NS1_REMAPS],
        [exe('simops_policy', 'policy'), '--ros-args', '-r', '__node:=policy',
         '-r', '__ns:=/NS1', '-p', 'model_path:=models/policy/fr3_reach.pt',
         '-p', 'robot:=config/robot/fr3.yaml', '-p', 'gripper:=true', '-p', 'franka_ros2:=v3',
         '-p', 'command_interface:=joint_trajectory',
         '-p', 'start_enabled:=false', '-p', 'use_sim_time:=false',
         '-p', 'require_promotion:=true', '-p', "calibration:=''",
         '-p', 'allow_unvalidated:=false',
         *NS1_REMAPS],
    ]),
}


@pytest.mark.parametrize('case', CASES)
def test_runner_argv_per_profile_and_arguments(case: str) -> None:
    profile, values, expected = CASES[case]
    assert [command_line(n, fake_resolve) for n in build_graph(profile, values)] == expected


@pytest.mark.parametrize(('value', 'text'), [
    (True, 'true'), (False, 'false'), (1000.0, '1000.0'), (3, '3'), (0.05, '0.05'),
    ('fr3', 'fr3'), ('config/robot/fr3.yaml', 'config/robot/fr3.yaml'),
    ('true', "'true'"), ('123', "'123'"), ('1.5', "'1.5'"), ('', "''"), ('null', "'null'"),
    ("it's", "it's"), ('a: b', "'a: b'"), ('x,y', "'x,y'"), ("'q'", "'''q'''"),
    (('a=b', 'c'), '[a=b, c]'), (('1',), "['1']"),
])
def test_parameter_values_keep_their_type_through_rcl_yaml(value: object, text: str) -> None:
    assert format_value(value) == text


def make_prefix(root: Path, package: str, executable: str) -> Path:
    path = root / 'lib' / package / executable
    path.parent.mkdir(parents=True)
    path.write_text('#!/bin/sh\n')
    path.chmod(0o755)
    return path


def test_executables_resolve_like_ros2_run(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / 'first', tmp_path / 'second'
    wanted = make_prefix(second, 'simops_sim', 'sim')
    make_prefix(first, 'simops_sim', 'other')
    (first / 'lib/simops_sim/sim').write_text('not executable')  # skipped, like ros2 run
    monkeypatch.setenv('AMENT_PREFIX_PATH', f'{first}:{second}')
    assert find_executable('simops_sim', 'sim') == wanted


def test_executables_fall_back_to_the_checkouts_install_space(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('AMENT_PREFIX_PATH', '')
    # simops-demo is installed by the colcon build of simops_bringup (make build).
    assert find_executable('simops_bringup', 'simops-demo') == (
        REPO / 'install/simops_bringup/lib/simops_bringup/simops-demo')


def test_missing_executable_names_package_and_prefixes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(tmp_path))
    with pytest.raises(ExecutableNotFoundError, match=f'simops_sim/nope is not installed in '
                       f'any of {tmp_path}, '):
        find_executable('simops_sim', 'nope')


def fake_install(root: Path) -> str:
    for package, executable in (('simops_sim', 'sim'), ('simops_policy', 'policy'),
                                ('simops_recorder', 'record'), ('simops_sysid', 'excite'),
                                ('simops_ros', 'arm_setup')):
        make_prefix(root, package, executable)
    return str(root)


def test_dry_run_prints_each_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv('AMENT_PREFIX_PATH', fake_install(tmp_path))
    assert runner.main(['real_robot', 'standin:=true', 'policy:=my policy.pt', '--dry-run']) == 0
    lines = capsys.readouterr().out.splitlines()
    resolve = lambda p, e: tmp_path / 'lib' / p / e  # noqa: E731
    graph = build_graph('real_robot', {'standin': 'true', 'policy': 'my policy.pt'})
    assert [shlex.split(line) for line in lines] == [command_line(n, resolve) for n in graph]


def test_show_args_lists_every_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(['real_robot', '--show-args']) == 0
    out = capsys.readouterr().out
    for name in ('robot:', 'standin:', 'excite:', 'start_enabled:', "default: 'false'"):
        assert name in out


@pytest.mark.parametrize(('argv', 'message'), [
    (['sim', 'robot=panda'], "bad launch argument 'robot=panda'; write name:=value"),
    (['sim', 'robot:=fr3', 'robot:=panda'], 'launch argument robot is given twice'),
    (['sim', 'robot:=ur5'], "bad value 'ur5' for robot"),
    (['sim', 'standin:=true'], "unknown launch argument 'standin' for sim"),
    (['real_robot', '--isolate'], '--isolate would cut real_robot off from the arm'),
])
def test_errors_exit_2_with_one_line(argv: list[str], message: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv('AMENT_PREFIX_PATH', fake_install(tmp_path))
    assert runner.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith('simops-launch: error: ') and message in err
    assert err.count('\n') == 1


def test_missing_node_executable_is_a_configuration_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv('AMENT_PREFIX_PATH', str(tmp_path))
    monkeypatch.setattr('simops_bringup.command_lines.source_workspace', lambda: None)
    assert runner.main(['sim', '--dry-run']) == 2
    assert 'simops_sim/sim is not installed' in capsys.readouterr().err
