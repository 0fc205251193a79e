"""Build script for the simops_sysid ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_sysid'

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
        "System identification: fit the simulator's physics to recorded bags; excite the "
        "arm safely."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'fit = simops_sysid:run_fit',
            'excite = simops_sysid:run_excite',
            'fit-fleet = simops_sysid:run_fit_fleet',
        ],
    },
)
