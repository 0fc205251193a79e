"""What the recorder records by default: the arm's, the policy's and the cameras' topics.

Names come from config/topics.yaml and config/cameras.yaml (no rclpy); the node resolves
them through its remappings.
"""

from __future__ import annotations

from simops_core.camera_rig import load_cameras
from simops_core.topics import TopicSpec

DEFAULT_TOPIC_KEYS = ('joint_states', 'joint_commands', 'joint_trajectory', 'object_pose',
                      'goal_pose', 'ee_pose', 'policy_action', 'policy_state', 'diagnostics',
                      'operator_twist', 'gripper_command')


def default_topics(topics: dict[str, TopicSpec]) -> list[str]:
    """The :data:`DEFAULT_TOPIC_KEYS` topics, then every camera's four topics."""
    rig = load_cameras()
    cameras = [name for camera in rig.cameras for name in rig.topics(camera).all()]
    return [topics[key].name for key in DEFAULT_TOPIC_KEYS] + cameras
