"""SimOps core: pure Python, no rclpy.

Robot spec, observation/action spec, safety filter, signal filters, bag reading and
parameter-file I/O. Nodes wire ROS I/O to these modules.
"""
