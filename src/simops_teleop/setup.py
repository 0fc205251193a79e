"""Build script for the simops_teleop ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_teleop'

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
        'Teleoperation: Cartesian and joint velocity commands turned into safe joint targets, '
        'as moveit_servo servoes an arm.'
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'teleop = simops_teleop:run_teleop',
            'simops-teleop-keyboard = simops_teleop:run_teleop_keyboard',
            'simops-teleop-spacemouse = simops_teleop:run_teleop_spacemouse',
        ],
    },
)
