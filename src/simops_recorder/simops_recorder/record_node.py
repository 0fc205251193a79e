"""``ros2 run simops_recorder record``: lossless episode recording to rosbag2 (node ``recorder``).

The node only wires ROS I/O: raw (CDR) subscriptions whose QoS is adapted to the
publishers' offers, the ~/start, ~/stop and ~/discard services, ~/episode_info, and the
policy state in ``auto`` mode. Episodes and their bags are
:class:`simops_recorder.episode_bags.EpisodeBags` (over
:class:`simops_recorder.bag_writer.BagWriter`). Parameters:
``config/parameters/recorder.yaml`` (table in docs/interfaces.md).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import rclpy
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rosbags.typesys import Stores, get_typestore
from std_msgs.msg import String
from std_srvs.srv import Trigger

from simops_core.topics import load_topics
from simops_recorder.auto_mode import Action, AutoEpisodes
from simops_recorder.episode import EpisodeInfoError
from simops_recorder.episode_bags import RecordedTopic, episode_bags
from simops_recorder.offers import latched, message_class, recording_qos, stored_topic
from simops_recorder.recorded_topics import default_topics
from simops_ros.declarations import declare_schema
from simops_ros.polled import take_all
from simops_ros.qos import subscription_qos
from simops_ros.rclpy_compat import MessageInfo, publication
from simops_ros.scaffold import run_node
from simops_ros.spinning import spin_until_signal

NODE = 'recorder'
RUNNING = 'RUNNING'
DISCOVERY_PERIOD = 0.25  # s between graph checks for topics that appear later
# Recorded topics are drained in batches every DRAIN_PERIOD s (take_message returns the
# CDR bytes and the MessageInfo with the publication sequence number) instead of one
# callback per message. bench/recorder.py --executors measures the options at 1 kHz on
# 2 shared cores: per-message two-argument callbacks on SingleThreadedExecutor ~25-50% of a
# core; EventsExecutor (rclpy 9.1.2) raises SystemError for any two-argument callback and
# its spin() runs no timers; one-argument raw callbacks on it (~10%) lose the sequence
# numbers; the batch drain costs ~12% on SingleThreadedExecutor and ~7% on EventsExecutor
# driven by spin_once, which is what main() uses.
DRAIN_PERIOD = 0.01  # s
AUTO_POLL_PERIOD = 0.1   # s between checks of the auto mode's grace period


class Recorder(Node):
    """Records the configured topics into one rosbag2 bag per episode."""

    def __init__(self) -> None:
        super().__init__(NODE)
        topics = load_topics()
        p = self.settings = declare_schema(self, NODE, {'topics': default_topics(topics)},
                                           self._set_live)
        self.bags = episode_bags(p, self._log, self.resolve_topic_name)
        # Resolve through this node's remappings, like every other node's topics: with
        # -r /joint_states:=/franka/joint_states the bag holds what is on the wire.
        self.wanted = list(dict.fromkeys(self.resolve_topic_name(t) for t in p.topics))
        self.typestore = get_typestore(Stores.ROS2_JAZZY)
        self.recorded: dict[str, RecordedTopic] = {}
        self.skipped: set[str] = set()
        self.bad_info = 0

        self.create_service(Trigger, '~/start', self._on_start)
        self.create_service(Trigger, '~/stop', self._on_stop)
        self.create_service(Trigger, '~/discard', self._on_discard)
        self.create_subscription(String, '~/episode_info', self._on_episode_info, 10)
        self.auto = AutoEpisodes(p.auto_stop_grace, p.auto_min_duration)
        self._policy_state = ''
        if p.mode == 'auto':
            state = topics['policy_state']
            self.create_subscription(String, state.name, self._on_policy_state,
                                     subscription_qos(state))
            self.create_timer(AUTO_POLL_PERIOD, self._poll_auto)
        # Raw subscriptions live on a node that no executor spins; _drain takes from them. It
        # ignores the command line's remappings, so a renamed recorder keeps one node name.
        self.io_node = rclpy.create_node(f'{self.get_name()}_io', context=self.context,
                                         namespace=self.get_namespace(),
                                         use_global_arguments=False, enable_rosout=False)
        self.create_timer(DISCOVERY_PERIOD, self._discover)
        self.create_timer(DRAIN_PERIOD, self._drain)
        self.create_timer(p.flush_period, self._flush)
        self._discover()
        if p.mode == 'continuous':
            self.start_episode()
        self.get_logger().info(
            f'recording {len(self.wanted)} topics to {self.bags.root} ({p.storage}, '
            f'compression {p.compression}, mode {p.mode})')

    # -- configuration ----------------------------------------------------------------------

    def _set_live(self, name: str, value: Any) -> None:
        if name in ('auto_stop_grace', 'auto_min_duration'):
            setattr(self.auto, {'auto_stop_grace': 'grace'}.get(name, 'min_duration'), value)
        else:  # robot, robot_mode, policy_sha256, ...: the metadata of the next episode
            self.bags.identity = replace(self.bags.identity, **{name: value})
        self.get_logger().info(f'{name} set to {value!r}')

    def stop(self) -> None:
        """Finish the open episode and destroy the raw-subscription node."""
        self.stop_episode('shutdown')
        self.io_node.destroy_node()

    def _log(self, level: str, text: str) -> None:
        logger = self.get_logger()   # one call site per severity, as rclpy requires
        if level == 'error':
            logger.error(text)
        elif level == 'warning':
            logger.warning(text)
        else:
            logger.info(text)

    # -- subscriptions ----------------------------------------------------------------------

    def _discover(self) -> None:
        """Subscribe to wanted topics that now have publishers, matching their QoS."""
        for name in self.wanted:
            offers = [] if name in self.recorded or name in self.skipped else (
                self.get_publishers_info_by_topic(name))
            if not offers:
                continue
            spec = stored_topic(self.typestore, name, offers)
            if isinstance(spec, str):
                self.skipped.add(name)
                self.get_logger().error(f'not recording {name}: {spec}')
                continue
            qos = recording_qos(offers)
            record = self.recorded[name] = RecordedTopic(spec, latched(offers))
            record.subscription = self.io_node.create_subscription(
                message_class(spec.type), name, self._never_called, qos, raw=True)
            self.get_logger().info(f'subscribed to {name} ({spec.type}, '
                                   f'{qos.reliability.name.lower()}, '
                                   f'{qos.durability.name.lower()})')
            self.bags.add_late(record)

    @staticmethod
    def _never_called(data: bytes, info: MessageInfo) -> None:
        """Callback of the drained subscriptions (two arguments: take MessageInfo too)."""

    def _drain(self) -> None:
        """Take every queued message of every recorded topic (raw CDR + MessageInfo)."""
        for record in list(self.recorded.values()):
            sub = record.subscription
            if sub is None:
                continue
            for data, info in take_all(sub):
                self.bags.write(record, info['received_timestamp'], data,
                                *publication(info, sub.get_publisher_count),
                                info.get('source_timestamp'))

    # -- episodes ---------------------------------------------------------------------------

    def start_episode(self) -> tuple[bool, str]:
        """Open a new bag; return (ok, bag path or reason)."""
        return self.bags.start(self.recorded.values())

    def stop_episode(self, reason: str) -> tuple[bool, str]:
        """Finish the open bag (metadata.yaml with the episode metadata).

        What DDS has delivered up to the stop is taken first, so a stop (service, auto mode,
        SIGINT) never loses the messages that arrived since the last drain.
        """
        if self.bags.writer is not None:
            self._drain()
        return self.bags.stop(reason)

    def _flush(self) -> None:
        if self.bags.writer is not None:
            self._drain()  # what DDS has delivered so far is inside the flush
            self.bags.flush()

    # -- ROS interface callbacks -------------------------------------------------------------

    def _on_start(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self.start_episode()
        return response

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self.stop_episode('stopped')
        return response

    def _on_discard(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        if self.bags.writer is not None:
            self._drain()
        response.success, response.message = self.bags.discard()
        return response

    def _on_episode_info(self, msg: String) -> None:
        episode, pending = self.bags.episode, self.bags.pending_info
        target = episode.info if episode is not None else pending
        try:
            target.update_from_json(msg.data)
        except EpisodeInfoError as exc:
            self.bad_info += 1
            self.get_logger().warning(f'ignored episode_info ({self.bad_info} so far): {exc}')
            return
        if episode is not None:
            pending.label = target.label

    def _on_policy_state(self, msg: String) -> None:
        self._policy_state = msg.data
        self.auto.recording = self.bags.writer is not None
        self._auto_act(self.auto.state(time.monotonic(), msg.data == RUNNING))

    def _poll_auto(self) -> None:
        self.auto.recording = self.bags.writer is not None
        self._auto_act(self.auto.poll(time.monotonic()))

    def _auto_act(self, action: Action) -> None:
        if action is Action.START:
            self.auto.recording = self.start_episode()[0]
        elif action is Action.STOP:
            self.stop_episode(f'policy {self._policy_state}')


def _spin(node: Recorder) -> None:
    """Spin until SIGINT/SIGTERM, noticed at a wait, never inside a write.

    The episode then ends in a valid context (rclpy's handlers would shut it down first).
    EventsExecutor: see DRAIN_PERIOD for the measurements behind this choice.
    """
    spin_until_signal(EventsExecutor(), node)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run simops_recorder record``: 0 when stopped, 2 on bad config."""
    return run_node('record', 'Record episodes of the configured topics to rosbag2 (MCAP or '
                    'sqlite3), one bag per episode.', Recorder, args, spin=_spin,
                    signals=SignalHandlerOptions.NO, polled_clock=False)
