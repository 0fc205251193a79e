"""The object pose and the card's camera images, polled at the control tick (rclpy wiring).

Each is a polled subscription (:mod:`simops_ros.polled`), like the joint states: the tick
takes the newest message and reads it into the policy step's inputs
(:class:`simops_policy.inputs.PolicyInputs`: :meth:`~PolicyInputs.pose`,
:meth:`~PolicyInputs.image`); :meth:`SceneFeeds.not_ready` says whether every image is fresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from geometry_msgs.msg import PoseStamped
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image

from simops_core.policy_card import ImageTerm
from simops_core.topics import TopicSpec, load_qos
from simops_policy.inputs import PolicyInputs
from simops_ros.polled import Polled, never_called
from simops_ros.qos import qos_from_spec, subscription_qos


class SceneFeeds:
    """The newest object pose and image of each of ``terms``, read into ``inputs``."""

    def __init__(self, node: Node, topics: Mapping[str, TopicSpec],
                 terms: tuple[ImageTerm, ...], inputs: PolicyInputs,
                 group: CallbackGroup) -> None:
        image_qos = qos_from_spec(load_qos('image'))
        self.terms, self._inputs = terms, inputs
        self.object_topic = topics['object_pose'].name
        self.have_object = False
        self._object = Polled(node.create_subscription(
            PoseStamped, self.object_topic, never_called, subscription_qos(topics['object_pose']),
            raw=True, callback_group=group))
        self._images = [Polled(node.create_subscription(Image, term.topic, never_called,
                                                        image_qos, raw=True,
                                                        callback_group=group))
                        for term in terms]

    def take(self, bad: Callable[[str, str], None]) -> None:
        """Read what arrived since the last tick; ``bad(topic, problem)`` for a bad message.

        A bad image counts as none: the arm holds until a good one comes.
        """
        if self._object.take_newest():
            pose = self._object.read(self._inputs.pose)
            if isinstance(pose, str):
                bad(self.object_topic, pose)
            else:
                raw = self._inputs.step.raw
                raw.object_position[:], raw.object_quaternion[:] = pose
                self.have_object = True
        for index, (term, feed) in enumerate(zip(self.terms, self._images, strict=True)):
            if not feed.take_newest():
                continue
            problem = feed.read(lambda msg, i=index: self._inputs.image(i, msg))
            if problem is not None:
                feed.received_ns = 0
                bad(term.topic, problem)

    def not_ready(self, now: int) -> tuple[str, bool]:
        """Why the images are not ready ('' when they are), and whether one is stale.

        ``now``: ``time.time_ns()`` when the images were taken; ages count to it.
        """
        for term, feed in zip(self.terms, self._images, strict=True):
            if not feed.received_ns:
                return f'waiting for {term.topic}', False
            age = 1e-9 * (now - feed.received_ns)
            if age > term.max_age:
                return f'stale {term.topic} ({age:.3f} s old, max_age {term.max_age:g} s)', True
        return '', False
