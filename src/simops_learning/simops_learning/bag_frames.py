"""One rosbag2 episode as frames at a fixed rate, aligned explicitly (no rclpy).

Topics arrive asynchronously and late; a frame at time ``t`` (the joint-state clock: the
arm driver's header stamps) takes each input by one stated rule:

- **joint states** are interpolated linearly between the two samples around ``t``, streamed
  (an hour of 1 kHz states never sits in memory); a frame whose two samples
  lie more than ``max_age`` apart is dropped;
- **commands** are taken at their effective time, as ``fit`` takes them
  (:class:`~simops_core.receive_clock.ReceiveClock`: delivery time less the clock offset, or
  when a late arm caught up; never before a trajectory's stamp). A delivery time is the
  send time plus the topic's fastest delivery where the bag holds send times, else the
  receive time (:func:`~simops_core.receive_clock.delivery_times`; found in a first pass
  over every topic but the images). A frame's action is the
  newest command in force before the next frame (LeRobot's convention: the action taken
  after observing frame ``t``); the policy's raw output on ``/policy/action``, the
  operator's twist on ``/teleop/operator_twist`` and the hand's width sent as franka_gripper
  goals beside a trajectory (``/simops/gripper_command``: the action's gripper entry where
  the commands carry none) likewise;
- **slower topics** (object pose, camera images) are held: the newest sample stamped at or
  before ``t``; latched topics (the goal pose, ``transient_local`` in config/topics.yaml)
  hold until replaced, others only up to ``max_age``. Images are read twice: for their
  stamps in the one pass, then, for the frames kept, their pixels, streamed into the video
  encoder (an episode's images never sit in memory together).

A frame whose held inputs are older than ``max_age`` (or that has none yet) is dropped;
frames before the first and after the last complete one are trimmed; both are counted, and
the worst age of every input is reported per episode. Each frame keeps the header stamps
and receive times of the messages its inputs came from (``source.*`` columns).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.bag_reader import (
    BagError,
    MissingTopicsError,
    bag_sha256,
    message_typestore,
    read_bag,
)
from simops_core.bag_series import FLOAT_ARRAY, JOINT_STATE, POSE, TRAJECTORY, TWIST
from simops_core.bag_stream import stream_messages
from simops_core.receive_clock import Delivery, DeliveryScan, ReceiveClock
from simops_core.robot_spec import RobotSpec
from simops_core.stamps import to_seconds
from simops_core.topics import TopicSpec
from simops_learning.episode_schema import (
    GRIPPER,
    EpisodeFrames,
    Schema,
    empty_columns,
    write_joint_states,
    write_pose,
)
from simops_learning.reach_card import CONTROL_RATE

DEFAULT_FPS = CONTROL_RATE   # Hz, the policies' control rate
DEFAULT_MAX_AGE = 0.25  # s, the oldest a held input may be at a frame
# s: an observation stamped this little after a frame counts as stamped at it. Frame times
# (start + k / fps) and stamps on the same millisecond tick differ by float rounding only
# (near 1.8e9 s of system time a float64 resolves 0.24 us), so a tie is a tie.
STAMP_TIE = 1e-6
POLICY_ACTION = 'policy_action'
OPERATOR_TWIST = 'operator_twist'
GRIPPER_COMMAND = 'gripper_command'
ACTIONS = (POLICY_ACTION, OPERATOR_TWIST, GRIPPER_COMMAND)   # optional, held as commands are
IMAGE = 'sensor_msgs/msg/Image'


class EpisodeError(ValueError):
    """A bag cannot become an episode of this card; the one-line message says why."""


@dataclass(frozen=True)
class Alignment:
    """Frame rate ``fps`` (Hz) and the oldest input ``max_age`` (s) a frame may hold."""

    fps: float = DEFAULT_FPS
    max_age: float = DEFAULT_MAX_AGE

    @property
    def period(self) -> float:
        """S between frames."""
        return 1.0 / self.fps


@dataclass
class _Held:
    """A held input's samples: effective time, stamp, receive time (s) and values (M, k)."""

    t: np.ndarray
    stamp: np.ndarray
    received: np.ndarray
    values: np.ndarray


class _Resampler:
    """Joint states interpolated onto the frame grid, one message at a time.

    The grid starts at the first stamp, every ``period`` s. For each frame it keeps the
    interpolated positions and velocities (J,) in ``joints`` order, the stamp and receive time
    of the sample before it and the gap between the two samples around it. ``stamps`` and
    ``delivered`` (the delivery times) of every sample make the :class:`ReceiveClock`.
    """

    def __init__(self, joints: tuple[str, ...], fingers: tuple[str, ...], period: float) -> None:
        self.joints, self.fingers, self.period = joints, fingers, period
        self.t0: float | None = None
        self.rows: list[np.ndarray] = []
        self.stamps = array('d')
        self.delivered = array('d')
        self._columns: dict[tuple[str, ...], np.ndarray] = {}
        self._prev: tuple[float, np.ndarray, float] | None = None

    def add(self, names: tuple[str, ...], position: np.ndarray, velocity: np.ndarray,
            stamp: float, received: float, delivered: float) -> None:
        """Take one joint state (stamp, receive and delivery time in s)."""
        pick = self._columns.get(names)
        if pick is None:
            column = {name: i for i, name in enumerate(names)}
            missing = [j for j in (*self.joints, *self.fingers) if j not in column]
            if missing:
                raise EpisodeError(f'a joint state names {list(names)}, without {missing}')
            pick = self._columns[names] = np.array([column[j] for j in self.joints + self.fingers])
        n = len(self.joints) + len(self.fingers)
        values = np.empty(2 * n)
        values[:n] = position[pick]
        values[n:] = velocity[pick] if len(velocity) == len(position) else np.nan
        if self.stamps and stamp <= self.stamps[-1]:
            raise EpisodeError(f'joint state header stamps are not strictly increasing '
                               f'(message {len(self.stamps)} at {stamp:.6f} s follows '
                               f'{self.stamps[-1]:.6f} s)')
        self.stamps.append(stamp)
        self.delivered.append(delivered)
        if self._prev is None:
            self.t0 = stamp
            self.rows.append(np.concatenate([values, [stamp, received, 0.0]]))
        else:
            last_t, last_v, last_received = self._prev
            gap = stamp - last_t
            k = len(self.rows)
            while (t := self.t0 + k * self.period) <= stamp:
                w = (t - last_t) / gap
                self.rows.append(np.concatenate([last_v + w * (values - last_v),
                                                 [last_t, last_received, gap]]))
                k += 1
        self._prev = (stamp, values, received)


def topic_first(bag: Path, topic: str, type_name: str, store: Any) -> Any:
    """The first message of ``topic``, decoded."""
    for message in stream_messages(bag, [topic]):
        return store.deserialize_cdr(message.data, type_name)
    raise EpisodeError(f'{bag}: {topic} has no messages')


def bag_episode(bag: str | Path, schema: Schema, spec: RobotSpec,
                topics: Mapping[str, TopicSpec], alignment: Alignment,
                task: str = '', camera_topics: Mapping[str, str] | None = None
                ) -> EpisodeFrames:
    """Read ``bag`` as one episode of ``schema``; raise :class:`EpisodeError` naming the problem.

    ``topics`` are config/topics.yaml's (pose and command topic names, latched QoS);
    ``task`` is the task text when the episode's metadata names none; ``camera_topics`` the
    colour image topic of each of the schema's cameras.
    """
    path = Path(bag)
    try:
        listing = read_bag(path, topics=())
    except BagError as exc:
        raise EpisodeError(str(exc)) from None
    found = {name: t for name, t in listing.topics.items() if t.count}
    custom = listing.custom_data
    robot = custom.get('simops.robot', '')
    if robot and robot != schema.robot:
        raise EpisodeError(f'{path}: recorded on robot {robot!r}, the card is for '
                           f'{schema.robot!r}; export it with a {robot} card')
    store = message_typestore(listing)
    fingers = spec.gripper.joints if schema.gripper_width else ()
    state_topic = _state_topic(path, found, schema.joints + fingers, store)
    command_topic = _command_topic(path, found, topics, listing)
    pose_topics = {name: topics[name].name for name in schema.inputs
                   if name in ('object_pose', 'goal_pose')}
    missing = [t for t in pose_topics.values() if t not in found]
    if missing:
        raise EpisodeError(str(MissingTopicsError(path, missing, listing.info())) +
                           '; the card observes them')
    image_topics = {video.input: (camera_topics or {}).get(video.camera, '')
                    for video in schema.videos}
    missing = [t or name for name, t in image_topics.items() if t not in found]
    if missing:
        raise EpisodeError(str(MissingTopicsError(path, missing, listing.info())) +
                           '; the dataset has these cameras')
    for video in schema.videos:
        first = topic_first(path, image_topics[video.input], IMAGE, store)
        if (first.encoding, first.width, first.height) != ('rgb8', video.width, video.height):
            raise EpisodeError(f'{path}: {image_topics[video.input]} is {first.encoding} '
                               f'{first.width}x{first.height}; the dataset has {video.key} as '
                               f'rgb8 {video.width}x{video.height}')
    action_topics = {name: topics[name].name for name in ACTIONS
                     if topics[name].name in found}
    wanted = {state_topic, command_topic, *pose_topics.values(), *image_topics.values(),
              *action_topics.values()}
    resampler = _Resampler(schema.joints, fingers, alignment.period)
    # Slower topics are kept as float rows, never as decoded messages (an hour of 100 Hz
    # poses as message objects would take hundreds of MB).
    logs = {command_topic: _Log(found[command_topic].type, len(schema.action), schema.action)}
    logs |= {topic: _Log(POSE, 7) for topic in pose_topics.values()}
    logs |= {topic: _Log(IMAGE, 1) for topic in image_topics.values()}   # ordinal
    if POLICY_ACTION in action_topics:
        logs[action_topics[POLICY_ACTION]] = _Log(FLOAT_ARRAY, len(schema.action))
    if OPERATOR_TWIST in action_topics:
        logs[action_topics[OPERATOR_TWIST]] = _Log(TWIST, 6)
    if GRIPPER_COMMAND in action_topics:
        logs[action_topics[GRIPPER_COMMAND]] = _Log(FLOAT_ARRAY, 1)
    state_type = found[state_topic].type
    try:
        delivery = deliveries(path, wanted - set(image_topics.values()))
        for topic, log_time, publish_time, data in stream_messages(path, wanted):
            received = log_time * 1e-9
            delivered = (delivery[topic].time(log_time, publish_time) if topic in delivery
                         else received)
            if topic == state_topic:
                msg = store.deserialize_cdr(data, state_type)
                stamp = to_seconds(msg.header.stamp)
                resampler.add(tuple(msg.name), np.asarray(msg.position),
                              np.asarray(msg.velocity), stamp if stamp > 0 else received,
                              received, delivered)
            else:
                log = logs[topic]
                log.add(received, delivered, store.deserialize_cdr(data, log.type_name))
    except BagError as exc:
        raise EpisodeError(str(exc)) from None
    except EpisodeError as exc:
        raise EpisodeError(f'{path}: {state_topic}: {exc}') from None
    if len(resampler.rows) < 2:
        raise EpisodeError(f'{path}: {state_topic} spans less than one frame '
                           f'({1e3 * alignment.period:.0f} ms at {alignment.fps:g} fps); '
                           'the episode is too short to export')
    clock = ReceiveClock(np.frombuffer(resampler.delivered), np.frombuffer(resampler.stamps))
    held = {'command': logs[command_topic].held(clock, not_before_stamp=True)}
    for name, topic in action_topics.items():
        held[name] = logs[topic].held(clock)
    for name, topic in (pose_topics | image_topics).items():
        held[name] = logs[topic].held(clock, from_stamp=True)
    latched = {name for name, topic in pose_topics.items()
               if topics[name].qos.durability == 'transient_local'}
    frames = _assemble(np.stack(resampler.rows), resampler.t0 or 0.0, schema, fingers, held,
                       latched, alignment)
    if frames is None:
        raise EpisodeError(f'{path}: no frame has every input within {alignment.max_age:g} s '
                           f'(joint states {state_topic}, commands {command_topic}); the '
                           'episode is shorter than one frame')
    timestamp, columns, report = frames
    report.update(topics={'joint_states': state_topic, 'command': command_topic,
                          **pose_topics, **image_topics})
    meta = _episode_meta(path, custom, robot or schema.robot) | {
        'start_time': report['start_time']}
    episode_task = custom.get('simops.task') or task or meta['label'] or 'episode'
    videos = {video.key: ImageStream(path, image_topics[video.input],
                                     columns.pop(_ordinal_key(video.input))[:, 0].astype(int))
              for video in schema.videos}
    return EpisodeFrames(timestamp, columns, episode_task, meta, report, videos)


def deliveries(bag: Path, topics: set[str]) -> dict[str, Delivery]:
    """Each of ``topics``' :class:`Delivery`, from one pass over their messages' times."""
    scans = {topic: DeliveryScan() for topic in topics}
    for message in stream_messages(bag, topics):
        scans[message.topic].add(message.log_time, message.publish_time)
    return {topic: scan.delivery() for topic, scan in scans.items()}


def _ordinal_key(name: str) -> str:
    return f'_ordinal.{name}'


@dataclass(frozen=True)
class ImageStream:
    """The rgb8 images of ``topic`` in ``bag`` picked by ordinal, one per frame.

    ``ordinals`` are message numbers in the topic. Plain data, so an episode crosses process
    boundaries.
    """

    bag: Path
    topic: str
    ordinals: np.ndarray

    def __call__(self) -> Iterator[np.ndarray]:
        """Each frame's image (H, W, 3) uint8, in frame order (a held image repeats)."""
        try:
            store = message_typestore(read_bag(self.bag, topics=()))
        except BagError as exc:
            raise EpisodeError(str(exc)) from None
        wanted = iter(self.ordinals.tolist())
        target = next(wanted, None)
        for ordinal, (_, _, _, data) in enumerate(stream_messages(self.bag, [self.topic])):
            if target is None:
                return
            if ordinal < target:
                continue
            msg = store.deserialize_cdr(data, IMAGE)
            image = np.asarray(msg.data, dtype=np.uint8).reshape(msg.height, msg.width, 3)
            while target == ordinal:
                yield image
                target = next(wanted, None)
        if target is not None:
            raise EpisodeError(f'{self.bag}: {self.topic} ended before image {target}')


def _state_topic(path: Path, found: Mapping[str, Any], joints: tuple[str, ...],
                 store: Any) -> str:
    """The JointState topic naming every joint the schema needs (the busiest wins)."""
    candidates = sorted((n for n, t in found.items() if t.type == JOINT_STATE),
                        key=lambda n: -found[n].count)
    if not candidates:
        have = ', '.join(f'{n} ({t.type}, {t.count})' for n, t in found.items()) or 'none'
        raise EpisodeError(f'{path}: no sensor_msgs/msg/JointState topic with messages; the '
                           f'bag has {have}')
    named = {}
    for topic in candidates:
        names = tuple(topic_first(path, topic, JOINT_STATE, store).name)
        if set(joints) <= set(names):
            return topic
        named[topic] = list(names)
    detail = '; '.join(f'{t} has {n}' for t, n in named.items())
    raise EpisodeError(f'{path}: joint names do not match the card (it needs {list(joints)}): '
                       f'{detail}')


def _command_topic(path: Path, found: Mapping[str, Any], topics: Mapping[str, TopicSpec],
                   listing: Any) -> str:
    """The busiest command topic: a JointTrajectory topic or config's joint_commands."""
    names = [n for n, t in found.items() if t.type == TRAJECTORY
             or (t.type == FLOAT_ARRAY and n == topics['joint_commands'].name)]
    if not names:
        raise EpisodeError(str(MissingTopicsError(
            path, [topics['joint_commands'].name, topics['joint_trajectory'].name],
            listing.info())) + '; an episode needs the commands sent to the arm')
    return max(names, key=lambda n: found[n].count)


class _Log:
    """One slower topic's samples as float rows: receive time, delivery time, stamp, values.

    Times in s, values in SI units.

    ``type_name`` is the message type: a JointTrajectory (its first point's positions by
    ``names``, NaN for joints it does not set), a Float64MultiArray (its first ``width``
    values), a PoseStamped (position, then quaternion x, y, z, w), a TwistStamped (linear,
    then angular) or an Image (its ordinal in the topic). A zero or absent stamp is NaN.
    """

    def __init__(self, type_name: str, width: int, names: tuple[str, ...] = ()) -> None:
        self.type_name, self.width = type_name, width
        self.rows = array('d')
        self.count = 0
        self._column = {name: i for i, name in enumerate(names)}

    def add(self, received: float, delivered: float, msg: Any) -> None:
        """Append one decoded message, received and delivered (:func:`deliveries`) at s."""
        values = [np.nan] * self.width
        stamp = np.nan
        if self.type_name == FLOAT_ARRAY:
            data = list(msg.data)[:self.width]
            values[:len(data)] = data
        else:
            header = to_seconds(msg.header.stamp)
            stamp = header if header > 0 else np.nan
            if self.type_name == IMAGE:
                values = [self.count]
            elif self.type_name == POSE:
                position, orientation = msg.pose.position, msg.pose.orientation
                values = [position.x, position.y, position.z, orientation.x, orientation.y,
                          orientation.z, orientation.w]
            elif self.type_name == TWIST:
                v, w = msg.twist.linear, msg.twist.angular
                values = [v.x, v.y, v.z, w.x, w.y, w.z]
            elif msg.points:
                for name, value in zip(msg.joint_names, msg.points[0].positions, strict=False):
                    if name in self._column:
                        values[self._column[name]] = value
        self.rows.extend([received, delivered, stamp, *values])
        self.count += 1

    def held(self, clock: ReceiveClock, not_before_stamp: bool = False,
             from_stamp: bool = False) -> _Held:
        """The samples sorted by when they took effect on the joint-state clock.

        That is the delivery time mapped by ``clock``; no earlier than the stamp with
        ``not_before_stamp`` (a trajectory starts at its stamp); the stamp itself, where
        there is one, with ``from_stamp`` (an observed pose holds from when it was taken).
        """
        table = np.frombuffer(self.rows).reshape(-1, 3 + self.width)
        received, delivered, stamp = table[:, 0], table[:, 1], table[:, 2]
        when = clock(delivered) if delivered.size else delivered.copy()
        has = ~np.isnan(stamp)
        if not_before_stamp:
            when[has] = np.maximum(when[has], stamp[has])
        if from_stamp:
            when[has] = stamp[has]
        return _sorted(_Held(when, stamp, received, table[:, 3:]))


def _sorted(held: _Held) -> _Held:
    order = np.argsort(held.t, kind='stable')
    return _Held(held.t[order], held.stamp[order], held.received[order], held.values[order])


def _assemble(rows: np.ndarray, t0: float, schema: Schema, fingers: tuple[str, ...],
              held: dict[str, _Held], latched: set[str], alignment: Alignment
              ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any]] | None:
    """The kept frames' timestamps and columns, and the alignment report (None: no frame).

    ``rows``: the card's joints then ``fingers``, positions then velocities, then stamp,
    receipt and gap.
    """
    n_joints = (rows.shape[1] - 3) // 2   # rows: positions, velocities, stamp, received, gap
    t = t0 + np.arange(len(rows)) * alignment.period
    period, max_age = alignment.period, alignment.max_age
    invalid = {'joint_states': rows[:, -1] > max_age}
    picks: dict[str, np.ndarray] = {}
    ages = {'joint_states': t - rows[:, -3]}
    for name, samples in held.items():
        # A command or action is in force over the frame when it took effect before the next
        # frame; an observed pose when it was stamped at or before the frame.
        ahead = period if name in ('command', *ACTIONS) else 0.0
        side = 'left' if ahead else 'right'
        index = np.searchsorted(samples.t, t + (ahead or STAMP_TIE), side=side) - 1
        have = index >= 0
        age = np.where(have, t + ahead - samples.t[np.maximum(index, 0)], np.inf)
        stale = ~have if name in latched else ~have | (age > max_age)
        if name not in ACTIONS:
            invalid[name] = stale
        picks[name] = np.where(stale, -1, index)
        ages[name] = age
    bad = np.any(np.stack(list(invalid.values())), axis=0)
    good = np.flatnonzero(~bad)
    if good.size == 0:
        return None
    first, last = int(good[0]), int(good[-1])
    keep = good
    n = keep.size
    columns = empty_columns(schema, n)
    write_joint_states(columns, schema, (*schema.joints, *fingers), fingers,
                       rows[keep, :n_joints], rows[keep, n_joints:2 * n_joints])
    columns['source.joint_states.stamp'][:, 0] = rows[keep, -3]
    columns['source.joint_states.received'][:, 0] = rows[keep, -2]
    for name, samples in held.items():
        pick = picks[name][keep]
        ok = pick >= 0
        source = np.maximum(pick, 0)
        columns[f'source.{name}.stamp'][ok, 0] = samples.stamp[source[ok]]
        columns[f'source.{name}.received'][ok, 0] = samples.received[source[ok]]
        values = samples.values[source]
        values[~ok] = np.nan
        if name == 'command':
            columns['action'][:] = values
            columns['source.command.effective'][ok, 0] = samples.t[source[ok]]
        elif name == POLICY_ACTION:
            columns['policy.action'][:] = values
        elif name == OPERATOR_TWIST:
            columns['operator.twist'][:] = values
        elif name == GRIPPER_COMMAND and GRIPPER in schema.action:
            width = columns['action'][:, schema.action.index(GRIPPER)]   # a view
            unset = np.isnan(width)
            width[unset] = values[unset, 0]
        elif name.startswith('images.'):
            columns[_ordinal_key(name)] = values
        else:
            write_pose(columns, schema, name, values)
    report = {
        'frames': n, 'trimmed': int(first + len(rows) - 1 - last),
        'dropped': int((last - first + 1) - n),
        'dropped_by_input': {name: int(mask[first:last + 1].sum())
                             for name, mask in invalid.items()},
        'worst_age_s': {name: float(np.max(np.where(np.isfinite(age[keep]), age[keep], 0.0)))
                        for name, age in ages.items()},
        'worst_joint_state_gap_s': float(rows[keep, -1].max()),
        'start_time': float(t[first]),
    }
    return (t[keep] - t[first]).astype(np.float64), columns, report


def _episode_meta(path: Path, custom: Mapping[str, str], robot: str) -> dict[str, Any]:
    """The episode table's columns from the bag's ``custom_data`` and the bag's hash."""
    success = custom.get('simops.success', '')
    return {
        'success': success == 'true', 'success_known': success in ('true', 'false'),
        'outcome': custom.get('simops.end_reason', ''),
        'notes': custom.get('simops.notes', ''), 'label': custom.get('simops.label', ''),
        'source': 'real' if custom.get('simops.mode') == 'real' else (
            custom.get('simops.mode') or 'recorded'),
        'bag': str(path), 'bag_sha256': bag_sha256(path), 'robot': robot,
        'sim_params_sha256': custom.get('simops.sim_params_sha256', ''),
        'policy_sha256': custom.get('simops.policy_sha256', ''),
        'conditions': '',
    }
