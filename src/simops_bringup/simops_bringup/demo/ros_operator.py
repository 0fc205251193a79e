"""The demo's operator: an rclpy node that does what a person at the arm would do.

It calls the recorder's ``~/start``/``~/stop`` and the policy's and excite's ``~/enable``,
publishes goals on /goal_pose and watches /policy/state, /ee_pose (100 Hz) and /object_pose
(50 Hz); it leaves the 1 kHz joint states alone, to keep the CPU for the stand-in's
real-time physics. Topic names come from config/topics.yaml, node names are the bringup
graph's. The caller must have put the isolated DDS environment into ``os.environ`` before
creating it.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.qos import QoSProfile
from std_msgs.msg import String
from std_srvs.srv import SetBool, Trigger

from simops_core.topics import load_topics
from simops_core.waiting import wait_until
from simops_ros.background import BackgroundNode
from simops_ros.qos import qos_profile

SERVICE_TIMEOUT = 30.0  # s for a service to appear and answer
RECORDER = '/recorder'  # node names of the bringup graph (simops_bringup.graph)
POLICY = '/policy'
EXCITE = '/excite'


class OperatorError(RuntimeError):
    """A service is missing or refused, or the graph did not reach an expected state."""


class Operator(BackgroundNode):
    """See the module docstring. Close it with :meth:`close`."""

    def __init__(self, base_frame: str) -> None:
        topics = load_topics()
        self.base_frame = base_frame
        self._lock = threading.Lock()
        self.state = ''
        self.ee: np.ndarray | None = None
        self.object: np.ndarray | None = None
        super().__init__('simops_demo_operator')

        def qos(key: str) -> QoSProfile:
            return qos_profile(topics[key])

        node = self.node
        node.create_subscription(String, topics['policy_state'].name, self._on_state,
                                 qos('policy_state'))
        node.create_subscription(PoseStamped, topics['ee_pose'].name, self._on_ee, qos('ee_pose'))
        node.create_subscription(PoseStamped, topics['object_pose'].name, self._on_object,
                                 qos('object_pose'))
        self._goal = node.create_publisher(PoseStamped, topics['goal_pose'].name,
                                           qos('goal_pose'))
        self._info = node.create_publisher(String, f'{RECORDER}/episode_info', 10)

    def _on_state(self, msg: String) -> None:
        with self._lock:
            self.state = msg.data

    def _on_ee(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        with self._lock:
            self.ee = np.array([p.x, p.y, p.z])

    def _on_object(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        with self._lock:
            self.object = np.array([p.x, p.y, p.z])

    # --- services ------------------------------------------------------------------------

    def call(self, kind: type, service: str, request: object) -> object:
        """Call ``service`` of type ``kind`` with ``request``; its response, if it succeeded.

        Raises :class:`OperatorError` when the service does not appear or answer within
        the service timeout, or refuses (``success`` false).
        """
        client = self.node.create_client(kind, service)
        try:
            if not client.wait_for_service(timeout_sec=SERVICE_TIMEOUT):
                raise OperatorError(f'service {service} did not appear within '
                                    f'{SERVICE_TIMEOUT:.0f} s')
            future = client.call_async(request)
            if not wait_until(future.done, SERVICE_TIMEOUT):
                raise OperatorError(f'service {service} did not answer')
            response = future.result()
        finally:
            self.node.destroy_client(client)
        if not response.success:
            raise OperatorError(f'{service} refused: {response.message}')
        return response

    def start_recording(self, label: str) -> str:
        """Open a recorder episode labelled ``label``; return its bag directory."""
        if not wait_until(lambda: self._info.get_subscription_count() > 0, SERVICE_TIMEOUT):
            raise OperatorError(f'the recorder does not listen on {RECORDER}/episode_info')
        self._info.publish(String(data=json.dumps({'label': label})))
        time.sleep(0.2)  # the label reaches the recorder before the start request
        return self.call(Trigger, f'{RECORDER}/start', Trigger.Request()).message

    def report_outcome(self, success: bool, notes: str) -> None:
        """Label the open episode's outcome on the recorder's ``~/episode_info``."""
        self._info.publish(String(data=json.dumps({'success': success, 'notes': notes})))
        time.sleep(0.2)  # the outcome reaches the recorder before the stop request

    def stop_recording(self) -> str:
        """Finish the open episode; return its bag directory."""
        return self.call(Trigger, f'{RECORDER}/stop', Trigger.Request()).message

    def enable(self, on: bool, node: str = POLICY) -> None:
        """Call ``node``'s ``~/enable`` (the policy's by default)."""
        self.call(SetBool, f'{node}/enable', SetBool.Request(data=on))

    # --- topics --------------------------------------------------------------------------

    def publish_goal(self, position: np.ndarray) -> None:
        """Publish a goal position (m) in the robot's base frame."""
        msg = PoseStamped()
        msg.header.frame_id = self.base_frame
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
        msg.pose.orientation.w = 1.0
        self._goal.publish(msg)

    def wait_for_arm(self, timeout: float) -> bool:
        """Wait until the arm publishes its flange pose and the policy its state."""
        return wait_until(lambda: self.ee is not None and bool(self.state), timeout)

    def wait_state(self, state: str, timeout: float) -> bool:
        """Wait until the policy's state is ``state``."""
        return wait_until(lambda: self.state == state, timeout)

    def distance(self, goal: np.ndarray, what: str = 'ee') -> float:
        """Current distance (m) to ``goal``; inf before the first pose.

        Of the flange (``what`` ``ee``) or of the object (``object``).
        """
        with self._lock:
            pose = self.ee if what == 'ee' else self.object
        return float('inf') if pose is None else float(np.linalg.norm(pose - goal))
