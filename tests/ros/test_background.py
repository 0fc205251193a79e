"""A background node holds its spinner for entity creation, so an action client is safe to make.

rclpy registers an ``ActionClient`` with its node before the client has its ``_lock``; a
spinner that builds a wait set meanwhile dies on ``AttributeError`` (ros2/rclpy#1589). Here
the bare race killed the spinner after 170-395 clients (4 runs), too rare to test by
repetition, so the test checks the hold itself: no callback runs inside ``paused()``.
"""

from __future__ import annotations

import time

from ros_helpers import RosProbe
from std_msgs.msg import String

from simops_core.waiting import wait_until


def test_a_pause_holds_callbacks_until_it_ends(ros_probe: RosProbe) -> None:
    ros_probe.subscribe('/background_probe', String)
    publisher = ros_probe.publisher('/background_probe', String)
    assert wait_until(lambda: publisher.get_subscription_count() > 0, 10)
    with ros_probe.paused():
        publisher.publish(String(data='held'))
        time.sleep(0.3)
        assert ros_probe.messages('/background_probe') == []
    assert wait_until(lambda: len(ros_probe.messages('/background_probe')) == 1, 5)

