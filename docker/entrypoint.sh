#!/usr/bin/env bash
# Source ROS 2 and the SimOps workspace, then run the given command.
set -e
source "/opt/ros/${ROS_DISTRO}/setup.bash"
source /simops/install/setup.bash
exec "$@"
