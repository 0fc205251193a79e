"""System identification: fit the simulator's physics to recorded bags; excite the arm safely."""
