"""Gymnasium environment, training and export of the default policy, and the validation gate."""
