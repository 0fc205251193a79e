"""Build script for the simops_ros ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_ros'

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
        "rclpy-side helpers the SimOps nodes share: parameter descriptors, polled "
        "subscriptions and stamped trajectory commands."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'arm_setup = simops_ros:run_arm_setup',
        ],
    },
)
