"""config/franka_ros2.yaml and the controller manager's states (no ROS).

Each release's names and recovery steps against franka_ros2's own sources (the file cites
them), and :class:`simops_sim.controller_states.ControllerStates` against
franka_hardware/doc/index.rst's "Error Recovery" for each release.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simops_core.franka_ros2 import (
    ROBOT_MODE_IDLE,
    ROBOT_MODE_MOVE,
    ROBOT_MODE_REFLEX,
    ROBOT_MODE_USER_STOPPED,
    ArmModeWatch,
    FrankaReleaseError,
    franka_release,
    release_names,
)
from simops_core.paths import resolve_resource
from simops_sim.controller_states import (
    BEST_EFFORT,
    STRICT,
    ControllerStates,
    franka_controllers,
)

JOINTS = tuple(f'fr3_joint{i}' for i in range(1, 8))


def test_the_newest_release_is_the_default_and_each_names_its_gripper() -> None:
    assert release_names() == ('v3', 'v2', 'v1')
    assert franka_release() == franka_release('v3')
    # franka_gripper/launch/gripper.launch.py: name=['franka_gripper'] from v2.0.0
    assert franka_release('v3').gripper_action('fr3') == 'franka_gripper/gripper_action'
    assert franka_release('v2').gripper_node_name('panda') == 'franka_gripper'
    assert franka_release('v1').gripper_node_name('panda') == 'panda_gripper'
    # franka_gripper/config/franka_gripper_node.yaml: state_publish_rate
    assert [franka_release(r).gripper_state_rate for r in ('v3', 'v2', 'v1')] == [15, 15, 50]
    # franka_hardware/doc/index.rst, "Recovery Steps"
    assert franka_release('v3').recovery == ('error_recovery', 'activate_hardware',
                                             'activate_controllers')
    assert franka_release('v2').recovery == ('deactivate_controllers', 'error_recovery',
                                             'activate_hardware', 'activate_controllers')
    assert franka_release('v1').recovery == ('error_recovery',)


def test_an_unknown_release_is_one_line() -> None:
    with pytest.raises(FrankaReleaseError, match=r"unknown franka_ros2 release 'v9'; choose "
                                                 r'one of v3, v2, v1'):
        franka_release('v9')


@pytest.mark.parametrize(('mutate', 'message'), [
    (lambda t: t.update(default='v7'), '"default" must name a release'),
    (lambda t: t['releases']['v3'].pop('recovery'), 'needs recovery'),
    (lambda t: t['releases']['v3'].update(recovery=['reboot']), 'recovery must list steps'),
    (lambda t: t['releases']['v3'].update(distro='rolling'), 'distro must be one of'),
    (lambda t: t['releases']['v3'].update(gripper_state_rate=0), 'positive number'),
    (lambda t: t['releases']['v3'].update(gripper_node='a b'), 'must be a node name'),
    (lambda t: t.update(releases=[]), 'non-empty mapping'),
])
def test_a_malformed_releases_file_is_one_line(tmp_path: Path, mutate: object,
                                                message: str) -> None:
    tree = yaml.safe_load(resolve_resource('config/franka_ros2.yaml').read_text())
    mutate(tree)
    path = tmp_path / 'franka_ros2.yaml'
    path.write_text(yaml.safe_dump(tree))
    with pytest.raises(FrankaReleaseError, match=message) as caught:
        franka_release('', str(path))
    assert '\n' not in str(caught.value)


def states(release: str) -> ControllerStates:
    return ControllerStates(franka_release(release), franka_controllers(JOINTS))


def test_jazzy_deactivates_the_controllers_on_an_error_and_recovers_in_three_steps() -> None:
    control = states('v3')
    assert control.refusal() == ''
    control.on_error()
    assert control.hardware == 'unconfigured'
    assert control.states['fr3_arm_controller'] == 'inactive'
    assert control.states['joint_state_broadcaster'] == 'active'   # claims no command
    assert 'unconfigured after an error' in control.refusal()
    assert 'error recovery first' in control.set_hardware('active', error_cleared=False)
    assert control.switch(['fr3_arm_controller'], [], STRICT)[0] is False   # hardware first
    assert control.set_hardware('active', error_cleared=True) == ''
    assert 'fr3_arm_controller is inactive' in control.refusal()
    assert control.switch(['fr3_arm_controller'], [], STRICT) == (True, 'switched')
    assert control.refusal() == ''


def test_humble_keeps_the_controllers_active_so_they_must_be_deactivated_first() -> None:
    control = states('v2')
    control.on_error()
    assert control.hardware == 'unconfigured'
    assert control.states['fr3_arm_controller'] == 'active'   # ros2_control#2318
    assert 'deactivate the controllers first' in control.set_hardware('active', True)
    assert control.switch([], ['fr3_arm_controller'], STRICT)[0]
    assert control.set_hardware('active', True) == ''
    assert control.switch(['fr3_arm_controller'], [], STRICT)[0]
    assert control.refusal() == ''


def test_before_v2_an_error_leaves_the_controller_manager_as_it_was() -> None:
    control = states('v1')
    control.on_error()
    assert control.hardware == 'active' and control.refusal() == ''


def test_switch_strictness() -> None:
    control = states('v3')
    ok, message = control.switch([], ['fr3_arm_controller', 'nope'], STRICT)
    assert not ok and "'nope' is not loaded" in message
    assert control.states['fr3_arm_controller'] == 'active'          # STRICT: nothing done
    ok, message = control.switch([], ['fr3_arm_controller', 'nope'], BEST_EFFORT)
    assert ok and control.states['fr3_arm_controller'] == 'inactive'  # the rest is done
    assert control.switch([], ['nope'], BEST_EFFORT)[0] is False      # nothing to do
    assert control.switch(['fr3_arm_controller'], [], BEST_EFFORT)[0]
    assert control.set_hardware('inactive', True) == ''               # stops its controllers
    assert control.states['fr3_arm_controller'] == 'inactive'
    assert 'unknown target state' in control.set_hardware('on', True)


def test_the_command_mode_follows_the_claimed_interfaces_as_franka_hardware_picks_it() -> None:
    """franka_hardware_interface.cpp:420-426 (v3.4.0): effort whenever claimed, else
    position. The position controller starts inactive; beside the effort JTC it is active
    but refused; in its place the arm runs its own impedance loop."""
    control = states('v3')
    assert control.states['joint_position_controller'] == 'inactive'
    assert control.controller_law() == 'joint_trajectory'
    assert 'joint_position_controller is inactive' in control.refusal('joint_position_controller')
    assert control.switch(['joint_position_controller'], [], STRICT)[0]
    assert control.controller_law() == 'joint_trajectory'
    assert 'claims the effort interface' in control.refusal('joint_position_controller')
    assert control.switch([], ['fr3_arm_controller'], STRICT)[0]
    assert control.controller_law() == 'joint_impedance'
    assert control.refusal('joint_position_controller') == ''
    assert 'fr3_arm_controller is inactive' in control.refusal()
    assert control.switch([], ['joint_position_controller'], STRICT)[0]
    assert control.controller_law() is None      # no command mode: the law stays
    control.on_error()
    control.restart()
    assert control.controller_law() == 'joint_trajectory'


def test_the_arm_mode_watch_reads_stops_and_the_user_stop_until_the_arm_moves_again() -> None:
    """Reflex mode names its errors; USER_STOPPED is a stop with none; released (IDLE), the
    user stop's arm stays stopped until it is read moving; an IDLE arm never stopped is not."""
    watch = ArmModeWatch()
    assert watch.read(ROBOT_MODE_IDLE, []) == ''              # not started yet: no stop
    assert watch.read(ROBOT_MODE_MOVE, []) == ''
    assert 'protective stop: joint_reflex)' in watch.read(ROBOT_MODE_REFLEX, ['joint_reflex'])
    assert 'protective stop: reflex)' in watch.read(ROBOT_MODE_REFLEX, [])
    assert watch.read(ROBOT_MODE_MOVE, []) == ''
    assert "user stop is pressed; release it, recover it" in watch.read(
        ROBOT_MODE_USER_STOPPED, [])
    assert 'released and the arm is idle; recover it' in watch.read(ROBOT_MODE_IDLE, [])
    assert 'released and the arm is idle' in watch.read(ROBOT_MODE_IDLE, [])
    assert watch.read(ROBOT_MODE_MOVE, []) == ''              # recovered
    assert watch.read(ROBOT_MODE_IDLE, []) == ''              # idle again, no user stop
