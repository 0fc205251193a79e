"""Keep DDS traffic on loopback and give every run its own ROS domain.

Every process that SimOps starts on a shared machine (tests, the demo, the launch runner)
takes its environment from :func:`isolated_env`. Domain ids are claimed with an exclusive
file lock, so concurrent runs (pytest-xdist workers, a demo beside a test session) never
share a domain. The lock is held until the returned :class:`DomainClaim` is released or the
process exits.
"""

from __future__ import annotations

import fcntl
import os
import random
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from simops_core.paths import resolve_resource

# Domain ids 1..100 map to UDP ports that stay clear of the Linux ephemeral range.
DOMAIN_IDS = range(1, 101)
LOCK_DIR = Path(tempfile.gettempdir())
LOOPBACK_PROFILE = 'config/dds/fastdds_loopback.xml'


class NoFreeDomainError(RuntimeError):
    """Every ROS domain id in DOMAIN_IDS is already claimed on this machine."""


@dataclass
class DomainClaim:
    """An exclusively held ROS_DOMAIN_ID; release() frees it for other runs."""

    domain_id: int
    lock_file: IO[bytes]

    def release(self) -> None:
        """Free the domain id; the claim must not be used afterwards."""
        if not self.lock_file.closed:
            fcntl.flock(self.lock_file, fcntl.LOCK_UN)
            self.lock_file.close()


def claim_domain_id(lock_dir: Path = LOCK_DIR, seed: int | None = None) -> DomainClaim:
    """Claim a ROS domain id that no other process on this machine holds."""
    candidates = list(DOMAIN_IDS)
    random.Random(seed if seed is not None else os.getpid()).shuffle(candidates)
    for domain_id in candidates:
        handle = open(lock_dir / f'simops-ros-domain-{domain_id}.lock', 'wb')  # noqa: SIM115
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        return DomainClaim(domain_id, handle)
    raise NoFreeDomainError(f'all ROS domain ids {DOMAIN_IDS.start}..{DOMAIN_IDS.stop - 1} '
                            f'are claimed; stale locks live in {lock_dir}')


def isolated_env(domain_id: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return ``base`` (default: os.environ) with DDS confined to loopback and ``domain_id``.

    Besides the discovery range, Fast DDS gets a transport profile that binds UDP to
    127.0.0.1 and shared memory only (``config/dds/fastdds_loopback.xml``).
    """
    env = dict(os.environ if base is None else base)
    env['ROS_DOMAIN_ID'] = str(domain_id)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env['ROS_STATIC_PEERS'] = ''
    env.pop('ROS_LOCALHOST_ONLY', None)  # deprecated; conflicts with the discovery range
    env['RMW_IMPLEMENTATION'] = 'rmw_fastrtps_cpp'
    env['FASTDDS_DEFAULT_PROFILES_FILE'] = str(resolve_resource(LOOPBACK_PROFILE))
    return env
