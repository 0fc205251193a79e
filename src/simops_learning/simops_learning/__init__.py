"""Gymnasium environment, training and export of the default policy, and the validation gate.

Importing the package registers ``SimOps/FR3Reach-v0``; ``gymnasium.make(
'simops_learning:SimOps/FR3Reach-v0')`` imports it on demand.
"""

import gymnasium

from simops_learning.reach_env import ENV_ID

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point='simops_learning.reach_env:FR3ReachEnv')
