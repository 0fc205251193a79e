"""Build script for the simops_bringup ament_python package."""

import os
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = 'simops_bringup'

# The workspace's launch/, config/ and models/ folders are the single source of truth; they
# are installed into this package's share directory so that `ros2 launch simops_bringup ...`
# and every node find them by package, as on any ROS 2 machine.
WORKSPACE = Path(__file__).resolve().parents[2]


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """Return data_files entries that mirror ``WORKSPACE/folder`` into share/PACKAGE/folder."""
    entries: dict[str, list[str]] = {}
    for path in sorted((WORKSPACE / folder).rglob('*')):
        if path.is_file() and '__pycache__' not in path.parts:
            rel = path.relative_to(WORKSPACE)
            entries.setdefault(str(Path('share', PACKAGE, rel.parent)), []).append(
                os.path.relpath(path, Path(__file__).resolve().parent))
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
        *tree('launch'),
        *tree('config'),
        *tree('models'),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='SimOps maintainers',
    maintainer_email='simops-maintainers@users.noreply.github.com',
    description=(
        "Launch files, configuration, models and the node graph shared by the launch "
        "files and the runner."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'simops-demo = simops_bringup:run_demo',
            'simops-launch = simops_bringup:run_launch',
            'simops-recover = simops_bringup:run_recover',
            'simops-pipeline = simops_bringup:run_pipeline',
        ],
    },
)
