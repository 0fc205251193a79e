"""Gymnasium environments, training and export of the policies, and the validation gate.

Importing the package registers ``SimOps/FR3Reach-v0`` and ``SimOps/FR3PickPlace-v0``;
``gymnasium.make('simops_learning:SimOps/FR3PickPlace-v0')`` imports it on demand.
``gymnasium.make_vec(ID, num_envs=N, vectorization_mode='vector_entry_point')`` steps the
N envs' physics together (:mod:`simops_learning.stepped_vector`).
"""

import gymnasium

from simops_learning.pick_env import ENV_ID as PICK_ENV_ID
from simops_learning.reach_env import ENV_ID

for _id, _entry, _vector in (
        (ENV_ID, 'simops_learning.reach_env:FR3ReachEnv',
         'simops_learning.stepped_vector:reach_vector'),
        (PICK_ENV_ID, 'simops_learning.pick_env:FR3PickPlaceEnv',
         'simops_learning.stepped_vector:pick_vector')):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry, vector_entry_point=_vector)
