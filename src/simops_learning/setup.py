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
            'simops-train = simops_learning:run_train',
            'simops-validate = simops_learning:run_validate',
            'simops-promote = simops_learning:run_promote',
            'simops-dataset = simops_learning:run_dataset',
            'dataset = simops_learning:run_dataset',
            'simops-rollout = simops_learning:run_rollout',
        ],
    },
)
