"""Episode bookkeeping for the recorder: labels, sequence gaps, metadata (no rclpy).

An episode is one bag directory ``<root>/<UTC timestamp>_<label>/``. Its metadata lives in
rosbag2's ``custom_data`` (string values; nested values are JSON) under ``simops.*`` keys.
While it records, the same metadata is kept in a journal file beside the bag storage, so
``repair`` can restore it after a crash.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

JOURNAL_FILE = 'episode.journal.json'
KEY_PREFIX = 'simops.'
ROBOT_MODES = ('sim', 'real')


class EpisodeInfoError(ValueError):
    """An ~/episode_info message is not the expected JSON object."""


@dataclass
class EpisodeInfo:
    """Label and outcome of an episode, as sent on ~/episode_info.

    ``success`` is None until the operator reports an outcome.
    """

    label: str = 'episode'
    success: bool | None = None
    notes: str = ''

    def update_from_json(self, text: str) -> None:
        """Apply a JSON object such as ``{"label": "pick", "success": true, "notes": ""}``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EpisodeInfoError(f'episode_info is not JSON ({exc.msg}): {text[:80]!r}') from None
        if not isinstance(data, dict):
            raise EpisodeInfoError(f'episode_info must be a JSON object, got {text[:80]!r}')
        unknown = set(data) - {'label', 'success', 'notes'}
        if unknown:
            raise EpisodeInfoError(f'episode_info has unknown keys {sorted(unknown)}; '
                                   'allowed: label, success, notes')
        label = data.get('label', self.label)
        success = data.get('success', self.success)
        notes = data.get('notes', self.notes)
        if not isinstance(label, str) or not label.strip():
            raise EpisodeInfoError(f'episode_info label must be a non-empty string, got {label!r}')
        if success is not None and not isinstance(success, bool):
            raise EpisodeInfoError(f'episode_info success must be true, false or null, '
                                   f'got {success!r}')
        if not isinstance(notes, str):
            raise EpisodeInfoError(f'episode_info notes must be a string, got {notes!r}')
        self.label, self.success, self.notes = label.strip(), success, notes


@dataclass
class SequenceGaps:
    """Messages lost on the wire, from DDS publication sequence numbers.

    Counts per topic and per publisher (GID as hex, or ``'unknown'``): a message whose
    sequence number is more than one above its publisher's previous one means the
    difference minus one messages never arrived.
    """

    last: dict[tuple[str, str], int] = field(default_factory=dict)
    gaps: dict[str, dict[str, int]] = field(default_factory=dict)

    def observe(self, topic: str, publisher: str, sequence: int | None) -> int:
        """Record one received message; return how many were lost just before it."""
        if sequence is None or sequence <= 0:  # the rmw does not provide sequence numbers
            return 0
        key = (topic, publisher)
        previous = self.last.get(key)
        self.last[key] = sequence
        lost = sequence - previous - 1 if previous is not None and sequence > previous else 0
        per_topic = self.gaps.setdefault(topic, {})
        per_topic[publisher] = per_topic.get(publisher, 0) + lost
        return lost

    def total(self, topic: str | None = None) -> int:
        """Messages lost on ``topic`` (default: all topics)."""
        topics = [topic] if topic is not None else list(self.gaps)
        return sum(sum(self.gaps.get(t, {}).values()) for t in topics)


@dataclass(frozen=True)
class RecorderIdentity:
    """What every episode of one recorder run shares (from the node's parameters)."""

    robot: str
    robot_mode: str
    policy_sha256: str
    sim_params_sha256: str
    allow_unvalidated: bool = False   # the arm ran a policy without a matching promotion
    source: str = 'policy'            # what drove the arm: policy, teleop or excite
    task: str = ''                    # the task's name or text


@dataclass
class Episode:
    """One recording: identity, label/outcome, times (UTC), counts and sequence gaps."""

    identity: RecorderIdentity
    info: EpisodeInfo
    start: datetime
    stop: datetime | None = None
    end_reason: str = ''
    gaps: SequenceGaps = field(default_factory=SequenceGaps)

    def custom_data(self, counts: dict[str, int]) -> dict[str, str]:
        """rosbag2 ``custom_data`` entries (all strings) for the given per-topic counts."""
        success = '' if self.info.success is None else str(self.info.success).lower()
        values = {
            'robot': self.identity.robot,
            'mode': self.identity.robot_mode,
            'policy_sha256': self.identity.policy_sha256,
            'sim_params_sha256': self.identity.sim_params_sha256,
            'allow_unvalidated': str(self.identity.allow_unvalidated).lower(),
            'source': self.identity.source,
            'task': self.identity.task,
            'start_time': self.start.isoformat(),
            'stop_time': self.stop.isoformat() if self.stop else '',
            'label': self.info.label,
            'success': success,
            'notes': self.info.notes,
            'end_reason': self.end_reason,
            'message_counts': json.dumps(counts, sort_keys=True),
            'sequence_gaps': json.dumps(self.gaps.gaps, sort_keys=True),
            'messages_lost': str(self.gaps.total()),
        }
        return {KEY_PREFIX + key: value for key, value in values.items()}


def episode_dir_name(start: datetime, label: str) -> str:
    """``20261121T054715.123Z_pick``: sortable UTC start time, then the sanitised label."""
    stamp = start.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%S.%f')[:-3] + 'Z'
    safe = re.sub(r'[^A-Za-z0-9_-]+', '-', label).strip('-') or 'episode'
    return f'{stamp}_{safe[:64]}'


def utc_now() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with path.open('rb') as stream:
        for block in iter(lambda: stream.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()
