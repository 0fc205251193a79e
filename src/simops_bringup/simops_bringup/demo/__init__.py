"""``simops-demo`` (README command 1): the SimOps loop against the stand-in robot.

:mod:`.cli` is the entry point, :mod:`.loop` the four steps, :mod:`.steps` the process
plumbing, :mod:`.summary` and :mod:`.plots` what is reported. :mod:`.ros_operator` is the
only rclpy code of simops_bringup: the demo acts on the running graph (services, goals)
the way a person at the arm would; the graph, runner and launch modules stay rclpy-free.
"""
