"""Build script for the simops_learning ament_python package."""

from setuptools import find_packages, setup

PACKAGE = 'simops_learning'

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
        "Gymnasium environment, training and export of the default policy, and the "
        "validation gate."
    ),
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'simops-train = simops_learning.train:main',
            'simops-validate = simops_learning.validate:main',
            'simops-promote = simops_learning.promote:main',
            'simops-dataset = simops_learning.dataset_cli:cli',
            'dataset = simops_learning.dataset_cli:cli',
            'simops-rollout = simops_learning.rollout_cli:cli',
        ],
    },
)
