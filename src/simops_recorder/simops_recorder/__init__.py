"""SimOps recorder: rosbag2 (MCAP) episodes of real and simulated trajectories."""
