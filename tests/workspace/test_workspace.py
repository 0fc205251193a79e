"""Workspace structure: every package declares what its code imports; core stays rclpy-free."""

from __future__ import annotations

import ast
import sys
import xml.etree.ElementTree as ET

import pytest
from ros_helpers import REPO

PACKAGES = sorted(p.name for p in (REPO / 'src').iterdir() if (p / 'package.xml').is_file())
EXPECTED = ['simops_bringup', 'simops_core', 'simops_learning', 'simops_policy',
            'simops_recorder', 'simops_ros', 'simops_sim', 'simops_sysid', 'simops_teleop']

# Python module -> rosdep key that provides it.
ROSDEP_KEYS = {
    'numpy': 'python3-numpy', 'yaml': 'python3-yaml', 'scipy': 'python3-scipy',
    'matplotlib': 'python3-matplotlib', 'launch': 'launch', 'launch_ros': 'launch_ros',
    'ament_index_python': 'ament_index_python', 'pandas': 'python3-pandas',
    'av': 'python3-av',
}
ROS_PACKAGES = {'rclpy', 'sensor_msgs', 'geometry_msgs', 'std_msgs', 'std_srvs',
                'trajectory_msgs', 'rosgraph_msgs', 'diagnostic_msgs', 'builtin_interfaces',
                'rosidl_runtime_py', 'rcl_interfaces', 'control_msgs', 'franka_msgs',
                'controller_manager_msgs', 'lifecycle_msgs', 'action_msgs', 'rosidl_parser'}
# Python module -> PyPI distribution in requirements-python.txt (no rosdep key exists).
PIP_ONLY = {'mujoco': 'mujoco', 'torch': 'torch', 'rosbags': 'rosbags',
            'gymnasium': 'gymnasium', 'mcap': 'mcap', 'mcap_ros2': 'mcap-ros2-support',
            'rsl_rl': 'rsl-rl-lib', 'tensordict': 'tensordict', 'pyarrow': 'pyarrow',
            'ray': 'ray', 'pyspacemouse': 'pyspacemouse', 'easyhid': 'easyhid',
            'torchvision': 'torchvision', 'lerobot': 'lerobot'}
# The files that pin them: LeRobot's loader and lerobot itself (installed without its own
# pins, which would replace the CPU torch) have files of their own; `make` installs all.
PINNED_IN = ('requirements-python.txt', 'requirements-lerobot.txt', 'requirements-nodeps.txt')


def imported_modules(package: str) -> set[str]:
    modules = set()
    for path in (REPO / 'src' / package / package).rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split('.')[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split('.')[0])
    return modules - set(sys.stdlib_module_names) - {'__future__'}


def test_all_packages_present() -> None:
    assert PACKAGES == EXPECTED


@pytest.mark.parametrize('package', EXPECTED)
def test_package_manifest(package: str) -> None:
    root = REPO / 'src' / package
    manifest = ET.parse(root / 'package.xml').getroot()
    assert manifest.get('format') == '3'
    assert manifest.findtext('name') == package
    assert manifest.findtext('export/build_type') == 'ament_python'
    assert (root / 'resource' / package).is_file()
    assert f'script_dir=$base/lib/{package}' in (root / 'setup.cfg').read_text()
    assert f"PACKAGE = '{package}'" in (root / 'setup.py').read_text()

    depends = {e.text for e in manifest.iter('exec_depend')} | {
        e.text for e in manifest.iter('depend')}
    requirements = '\n'.join((REPO / name).read_text() for name in PINNED_IN)
    for module in imported_modules(package) - {package}:
        if module in PIP_ONLY:
            assert f'\n{PIP_ONLY[module]}' in requirements, f'{package}: {module} not pinned'
        elif module in ROS_PACKAGES or module.startswith('simops_'):
            assert module in depends, f'{package} imports {module} without exec_depend'
        else:
            assert module in ROSDEP_KEYS, f'{package}: no rosdep key known for {module}'
            assert ROSDEP_KEYS[module] in depends, f'{package}: exec_depend {ROSDEP_KEYS[module]}'


def test_core_never_imports_rclpy() -> None:
    assert not imported_modules('simops_core') & ROS_PACKAGES


def test_colcon_installed_shared_resources() -> None:
    """`make test` runs colcon build first; config and models land in bringup's share."""
    share = REPO / 'install/simops_bringup/share/simops_bringup'
    for rel in ('config/robot/fr3.yaml', 'config/robot/panda.yaml', 'config/topics.yaml',
                'config/dds/fastdds_loopback.xml', 'models/fr3/scene.xml', 'package.xml'):
        assert (share / rel).is_file(), f'{rel} not installed; run `make build`'
    assert (REPO / 'install/simops_core/share/ament_index/resource_index/packages'
            / 'simops_core').is_file()
