"""The node graph: which nodes each profile starts and how every one of them is configured."""

from __future__ import annotations

import ast

import pytest
import yaml
from ros_helpers import REPO

from simops_bringup.graph import GraphError, NodeSpec, build_graph, launch_arguments
from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics

TOPICS = load_topics()
FRANKA_JOINT_STATES = '/franka/joint_states'
FRANKA_TRAJECTORY = '/fr3_arm_controller/joint_trajectory'


def by_name(nodes: tuple[NodeSpec, ...]) -> dict[str, NodeSpec]:
    return {node.name: node for node in nodes}


def params(node: NodeSpec) -> dict[str, object]:
    return dict(node.parameters)


def test_cameras_false_renders_none_and_the_duo_renders_none() -> None:
    sim = build_graph('sim', {'cameras': 'false'})[0]
    assert 'cameras' not in params(sim)
    duo = build_graph('sim', {'layout': 'fr3_duo'})[0]
    assert 'cameras' not in params(duo)


def test_sim_defaults_start_simulator_and_policy_with_sim_time_wired() -> None:
    nodes = build_graph('sim')
    assert [(n.package, n.executable, n.name) for n in nodes] == [
        ('simops_sim', 'sim', 'sim'), ('simops_policy', 'policy', 'policy')]
    sim, policy = nodes
    assert params(sim) == {
        'model': 'models/fr3/scene.xml', 'robot': 'config/robot/fr3.yaml',
        'sync_mode': 'realtime', 'viewer': False, 'gripper': True, 'franka_ros2': 'v3',
        'cameras': ('scene', 'wrist'), 'publish_clock': True, 'use_sim_time': False}
    assert params(policy) == {
        'model_path': 'models/policy/fr3_reach.pt', 'robot': 'config/robot/fr3.yaml',
        'gripper': True, 'franka_ros2': 'v3', 'command_interface': 'float64_array',
        'start_enabled': True, 'use_sim_time': True}
    for node in nodes:
        assert node.namespace == ''
        assert node.remappings == ()
        assert node.param_files == ()
        assert node.required


def test_sim_record_adds_recorder_with_episode_metadata() -> None:
    nodes = by_name(build_graph('sim', {'record': 'true', 'record_dir': '/data/ep',
                                        'sim_params': 'fitted.yaml'}))
    assert list(nodes) == ['sim', 'policy', 'recorder']
    recorder = nodes['recorder']
    assert (recorder.package, recorder.executable) == ('simops_recorder', 'record')
    assert params(recorder) == {'root': '/data/ep', 'robot': 'fr3', 'robot_mode': 'sim',
                                'success_criterion': 'reach',
                                'sim_params_file': 'fitted.yaml', 'use_sim_time': True}
    assert params(nodes['sim'])['sim_params_file'] == 'fitted.yaml'


def test_task_picks_the_default_policy_and_the_recorders_success_criterion() -> None:
    nodes = by_name(build_graph('sim', {'task': 'pick_place', 'record': 'true'}))
    assert params(nodes['policy'])['model_path'] == 'models/policy/fr3_pick_place.pt'
    assert params(nodes['recorder'])['success_criterion'] == 'pick_place'
    chosen = by_name(build_graph('sim', {'task': 'pick_place', 'policy': 'my.pt'}))
    assert params(chosen['policy'])['model_path'] == 'my.pt'
    real = by_name(build_graph('real_robot', {'task': 'pick_place'}))
    assert 'success_criterion' not in params(real['recorder'])   # ~/episode_info labels


def test_use_sim_time_false_stops_the_clock_and_every_consumer_follows_wall_time() -> None:
    nodes = by_name(build_graph('sim', {'use_sim_time': 'false', 'record': 'true'}))
    assert params(nodes['sim'])['publish_clock'] is False
    assert params(nodes['sim'])['use_sim_time'] is False
    assert params(nodes['policy'])['use_sim_time'] is False
    assert params(nodes['recorder'])['use_sim_time'] is False


def test_sim_arguments_reach_their_parameters() -> None:
    nodes = by_name(build_graph('sim', {
        'model': 'models/fr3/fr3.xml', 'policy': 'p.pt2',
        'sync_mode': 'lockstep', 'viewer': 'true', 'start_enabled': 'false',
        'command_interface': 'joint_trajectory'}))
    assert params(nodes['sim'])['model'] == 'models/fr3/fr3.xml'
    assert params(nodes['sim'])['sync_mode'] == 'lockstep'
    assert params(nodes['sim'])['viewer'] is True
    assert params(nodes['policy'])['model_path'] == 'p.pt2'
    assert params(nodes['policy'])['start_enabled'] is False
    assert params(nodes['policy'])['command_interface'] == 'joint_trajectory'


@pytest.mark.parametrize('profile', ['sim', 'real_robot'])
def test_gripper_false_takes_the_hand_off_the_simulators_and_the_policy(profile: str) -> None:
    """franka_bringup's load_gripper:=false: no Franka Hand to simulate or command."""
    values = {'gripper': 'false'} | ({'standin': 'true'} if profile == 'real_robot' else {})
    nodes = by_name(build_graph(profile, values))
    simulator = nodes['sim' if profile == 'sim' else 'standin']
    assert params(simulator)['gripper'] is False and params(nodes['policy'])['gripper'] is False
    assert params(by_name(build_graph(profile))['policy'])['gripper'] is True


@pytest.mark.parametrize('profile', ['sim', 'real_robot'])
def test_one_franka_ros2_release_for_every_node_that_talks_to_the_arm(profile: str) -> None:
    """franka_ros2:=v2: the simulator (or stand-in) serves it, the policy uses its names."""
    values = {'franka_ros2': 'v2'} | ({'standin': 'true'} if profile == 'real_robot' else {})
    nodes = by_name(build_graph(profile, values))
    simulator = nodes['sim' if profile == 'sim' else 'standin']
    assert params(simulator)['franka_ros2'] == params(nodes['policy'])['franka_ros2'] == 'v2'
    with pytest.raises(GraphError, match="bad value 'v9' for franka_ros2; choose one of v3, "
                                         'v2, v1'):
        build_graph(profile, {'franka_ros2': 'v9'})


def test_panda_runs_its_own_model_and_policy() -> None:
    sim, policy = build_graph('sim', {'robot': 'panda'})[:2]
    assert params(sim)['robot'] == 'config/robot/panda.yaml'
    assert params(sim)['model'] == 'models/panda/scene.xml'
    assert 'joint_map' not in params(sim)
    assert params(policy)['model_path'] == 'models/policy/panda_reach.pt'


def test_panda_maps_its_joints_onto_the_fr3_model_in_spec_order() -> None:
    sim = build_graph('sim', {'robot': 'panda', 'model': 'models/fr3/scene.xml'})[0]
    panda, fr3 = load_robot_spec('panda'), load_robot_spec('fr3')
    assert params(sim)['robot'] == 'config/robot/panda.yaml'
    assert params(sim)['joint_map'] == tuple(
        f'{a}={b}' for a, b in zip(panda.joint_names, fr3.joint_names, strict=True))
    assert 'joint_map' not in params(build_graph('sim')[0])


def test_namespace_moves_nodes_and_topics_but_not_clock_or_diagnostics() -> None:
    nodes = build_graph('sim', {'namespace': 'lab/arm1'})
    expected = tuple((t.name, t.name.lstrip('/')) for key, t in TOPICS.items()
                     if key not in ('clock', 'diagnostics'))
    for node in nodes:
        assert node.namespace == '/lab/arm1'
        assert node.remappings == expected
    assert '/clock' not in dict(expected)



def test_fr3_duo_is_one_simulator_and_a_policy_and_recorder_per_arm_namespace() -> None:
    from simops_bringup.runner import node_label

    nodes = build_graph('sim', {'layout': 'fr3_duo', 'record': 'true', 'namespace': 'lab',
                                'record_dir': 'episodes'})
    assert [(node_label(n, nodes), n.namespace) for n in nodes] == [
        ('sim', '/lab'), ('lab/left/policy', '/lab/left'), ('lab/left/recorder', '/lab/left'),
        ('lab/right/policy', '/lab/right'), ('lab/right/recorder', '/lab/right')]
    sim = nodes[0]
    assert params(sim)['model'] == 'models/fr3_duo/scene.xml'
    assert params(sim)['arms'] == ('left', 'right') and 'joint_map' not in params(sim)
    assert [params(n)['root'] for n in nodes if n.name == 'recorder'] == [
        'episodes/left', 'episodes/right']
    # Each arm's nodes see the arm's topics (relative to its namespace) and the one /clock.
    relative = tuple((t.name, t.name.lstrip('/')) for key, t in TOPICS.items()
                     if key not in ('clock', 'diagnostics'))
    for node in nodes[1:]:
        assert node.remappings == relative
    assert 'arms' not in params(build_graph('sim')[0])
    # ros2 launch passes every argument, the model's default template too.
    passed = build_graph('sim', {'layout': 'fr3_duo', 'model': 'models/{robot}/scene.xml'})
    assert params(passed[0])['model'] == 'models/fr3_duo/scene.xml'

@pytest.mark.parametrize(('profile', 'values', 'message'), [
    ('simulation', {}, "unknown profile 'simulation'"),
    ('sim', {'robots': 'fr3'}, "unknown launch argument 'robots' for sim"),
    ('sim', {'excite': 'true'}, "unknown launch argument 'excite' for sim"),
    ('real_robot', {'viewer': 'true'}, "unknown launch argument 'viewer' for real_robot"),
    ('sim', {'robot': 'ur5'}, "bad value 'ur5' for robot; choose one of fr3, panda"),
    ('sim', {'record': 'yes'}, "bad value 'yes' for record; choose one of true, false"),
    ('sim', {'sync_mode': 'fast'}, "bad value 'fast' for sync_mode"),
    ('sim', {'namespace': 'arm 1'}, "bad value 'arm 1' for namespace"),
    ('sim', {'policy': ''}, 'launch argument policy must not be empty'),
    ('sim', {'sync_mode': 'lockstep', 'use_sim_time': 'false'},
     'sync_mode:=lockstep needs use_sim_time:=true'),
    ('sim', {'model': 'models/none.xml'}, 'cannot read model models/none.xml'),
    ('sim', {'layout': 'trio'}, "bad value 'trio' for layout; choose one of single, fr3_duo"),
    ('sim', {'layout': 'fr3_duo', 'robot': 'panda'}, 'layout:=fr3_duo is two FR3s'),
    ('real_robot', {'command_interface': 'float64_array'},
     "bad value 'float64_array' for command_interface; choose one of joint_trajectory"),
    ('real_robot', {'start_enabled': 'true'}, 'start_enabled:=true is refused on a real arm'),
    ('real_robot', {'standin': 'true', 'start_enabled': 'true', 'excite': 'true'},
     'would command the arm from two nodes'),
])
def test_bad_arguments_raise_one_line_errors(profile: str, values: dict[str, str],
                                             message: str) -> None:
    with pytest.raises(GraphError) as info:
        build_graph(profile, values)
    assert message in str(info.value)
    assert '\n' not in str(info.value)


def test_real_robot_defaults_policy_disabled_and_recorder_on_franka_topics() -> None:
    nodes = build_graph('real_robot')
    assert [n.name for n in nodes] == ['arm_setup', 'policy', 'recorder']
    setup, policy, recorder = nodes
    # once at bringup, not required: the spec's collision behaviour (and a payload) to the arm
    assert (setup.package, setup.executable, setup.required) == ('simops_ros', 'arm_setup',
                                                                 False)
    assert params(setup) == {'robot': 'config/robot/fr3.yaml', 'use_sim_time': False}
    payload = by_name(build_graph('real_robot', {'payload': 'fitted.yaml'}))['arm_setup']
    assert params(payload)['payload_file'] == 'fitted.yaml'
    assert params(policy) == {
        'model_path': 'models/policy/fr3_reach.pt', 'robot': 'config/robot/fr3.yaml',
        'gripper': True, 'franka_ros2': 'v3', 'command_interface': 'joint_trajectory',
        'start_enabled': False, 'use_sim_time': False, 'require_promotion': True,
        'calibration': '', 'allow_unvalidated': False}
    assert params(recorder) == {'root': 'episodes', 'robot': 'fr3', 'robot_mode': 'real',
                                'use_sim_time': False}
    for node in nodes:
        remaps = dict(node.remappings)
        assert remaps[TOPICS['joint_states'].name] == FRANKA_JOINT_STATES
        # The trajectory topic's default already is franka_ros2's name: no rule needed.
        assert TOPICS['joint_trajectory'].name == FRANKA_TRAJECTORY
        assert TOPICS['joint_trajectory'].name not in remaps


def test_real_robot_in_a_namespace_follows_franka_bringup_namespaces() -> None:
    policy = build_graph('real_robot', {'namespace': 'NS1'})[0]
    remaps = dict(policy.remappings)
    assert policy.namespace == '/NS1'
    # Relative targets resolve to /NS1/franka/joint_states, like franka.launch.py namespace:=NS1.
    assert remaps[TOPICS['joint_states'].name] == FRANKA_JOINT_STATES.lstrip('/')
    assert remaps[FRANKA_TRAJECTORY] == FRANKA_TRAJECTORY.lstrip('/')


def test_real_robot_excite_and_standin() -> None:
    nodes = by_name(build_graph('real_robot', {'excite': 'true', 'standin': 'true',
                                               'record': 'false'}))
    assert list(nodes) == ['standin', 'arm_setup', 'policy', 'excite']
    standin, excite = nodes['standin'], nodes['excite']
    assert (standin.package, standin.executable) == ('simops_sim', 'sim')
    assert standin.param_files == (str(resolve_resource('config/standin_robot.yaml')),)
    assert params(standin) == {'robot': 'config/robot/fr3.yaml', 'model': 'models/fr3/scene.xml',
                               'sim_params_file': 'config/sim_params/standin_hidden.yaml',
                               'gripper': True, 'franka_ros2': 'v3', 'joint_state_rate': 1000.0,
                               'publish_clock': False,
                               'use_sim_time': False}
    assert dict(standin.remappings)[TOPICS['joint_states'].name] == FRANKA_JOINT_STATES
    assert standin.required
    assert (excite.package, excite.executable) == ('simops_sysid', 'excite')
    assert params(excite) == {'robot': 'config/robot/fr3.yaml',
                              'command_interface': 'joint_trajectory', 'use_sim_time': False}
    assert not excite.required  # excite ends after its run; the rest keeps going


def test_standin_may_start_enabled_and_publishes_clock_for_sim_time() -> None:
    nodes = by_name(build_graph('real_robot', {'standin': 'true', 'start_enabled': 'true',
                                               'use_sim_time': 'true'}))
    assert params(nodes['policy'])['start_enabled'] is True
    assert params(nodes['standin'])['publish_clock'] is True
    assert params(nodes['recorder'])['use_sim_time'] is True


def test_every_argument_is_described_and_defaults_are_allowed() -> None:
    for profile in ('sim', 'real_robot'):
        arguments = launch_arguments(profile)
        assert len({a.name for a in arguments}) == len(arguments)
        for arg in arguments:
            assert arg.description
            assert not arg.choices or arg.default in arg.choices
        build_graph(profile, {a.name: a.default for a in arguments})


def test_config_files_hold_what_the_graph_relies_on() -> None:
    standin = yaml.safe_load((REPO / 'config/standin_robot.yaml').read_text())
    ros_params = standin['/**']['ros__parameters']
    assert ros_params['sync_mode'] == 'realtime'
    assert isinstance(ros_params['realtime_factor'], float)
    # Topic names and rates come from config/real_robot.yaml, robot from the arguments, the
    # hidden truth from the robot (test_each_robots_standin_has_a_hidden_truth_its_model_runs).
    assert not ({'robot', 'joint_state_rate', 'publish_clock', 'sim_params_file'}
                & ros_params.keys())
    real = yaml.safe_load((REPO / 'config/real_robot.yaml').read_text())
    assert set(real['remap']) <= set(TOPICS)


def test_bringup_modules_import_neither_rclpy_nor_launch() -> None:
    """simops-launch runs without launch_ros; only the launch files' own module imports it."""
    for path in (REPO / 'src/simops_bringup/simops_bringup').glob('*.py'):
        forbidden = ('rclpy',) if path.name == 'ros2_launch.py' else (
            'rclpy', 'launch', 'launch_ros')
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ''] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split('.')[0] not in forbidden, path.name


@pytest.mark.parametrize('robot', ['fr3', 'panda'])
def test_each_robots_standin_has_a_hidden_truth_its_model_runs(robot: str) -> None:
    """robot:=panda standin:=true: the stand-in loaded the FR3's truth (fr3_joint* names)
    and exited at start with a config error; each robot has its own now."""
    import mujoco

    from simops_core.robot_spec import load_robot_spec
    from simops_core.sim_params import load_sim_params
    from simops_sim.physics import Physics

    standin = by_name(build_graph('real_robot', {'standin': 'true', 'robot': robot}))['standin']
    values = params(standin)
    truth = load_sim_params(values['sim_params_file'])
    model = mujoco.MjModel.from_xml_path(str(resolve_resource(values['model'])))
    physics = Physics(model, load_robot_spec(robot), params=truth)
    assert physics.params.command_delay and physics.params.command_delay > 0


def test_the_object_pose_comes_from_a_remappable_topic_on_the_real_arm() -> None:
    nodes = by_name(build_graph('real_robot', {'object_pose_topic': '/mocap/cube',
                                               'standin': 'true'}))
    for name in ('standin', 'policy', 'recorder'):
        assert ('/object_pose', '/mocap/cube') in nodes[name].remappings, name
    default = by_name(build_graph('real_robot', {}))
    assert all(rule[0] != '/object_pose' for rule in default['policy'].remappings)


def test_the_real_arm_runs_only_promoted_policies_unless_told_otherwise() -> None:
    """real_robot's policy requires a promotion record for the arm's calibration; the sim
    profile runs anything (that is where validation happens)."""
    real = params(by_name(build_graph('real_robot'))['policy'])
    assert real['require_promotion'] is True and real['calibration'] == ''
    assert real['allow_unvalidated'] is False
    chosen = params(by_name(build_graph('real_robot', {
        'calibration': 'fit.yaml', 'allow_unvalidated': 'true'}))['policy'])
    assert chosen['calibration'] == 'fit.yaml' and chosen['allow_unvalidated'] is True
    recorder = params(by_name(build_graph('real_robot', {'allow_unvalidated': 'true'}))[
        'recorder'])
    assert recorder['allow_unvalidated'] is True   # and so in every bag's metadata
    assert 'require_promotion' not in params(by_name(build_graph('sim'))['policy'])


@pytest.mark.parametrize('profile', ['sim', 'real_robot'])
def test_teleop_replaces_the_policy_with_the_teleop_node_for_its_device(profile: str) -> None:
    """teleop:=<device>: one node commands the arm, set up for the device; none: the policy."""
    assert 'policy' in by_name(build_graph(profile, {'teleop': 'none'}))
    spacemouse = build_graph(profile, {'teleop': 'spacemouse'})
    names = by_name(spacemouse)
    assert 'policy' not in names
    teleop = names['teleop']
    assert (teleop.package, teleop.executable) == ('simops_teleop', 'teleop')
    values = params(teleop)
    assert values['joy_layout'] == 'spacenav' and values['deadman_button'] == 0
    assert ('/joy', '/spacenav/joy') in teleop.remappings
    assert values['start_enabled'] is (profile == 'sim')
    gamepad = params(by_name(build_graph(profile, {'teleop': 'gamepad'}))['teleop'])
    assert gamepad['joy_layout'] == 'gamepad' and gamepad['deadman_button'] == 4
    keyboard = by_name(build_graph(profile, {'teleop': 'keyboard'}))['teleop']
    assert params(keyboard)['deadman_button'] == -1
    assert not any(src == '/joy' for src, _ in keyboard.remappings)
    expected = 'float64_array' if profile == 'sim' else 'joint_trajectory'
    assert values['command_interface'] == expected
    recorder = params(by_name(build_graph(profile, {'teleop': 'gamepad', 'record': 'true',
                                                    'task': 'pick_place'}))['recorder'])
    assert recorder['source'] == 'teleop' and recorder['task'] == 'pick_place'
    assert 'source' not in params(by_name(build_graph(profile, {'record': 'true'}))['recorder'])
