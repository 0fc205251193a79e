"""rclpy-side helpers shared by the SimOps nodes (the functional core is simops_core)."""
