"""Gymnasium environments, training and export of the policies, and the validation gate.

Importing the package registers ``SimOps/FR3Reach-v0`` and ``SimOps/FR3PickPlace-v0``;
``gymnasium.make('simops_learning:SimOps/FR3PickPlace-v0')`` imports it on demand.
"""

import gymnasium

from simops_learning.pick_env import ENV_ID as PICK_ENV_ID
from simops_learning.reach_env import ENV_ID

for _id, _entry in ((ENV_ID, 'simops_learning.reach_env:FR3ReachEnv'),
                    (PICK_ENV_ID, 'simops_learning.pick_env:FR3PickPlaceEnv')):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_entry)
