"""The policy card's camera images, polled at the control tick (rclpy wiring).

Each image term's topic is a polled subscription (:mod:`simops_ros.polled`), like the joint
states: the tick takes the newest image, decodes it into the term's model input
(:meth:`simops_policy.inputs.PolicyInputs.image`), and asks whether every image is fresh.
"""

from __future__ import annotations

import time

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import Image

from simops_core.policy_card import ImageTerm
from simops_core.topics import load_qos
from simops_policy.inputs import PolicyInputs
from simops_ros.polled import Polled, never_called
from simops_ros.qos import qos_from_spec


class ImageFeeds:
    """The newest image of each of ``terms``, read into ``inputs``' image buffers."""

    def __init__(self, node: Node, terms: tuple[ImageTerm, ...], inputs: PolicyInputs,
                 group: CallbackGroup) -> None:
        qos = qos_from_spec(load_qos('image'))
        self.terms, self._inputs = terms, inputs
        self._feeds = [Polled(node.create_subscription(Image, term.topic, never_called, qos,
                                                       raw=True, callback_group=group))
                       for term in terms]

    def take(self) -> list[tuple[str, str]]:
        """Read the images that arrived since the last tick; (topic, problem) of bad ones.

        A bad image counts as none: the arm holds until a good one comes.
        """
        problems = []
        for index, (term, feed) in enumerate(zip(self.terms, self._feeds, strict=True)):
            if not feed.take_newest():
                continue
            problem = feed.read(lambda msg, i=index: self._inputs.image(i, msg))
            if problem is not None:
                feed.received_ns = 0
                problems.append((term.topic, problem))
        return problems

    def not_ready(self) -> tuple[str, bool]:
        """Why the images are not ready ('' when they are), and whether one is stale."""
        now = time.time_ns()
        for term, feed in zip(self.terms, self._feeds, strict=True):
            if not feed.received_ns:
                return f'waiting for {term.topic}', False
            age = 1e-9 * (now - feed.received_ns)
            if age > term.max_age:
                return f'stale {term.topic} ({age:.3f} s old, max_age {term.max_age:g} s)', True
        return '', False
