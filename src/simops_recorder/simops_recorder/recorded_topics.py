"""What the recorder records by default: the arm's, the policy's and the cameras' topics.

Names come from config/topics.yaml and config/cameras.yaml (no rclpy); the node resolves
them through its remappings.
"""

from __future__ import annotations

from simops_core.camera_rig import CameraConfigError, load_cameras
from simops_core.command_line import ConfigError
from simops_core.topics import TopicConfigError, TopicSpec, load_topics

DEFAULT_TOPIC_KEYS = ('joint_states', 'joint_commands', 'joint_trajectory', 'object_pose',
                      'goal_pose', 'ee_pose', 'policy_action', 'policy_state', 'diagnostics')


def topic_config() -> dict[str, TopicSpec]:
    """config/topics.yaml; :class:`ConfigError` (one line) when it is broken."""
    try:
        return load_topics()
    except TopicConfigError as exc:
        raise ConfigError(f'{exc}; restore config/topics.yaml') from None


def default_topics(topics: dict[str, TopicSpec]) -> list[str]:
    """The :data:`DEFAULT_TOPIC_KEYS` topics, then every camera's four topics."""
    try:
        rig = load_cameras()
    except CameraConfigError as exc:
        raise ConfigError(f'{exc}; fix config/cameras.yaml') from None
    cameras = [name for camera in rig.cameras for name in rig.topics(camera).all()]
    return [topics[key].name for key in DEFAULT_TOPIC_KEYS] + cameras
