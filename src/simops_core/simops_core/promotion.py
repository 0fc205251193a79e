"""Promotion records: which policy passed which gate against which calibration (no rclpy).

A policy passes the gate in the validation sim (``simops-validate``); ``simops-promote``
then appends a *promotion record* to ``<policy stem>.promotion.jsonl`` beside the policy and
its card. Each record binds, by sha256:

- the policy file and its card;
- the SimParams the gate ran against (the calibration; null: the model's nominal physics)
  and the bags that SimParams was fitted from (its provenance);
- the gate report, and, when a pipeline made it, the pipeline file and the training config;

and holds the verdict, the thresholds, each gate cell's success with its 95 % Wilson score
interval, the time, and the versions of the tools. The file is append-only and chained: every
record carries the sha256 of the line before it (``previous``) and of its own canonical JSON
(``sha256``), so an edited, removed or reordered record is detected.

:func:`check_deployable` is the rule a real arm's policy node applies before it loads a
policy: the newest PASS record must match the policy and card files as they are, and its
calibration must be the one configured for the arm; anything else is a
:class:`PromotionError` with one line saying why and how to fix it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simops_core.command_line import ConfigError
from simops_core.policy_card import file_sha256

RECORD_VERSION = 1
RECORD_SUFFIX = '.promotion.jsonl'
GENESIS = '0' * 64          # ``previous`` of a file's first record
WILSON_Z = 1.959963984540054   # two-sided 95 %
VERSIONED = ('mujoco', 'torch', 'numpy', 'simops_core', 'simops_sim', 'simops_learning')
PROMOTE_HINT = 'gate it with simops-promote, or set allow_unvalidated:=true to run it anyway'


class PromotionError(ConfigError):
    """No usable promotion record: the message says why and how to fix it, in one line."""


def record_path(policy: str | Path) -> Path:
    """Where the promotion records of ``policy`` live: ``<stem>.promotion.jsonl`` beside it."""
    policy = Path(policy)
    return policy.with_name(policy.stem + RECORD_SUFFIX)


def wilson_interval(successes: float, episodes: int, z: float = WILSON_Z
                    ) -> tuple[float, float]:
    """The Wilson score interval (low, high) of a success fraction over ``episodes``."""
    if episodes <= 0:
        return 0.0, 1.0
    p = successes / episodes
    denominator = 1.0 + z * z / episodes
    centre = (p + z * z / (2 * episodes)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / episodes + z * z / (4 * episodes * episodes))
    half /= denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)   # the ends exactly at 0 and n
    return low, 1.0 if successes >= episodes else min(1.0, centre + half)


def tool_versions() -> dict[str, str]:
    """The versions of Python and of the packages a gate's result depends on."""
    out = {'python': platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = 'not installed'
    return out


def canonical(entry: Mapping[str, Any]) -> str:
    """The canonical JSON of ``entry``: sorted keys, no spaces (what the hashes cover)."""
    return json.dumps(entry, sort_keys=True, separators=(',', ':'), allow_nan=False)


def seal(entry: Mapping[str, Any], previous: str) -> dict[str, Any]:
    """``entry`` chained after the record whose sha256 is ``previous``, with its own sha256."""
    body = {k: v for k, v in entry.items() if k != 'sha256'}
    body['previous'] = previous
    body['sha256'] = hashlib.sha256(canonical(body).encode()).hexdigest()
    return body


@dataclass(frozen=True)
class PromotionRecord:
    """One record of a promotion file (see the module docstring); ``entry`` is its JSON."""

    entry: Mapping[str, Any]

    @property
    def verdict(self) -> str:
        """``pass`` for a promotion (the gate's verdict)."""
        return str(self.entry.get('verdict', ''))

    def sha(self, part: str) -> str | None:
        """The sha256 recorded for ``part`` (``policy``, ``card``, ``sim_params``, ...)."""
        item = self.entry.get(part)
        return None if item is None else str(item['sha256'])


def read_records(path: str | Path) -> list[PromotionRecord]:
    """Every record of the promotion file at ``path``, its chain checked, oldest first.

    Raises :class:`PromotionError` when a line is not a record or the chain is broken.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise PromotionError(f'no promotion record at {path}; {PROMOTE_HINT}') from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PromotionError(f'{path}: cannot read the promotion records: {exc}') from None
    records, previous = [], GENESIS
    for number, line in enumerate((x for x in lines if x.strip()), start=1):
        try:
            entry = json.loads(line)
            valid = isinstance(entry, dict) and entry == seal(entry, entry.get('previous', ''))
        except (ValueError, TypeError):
            valid = False
        if not valid:
            raise PromotionError(f'{path}: record {number} was edited (its sha256 does not '
                                 'match its content); restore the file or promote again')
        if entry['previous'] != previous:
            raise PromotionError(f'{path}: record {number} does not follow record '
                                 f'{number - 1} (a record was removed, reordered or '
                                 'inserted); restore the file or promote again')
        previous = entry['sha256']
        records.append(PromotionRecord(entry))
    return records


def append_record(path: str | Path, entry: Mapping[str, Any]) -> PromotionRecord:
    """Append ``entry`` to the promotion file at ``path`` (chained, sealed); return it.

    The existing chain is checked first (:func:`read_records`), so nothing is appended to a
    file that was tampered with.
    """
    path = Path(path)
    records = read_records(path) if path.exists() else []
    previous = records[-1].entry['sha256'] if records else GENESIS
    sealed = seal({'version': RECORD_VERSION, **entry}, previous)
    with path.open('a') as stream:
        stream.write(canonical(sealed) + '\n')
    return PromotionRecord(sealed)


def file_entry(path: str | Path | None) -> dict[str, str] | None:
    """``{path, sha256}`` of a file (None for None): how a record names its inputs."""
    if path is None:
        return None
    return {'path': str(path), 'sha256': file_sha256(path)}


def gate_entry(report: Mapping[str, Any], report_path: str | Path, policy: str | Path,
               card: str | Path, sim_params: str | Path | None,
               bags: Sequence[Mapping[str, str]] = (), extra: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
    """The record of a gate ``report`` (simops-validate's JSON) for the files it gated.

    Each cell keeps its conditions, success, episodes and Wilson interval; ``bags``: the
    bags the calibration was fitted from (``{path, sha256}``); ``extra``: more bound files
    (``pipeline``, ``training``: ``{path, sha256}``) and fields.
    """
    cells = []
    for config in report.get('configs', []):
        episodes = int(config['episodes'])
        success = float(config['success'])
        conditions = {k: v for k, v in config.items()
                      if k not in ('success', 'episodes', 'mean_distance_m', 'mean_steps',
                                   'protective_stops', 'unsafe', 'peak_speed', 'peak_force')}
        low, high = wilson_interval(success * episodes, episodes)
        cells.append({'conditions': conditions, 'success': success, 'episodes': episodes,
                      'wilson_95': [round(low, 4), round(high, 4)]})
    return {
        'verdict': str(report.get('verdict', '')),
        'time': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
        'policy': file_entry(policy), 'card': file_entry(card),
        'sim_params': file_entry(sim_params), 'bags': [dict(b) for b in bags],
        'gate_report': file_entry(report_path),
        'thresholds': dict(report.get('thresholds', {})), 'seed': report.get('seed'),
        'cells': cells, 'versions': tool_versions(), **(extra or {}),
    }


def check_deployable(policy: str | Path, card: str | Path, calibration: str | Path | None
                     ) -> PromotionRecord:
    """The PASS record that lets ``policy`` run on an arm calibrated with ``calibration``.

    ``calibration``: the SimParams file configured for the arm (None: the nominal model).
    The newest PASS record whose policy and card shas match the files wins if its
    calibration is the arm's; else :class:`PromotionError` names what does not match.
    """
    path = record_path(policy)
    records = [r for r in read_records(path) if r.verdict == 'pass']
    name = Path(policy).name
    if not records:
        raise PromotionError(f'{path} holds no PASS record for {name}; {PROMOTE_HINT}')
    policy_sha, card_sha = file_sha256(policy), file_sha256(card)
    matching = [r for r in records if r.sha('policy') == policy_sha]
    if not matching:
        raise PromotionError(f'{name} is not the file that passed the gate (sha256 '
                             f'{policy_sha[:12]}, promoted {records[-1].sha("policy")[:12]}); '
                             f'restore it, or {PROMOTE_HINT}')
    matching = [r for r in matching if r.sha('card') == card_sha]
    if not matching:
        raise PromotionError(f'the card {Path(card).name} changed since {name} passed the '
                             f'gate (sha256 {card_sha[:12]}); restore it, or {PROMOTE_HINT}')
    wanted = None if calibration is None else file_sha256(calibration)
    for record in reversed(matching):
        if record.sha('sim_params') == wanted:
            return record
    gated = matching[-1].entry.get('sim_params')
    against = 'the nominal model' if gated is None else f'{gated["path"]} ' \
        f'(sha256 {gated["sha256"][:12]})'
    arm = 'the nominal model' if calibration is None else f'{calibration} (sha256 ' \
        f'{wanted[:12]})'
    raise PromotionError(f'{name} passed the gate against {against}, but the arm is '
                         f'calibrated with {arm}; gate it against that calibration: '
                         f'simops-promote --policy {policy}'
                         + ('' if calibration is None else f' --sim-params {calibration}'))
