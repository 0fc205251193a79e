"""Teleoperation: drive the arm from velocity commands, as moveit_servo does."""
