"""Build script for the simops_sim ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_sim'

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
        "MuJoCo simulator node that presents the real Franka arm's topics, sim time, "
        "reset and fitted physics."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'sim = simops_sim:run_sim',
        ],
    },
)
