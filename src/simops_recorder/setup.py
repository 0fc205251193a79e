"""Build script for the simops_recorder ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_recorder'

setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='SimOps maintainers',
    maintainer_email='simops-maintainers@users.noreply.github.com',
    description=(
        "Episode recorder: rosbag2 (MCAP) recording of real and simulated trajectories "
        "with episode metadata."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'record = simops_recorder:run_record',
            'repair = simops_recorder:run_repair',
        ],
    },
)
