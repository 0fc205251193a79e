"""Build script for the simops_policy ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_policy'

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
        "TorchScript policy node at 20 Hz behind a safety layer that keeps every command "
        "inside the arm's limits."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'policy = simops_policy:run_policy',
        ],
    },
)
