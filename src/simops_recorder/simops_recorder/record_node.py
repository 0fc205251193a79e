"""``ros2 run simops_recorder record``: lossless episode recording to rosbag2 (node ``recorder``).

The node only wires ROS I/O: raw (CDR) subscriptions whose QoS is adapted to the
publishers' offers, the ~/start and ~/stop services, ~/episode_info, and the policy state in
``auto`` mode. Bags are written by :class:`simops_recorder.bag_writer.BagWriter`, episode
metadata is kept by :mod:`simops_recorder.episode`. See docs/interfaces.md for parameters.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
)
from rclpy.signals import SignalHandlerOptions
from rclpy.subscription import MessageInfo, Subscription
from rclpy.topic_endpoint_info import TopicEndpointInfo
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability
from rosbags.interfaces import QosTime as BagTime
from rosbags.typesys import Stores, get_typestore
from std_msgs.msg import String
from std_srvs.srv import Trigger

from simops_core.command_line import fail
from simops_core.paths import resolve_resource
from simops_core.topics import TopicConfigError, TopicSpec, load_topics
from simops_recorder.auto_mode import Action, AutoEpisodes
from simops_recorder.bag_writer import (
    COMPRESSIONS,
    STORAGES,
    BagWriteError,
    BagWriter,
    SplitPolicy,
    StoredTopic,
)
from simops_recorder.episode import (
    JOURNAL_FILE,
    ROBOT_MODES,
    Episode,
    EpisodeInfo,
    EpisodeInfoError,
    RecorderIdentity,
    episode_dir_name,
    sha256_file,
    utc_now,
)
from simops_ros.declarations import ParameterError, declare_parameters, describe
from simops_ros.node_args import parse_node_args
from simops_ros.scaffold import EXIT_CONFIG, ConfigError

NODE = 'recorder'
DEFAULT_TOPIC_KEYS = ('joint_states', 'joint_commands', 'joint_trajectory', 'object_pose',
                      'goal_pose', 'ee_pose', 'policy_action', 'policy_state', 'diagnostics')
MODES = ('manual', 'auto', 'continuous')
RUNNING = 'RUNNING'
# Reader-side queue: 1 s at 5 kHz. DDS acknowledges into this queue from its own thread, so
# a publisher's shallow keep_last history is not overwritten while Python is busy; only a
# recorder process starved of CPU for longer than the publisher's depth can lose samples,
# and the sequence-gap count reports exactly those.
RECORD_QUEUE_DEPTH = 5000
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
STOP_CHECK_PERIOD = 0.1  # s, longest wait before a SIGINT/SIGTERM is noticed
AUTO_POLL_PERIOD = 0.1   # s between checks of the auto mode's grace period



@dataclass
class _Recorded:
    """A subscribed topic: what is stored for it and its id in the open bag (0: none).

    For latched (transient_local) topics ``last`` keeps the newest message (receive time in
    ns, CDR), so an episode starts with the current goal and policy state, as a
    ``ros2 bag record`` started at that moment would.
    """

    spec: StoredTopic
    latched: bool = False
    bag_id: int = 0
    last: tuple[int, bytes] | None = None
    subscription: Subscription | None = None


class Recorder(Node):
    """Records the configured topics into one rosbag2 bag per episode."""

    def __init__(self) -> None:
        super().__init__(NODE)
        topics = self._topic_config()
        p = self._declare_parameters([topics[k].name for k in DEFAULT_TOPIC_KEYS])
        self.root = self._writable_root(p['root'])
        self.storage = p['storage']
        self.compression = p['compression']
        self.split = SplitPolicy(int(p['split_duration'] * 1e9), p['split_size'])
        self.flush_period = p['flush_period']
        self.mode = p['mode']
        self.identity = RecorderIdentity(p['robot'], p['robot_mode'], p['policy_sha256'],
                                         self._sim_params_hash(p['sim_params_file']))
        # Resolve through this node's remappings, like every other node's topics: with
        # -r /joint_states:=/franka/joint_states the bag holds what is on the wire.
        self.wanted = list(dict.fromkeys(self.resolve_topic_name(t) for t in p['topics']))
        self.typestore = get_typestore(Stores.ROS2_JAZZY)
        self.recorded: dict[str, _Recorded] = {}
        self.skipped: set[str] = set()
        self.writer: BagWriter | None = None
        self.episode: Episode | None = None
        self.pending_info = EpisodeInfo()
        self.bad_info = 0

        self.create_service(Trigger, '~/start', self._on_start)
        self.create_service(Trigger, '~/stop', self._on_stop)
        self.create_subscription(String, '~/episode_info', self._on_episode_info, 10)
        self.auto = AutoEpisodes(p['auto_stop_grace'], p['auto_min_duration'])
        self._policy_state = ''
        if self.mode == 'auto':
            state = topics['policy_state']
            self.create_subscription(String, state.name, self._on_policy_state,
                                     QoSProfile(**state.qos.as_profile_kwargs()))
            self.create_timer(AUTO_POLL_PERIOD, self._poll_auto)
        # Raw subscriptions live on a node that no executor spins; _drain takes from them. It
        # ignores the command line's remappings, so a renamed recorder keeps one node name.
        self.io_node = rclpy.create_node(f'{self.get_name()}_io', context=self.context,
                                         namespace=self.get_namespace(),
                                         use_global_arguments=False, enable_rosout=False)
        self.create_timer(DISCOVERY_PERIOD, self._discover)
        self.create_timer(DRAIN_PERIOD, self._drain)
        self.create_timer(self.flush_period, self._flush)
        self._discover()
        if self.mode == 'continuous':
            self.start_episode()
        self.get_logger().info(
            f'recording {len(self.wanted)} topics to {self.root} ({self.storage}, '
            f'compression {self.compression}, mode {self.mode})')

    # -- configuration ----------------------------------------------------------------------

    def _topic_config(self) -> dict[str, TopicSpec]:
        try:
            return load_topics()
        except TopicConfigError as exc:
            raise ConfigError(f'{exc}; restore config/topics.yaml') from None

    def _declare_parameters(self, default_topics: list[str]) -> dict[str, Any]:
        specs: list[tuple[str, Any, str]] = [
            ('root', 'episodes', 'directory holding one bag directory per episode'),
            ('topics', default_topics, 'topic names to record'),
            ('storage', 'mcap', f'storage plugin: {" or ".join(STORAGES)}'),
            ('compression', 'none', 'none or zstd (MCAP chunk compression)'),
            ('mode', 'manual', 'manual (~/start, ~/stop), auto (while the policy state is '
                               'RUNNING) or continuous'),
            ('split_duration', 0.0, 's of messages per bag file; 0 = no split'),
            ('split_size', 0, 'bytes per bag file; 0 = no split'),
            ('flush_period', 1.0, 's between flushes / commits, in (0, 1]'),
            ('robot', 'fr3', 'robot name written to the episode metadata'),
            ('robot_mode', 'sim', 'sim or real, written to the episode metadata'),
            ('policy_sha256', '', 'policy checksum written to the episode metadata'),
            ('sim_params_file', '', 'SimParams YAML hashed into the episode metadata'),
            ('auto_stop_grace', 1.0, 's out of RUNNING before auto mode closes the episode'),
            ('auto_min_duration', 2.0, 's an auto-mode episode lasts at least'),
        ]
        try:
            values = declare_parameters(self, [(name, default, describe(text))
                                               for name, default, text in specs])
        except ParameterError as exc:
            raise ConfigError(str(exc)) from None
        checks = [
            (values['storage'] in STORAGES, 'storage', f'use one of {STORAGES}'),
            (values['compression'] in COMPRESSIONS, 'compression', f'use one of {COMPRESSIONS}'),
            (values['compression'] == 'none' or values['storage'] == 'mcap', 'compression',
             'zstd needs storage mcap; rosbag2 sqlite3 has no storage-level compression'),
            (values['mode'] in MODES, 'mode', f'use one of {MODES}'),
            (values['split_duration'] >= 0.0, 'split_duration', 'use 0 or a positive duration'),
            (values['split_size'] >= 0, 'split_size', 'use 0 or a positive size in bytes'),
            (0.0 < values['flush_period'] <= 1.0, 'flush_period', 'use a period in (0, 1] s'),
            (values['robot_mode'] in ROBOT_MODES, 'robot_mode', f'use one of {ROBOT_MODES}'),
            (0.0 <= values['auto_stop_grace'] <= 3600.0, 'auto_stop_grace',
             'use a grace period in [0, 3600] s'),
            (0.0 <= values['auto_min_duration'] <= 3600.0, 'auto_min_duration',
             'use a length in [0, 3600] s'),
            (bool(values['topics']) and all(str(t).startswith('/') for t in values['topics']),
             'topics', 'list absolute topic names such as /joint_states'),
        ]
        for ok, name, fix in checks:
            if not ok:
                raise ConfigError(f'parameter {name} is {values[name]!r}; {fix}')
        return values

    @staticmethod
    def _writable_root(root: str) -> Path:
        path = Path(root).expanduser()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f'root {str(path)!r} cannot be created ({exc.strerror}); set '
                              '-p root:=<writable directory>') from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f'root {str(path)!r} is not writable; set '
                              '-p root:=<writable directory> or fix its permissions')
        return path

    @staticmethod
    def _sim_params_hash(path: str) -> str:
        if not path:
            return ''
        try:
            return sha256_file(resolve_resource(path))
        except OSError as exc:
            raise ConfigError(f'sim_params_file {path!r} is unreadable ({exc}); pass an '
                              'existing SimParams YAML or an empty string') from None

    # -- subscriptions ----------------------------------------------------------------------

    def _discover(self) -> None:
        """Subscribe to wanted topics that now have publishers, matching their QoS."""
        for name in self.wanted:
            if name in self.recorded or name in self.skipped:
                continue
            offers = self.get_publishers_info_by_topic(name)
            if not offers:
                continue
            spec = self._topic_spec(name, offers)
            if spec is None:
                continue
            latched = all(o.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                          for o in offers)
            self.recorded[name] = _Recorded(spec, latched)
            self._subscribe(spec, offers)
            if self.writer is not None:
                try:
                    self._add_to_bag(self.recorded[name])
                except BagWriteError as exc:
                    self._fail_episode(exc)

    def _topic_spec(self, name: str, offers: list[TopicEndpointInfo]) -> StoredTopic | None:
        msgtype = offers[0].topic_type
        if msgtype not in self.typestore.fielddefs:
            self.skipped.add(name)
            self.get_logger().error(f'not recording {name}: type {msgtype} has no known '
                                    'message definition')
            return None
        msgdef, _ = self.typestore.generate_msgdef(msgtype, ros_version=2)
        offered_hash = str(offers[0].topic_type_hash)
        type_hash = (offered_hash if offered_hash.startswith('RIHS01_')
                     else self.typestore.hash_rihs01(msgtype))
        return StoredTopic(name, msgtype, msgdef, type_hash,
                           tuple(_bag_qos(o.qos_profile) for o in offers))

    def _subscribe(self, spec: StoredTopic, offers: list[TopicEndpointInfo]) -> None:
        package, _, type_name = spec.type.split('/')
        msg_class = getattr(importlib.import_module(f'{package}.msg'), type_name)
        profiles = [o.qos_profile for o in offers]
        reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in profiles)
        record = self.recorded[spec.name]
        latched = record.latched
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST, depth=RECORD_QUEUE_DEPTH,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)
        record.subscription = self.io_node.create_subscription(
            msg_class, spec.name, self._never_called, qos, raw=True)
        self.get_logger().info(f'subscribed to {spec.name} ({spec.type}, '
                               f'{qos.reliability.name.lower()}, '
                               f'{qos.durability.name.lower()})')

    @staticmethod
    def _never_called(data: bytes, info: MessageInfo) -> None:
        """Callback of the drained subscriptions (two arguments: take MessageInfo too)."""

    def _drain(self) -> None:
        """Take every queued message of every recorded topic (raw CDR + MessageInfo)."""
        for record in list(self.recorded.values()):
            sub = record.subscription
            if sub is None:
                continue
            with sub.handle:
                while (taken := sub.handle.take_message(sub.msg_type, True)) is not None:
                    self._on_message(record, *taken)

    def _on_message(self, record: _Recorded, data: bytes, info: MessageInfo) -> None:
        if record.latched:
            record.last = (info['received_timestamp'], data)
        if self.writer is None or self.episode is None or not record.bag_id:
            return
        gid = info.get('publisher_gid')
        publisher = bytes(gid['data']).hex() if gid else 'unknown'
        self.episode.gaps.observe(record.spec.name, publisher,
                                  info.get('publication_sequence_number'))
        try:
            self.writer.write(record.bag_id, info['received_timestamp'], data)
        except BagWriteError as exc:
            self._fail_episode(exc)

    # -- episodes ---------------------------------------------------------------------------

    def start_episode(self) -> tuple[bool, str]:
        """Open a new bag; return (ok, bag path or reason)."""
        if self.writer is not None:
            return False, f'already recording {self.writer.path}'
        start = utc_now()
        info = EpisodeInfo(self.pending_info.label, None, '')
        path = self.root / episode_dir_name(start, info.label)
        try:
            writer = BagWriter(path, self.storage, self.compression, self.split)
        except BagWriteError as exc:
            self.get_logger().error(f'cannot start an episode: {exc}; make {self.root} '
                                    'writable or set the root parameter')
            return False, str(exc)
        self.writer, self.episode = writer, Episode(self.identity, info, start)
        try:
            for record in self.recorded.values():
                self._add_to_bag(record)
            self._write_journal()
        except BagWriteError as exc:
            self._fail_episode(exc)
            return False, str(exc)
        self.get_logger().info(f'episode started: {path}')
        return True, str(path)

    def stop_episode(self, reason: str) -> tuple[bool, str]:
        """Finish the open bag (metadata.yaml with the episode metadata)."""
        writer, episode = self.writer, self.episode
        if writer is None or episode is None:
            return False, 'not recording'
        self.writer = self.episode = None
        episode.stop, episode.end_reason = utc_now(), reason
        writer.custom_data.update(episode.custom_data(writer.topic_counts))
        try:
            writer.close()
            (writer.path / JOURNAL_FILE).unlink(missing_ok=True)
        except (BagWriteError, OSError) as exc:
            writer.abort()
            self.get_logger().error(f'episode {writer.path} could not be finished: {exc}; run '
                                    f'`ros2 run simops_recorder repair {writer.path}`')
            return False, str(exc)
        lost = episode.gaps.total()
        self.get_logger().info(f'episode stopped ({reason}): {writer.path}, '
                               f'{writer.message_count} messages, {lost} lost on the wire')
        return True, str(writer.path)

    def _fail_episode(self, exc: Exception) -> None:
        """A write failed (disk full, directory gone): close what can be closed, keep going."""
        writer, episode = self.writer, self.episode
        self.writer = self.episode = None
        if writer is None or episode is None:
            return
        episode.stop, episode.end_reason = utc_now(), f'error: {exc}'
        writer.abort()
        self.get_logger().error(f'episode {writer.path} stopped: {exc}; free disk space or fix '
                                f'permissions, then run `ros2 run simops_recorder repair '
                                f'{writer.path}` to keep what was written')

    def _add_to_bag(self, record: _Recorded) -> None:
        assert self.writer is not None
        record.bag_id = self.writer.add_topic(record.spec)
        if record.last is not None:
            self.writer.write(record.bag_id, *record.last)

    def _flush(self) -> None:
        if self.writer is None:
            return
        self._drain()  # what DDS has delivered so far is inside the flush
        if self.writer is None:  # the drain hit a write error
            return
        try:
            self.writer.flush()
            self._write_journal()
        except BagWriteError as exc:
            self._fail_episode(exc)

    def _write_journal(self) -> None:
        """Episode metadata beside the storage, for ``repair`` after a crash."""
        assert self.writer is not None and self.episode is not None
        data = self.episode.custom_data(self.writer.topic_counts)
        try:
            (self.writer.path / JOURNAL_FILE).write_text(json.dumps(data, indent=1))
        except OSError as exc:
            raise BagWriteError(f'cannot write {self.writer.path / JOURNAL_FILE}: '
                                f'{exc.strerror or exc}') from None

    # -- ROS interface callbacks -------------------------------------------------------------

    def _on_start(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self.start_episode()
        return response

    def _on_stop(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        response.success, response.message = self.stop_episode('stopped')
        return response

    def _on_episode_info(self, msg: String) -> None:
        target = self.episode.info if self.episode is not None else self.pending_info
        try:
            target.update_from_json(msg.data)
        except EpisodeInfoError as exc:
            self.bad_info += 1
            self.get_logger().warning(f'ignored episode_info ({self.bad_info} so far): {exc}')
            return
        if self.episode is not None:
            self.pending_info.label = target.label

    def _on_policy_state(self, msg: String) -> None:
        self._policy_state = msg.data
        self.auto.recording = self.writer is not None
        self._auto_act(self.auto.state(time.monotonic(), msg.data == RUNNING))

    def _poll_auto(self) -> None:
        self.auto.recording = self.writer is not None
        self._auto_act(self.auto.poll(time.monotonic()))

    def _auto_act(self, action: Action) -> None:
        if action is Action.START:
            self.auto.recording = self.start_episode()[0]
        elif action is Action.STOP:
            self.stop_episode(f'policy {self._policy_state}')


def _bag_qos(profile: QoSProfile) -> Qos:
    """The rosbags Qos stored in offered_qos_profiles for an rclpy QoSProfile offer."""
    def duration(value: Any) -> BagTime:
        nanoseconds = value.nanoseconds
        return BagTime(nanoseconds // 10**9, nanoseconds % 10**9)

    return Qos(QosHistory(int(profile.history)), profile.depth,
               QosReliability(int(profile.reliability)), QosDurability(int(profile.durability)),
               duration(profile.deadline), duration(profile.lifespan),
               QosLiveliness(int(profile.liveliness)),
               duration(profile.liveliness_lease_duration),
               profile.avoid_ros_namespace_conventions)


@dataclass
class _StopRequest:
    """Set by SIGINT/SIGTERM: the spin loop ends at a wait, never inside a write.

    The episode is then finished while the context is still valid (rclpy's own handlers
    would shut it down first, so the final log lines could not reach /rosout).
    """

    requested: bool = False

    def __call__(self, signum: int, frame: object) -> None:
        self.requested = True


def main(args: list[str] | None = None) -> None:
    """Entry point of ``ros2 run simops_recorder record``."""
    argv = parse_node_args('record', 'Record episodes of the configured topics to rosbag2 '
                           '(MCAP or sqlite3), one bag per episode.', args)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    stop = _StopRequest()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    try:
        node = Recorder()
    except ConfigError as exc:
        rclpy.try_shutdown()
        sys.exit(fail(NODE, EXIT_CONFIG, str(exc)))
    executor = EventsExecutor()  # see DRAIN_PERIOD for the measurements behind this choice
    executor.add_node(node)
    try:
        while not stop.requested and rclpy.ok():  # spin_once: EventsExecutor.spin() hangs
            executor.spin_once(timeout_sec=STOP_CHECK_PERIOD)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.stop_episode('shutdown')
        executor.shutdown()
        node.io_node.destroy_node()
        node.destroy_node()
        rclpy.try_shutdown()
