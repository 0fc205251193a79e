"""SimOps simulator: MuJoCo behind the real Franka arm's topics, with sim time and reset."""
