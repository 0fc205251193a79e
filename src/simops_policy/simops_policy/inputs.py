"""Reading measured joint states and poses into a policy step's observation (no rclpy).

Messages are read by attribute (``sensor_msgs/JointState``, ``geometry_msgs/PoseStamped``),
so an rclpy message and one decoded from a bag both work. A bad message yields a one-line
problem and leaves nothing half-written that the policy would read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simops_core.observation import JointIndex, MissingJointError
from simops_core.policy_step import PolicyStep
from simops_core.robot_spec import gripper_width

FINGER_SOURCES = frozenset({'gripper_width'})
OBJECT_SOURCES = frozenset({'object_position', 'object_quaternion'})


class PolicyInputs:
    """Fills ``step.raw`` from the joint states and poses the step's card needs."""

    def __init__(self, step: PolicyStep) -> None:
        self.step = step
        spec, card = step.spec, step.card
        self._arm = JointIndex(spec.arm_joints)
        self._fingers = JointIndex(spec.gripper.joints)
        used = {name for term in card.terms if term.source.startswith('joint_')
                for name in term.fields}
        sources = step.builder.sources
        self.needs_fingers = bool(card.action.gripper or sources & FINGER_SOURCES
                                  or used & set(spec.gripper.joints))
        self.needs_velocity = 'joint_velocity' in sources
        self.needs_object = bool(sources & OBJECT_SOURCES)
        self.needs_goal = 'goal_position' in sources

    def missing(self, have_object: bool, have_goal: bool) -> str:
        """The topic key (``object_pose``, ``goal_pose``) the card needs and lacks, or ''."""
        if self.needs_object and not have_object:
            return 'object_pose'
        return 'goal_pose' if self.needs_goal and not have_goal else ''

    def joint_state(self, msg: Any) -> str | None:
        """Fill the observation's joint position and velocity (n,) from ``msg``, or a problem."""
        obs = self.step.raw
        arm = len(self.step.spec.arm_joints)
        try:
            self._arm.select(msg.name, msg.position, obs.joint_position[:arm])
            if self.needs_fingers:
                self._fingers.select(msg.name, msg.position, obs.joint_position[arm:])
            if len(msg.velocity):
                self._arm.select(msg.name, msg.velocity, obs.joint_velocity[:arm])
                if self.needs_fingers:
                    self._fingers.select(msg.name, msg.velocity, obs.joint_velocity[arm:])
            elif self.needs_velocity:
                return 'no velocities, and the card observes joint_velocity'
        except MissingJointError as exc:
            return f'no value for joint {exc.args[0]}'
        if not (np.all(np.isfinite(obs.joint_position))
                and np.all(np.isfinite(obs.joint_velocity))):
            return 'non-finite position or velocity'
        return None

    def gripper_width(self) -> float:
        """The measured finger opening (m), or the spec's home width when not measured."""
        arm = len(self.step.spec.arm_joints)
        if self.needs_fingers:
            return float(gripper_width(self.step.raw.joint_position[arm:]))
        return self.step.spec.gripper.home_width

    def image(self, index: int, msg: Any) -> str | None:
        """Fill image term ``index``'s model input from ``msg`` (``sensor_msgs/Image``).

        Returns why it cannot (not rgb8, or a size its data does not hold), or None.
        """
        if msg.encoding != 'rgb8':
            return f'encoding {msg.encoding!r}, the card takes rgb8'
        height, width, step = int(msg.height), int(msg.width), int(msg.step)
        data = np.frombuffer(msg.data, dtype=np.uint8)
        if height < 1 or width < 1 or step < 3 * width or data.size < step * height:
            return (f'{width}x{height} image with step {step} in {data.size} bytes')
        pixels = data[:step * height].reshape(height, step)[:, :3 * width]
        self.step.builder.images.set(index, pixels.reshape(height, width, 3))
        return None

    def pose(self, msg: Any) -> tuple[np.ndarray, np.ndarray] | str:
        """Position (3,) m and quaternion (4,) x-y-z-w of a base-frame pose, or a problem."""
        p, o = msg.pose.position, msg.pose.orientation
        position = np.array([p.x, p.y, p.z])
        quaternion = np.array([o.x, o.y, o.z, o.w])
        frame = msg.header.frame_id
        base = self.step.spec.base_frame
        if not (np.all(np.isfinite(position)) and np.all(np.isfinite(quaternion))):
            return 'non-finite pose'
        if frame and frame != base:
            return f'frame {frame!r} is not {base!r}'
        return position, quaternion
