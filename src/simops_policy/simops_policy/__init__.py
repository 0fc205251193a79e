"""SimOps policy: a TorchScript policy at 20 Hz behind a safety layer.

The safety layer keeps every command inside the arm's limits.
"""
