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
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO

from simops_core.paths import resolve_resource

# Domain ids 1..100 map to UDP ports that stay clear of the Linux ephemeral range.
DOMAIN_IDS = range(1, 101)
LOCK_DIR = Path(tempfile.gettempdir())
LOOPBACK_PROFILE = 'config/dds/fastdds_loopback.xml'
# The variable naming the XML profile Fast DDS loads for every participant, by its major
# version: 2.x (Humble's 2.6, Jazzy's 2.14) reads only FASTRTPS_DEFAULT_PROFILES_FILE (the one
# name in the Jazzy wheel's libfastrtps.so.2.14), 3.x (Kilted) FASTDDS_DEFAULT_PROFILES_FILE;
# rmw_fastrtps 9.3.0 (Kilted) still reads the old name, with a deprecation warning (#806).
PROFILE_VARIABLES = {2: 'FASTRTPS_DEFAULT_PROFILES_FILE', 3: 'FASTDDS_DEFAULT_PROFILES_FILE'}
# Fast DDS's major version by the ROS 2 distro that ships it (REP 2000), where no Python
# distribution names it (a ROS install from apt).
FAST_DDS_BY_DISTRO = {'humble': 2, 'jazzy': 2, 'kilted': 3, 'rolling': 3}


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


def fast_dds_major(env: Mapping[str, str]) -> int | None:
    """The major version of the Fast DDS in use, or None if nothing says.

    From the installed wheels (``ros-fastdds`` 3.x on Kilted, ``ros-fastrtps`` 2.x on Jazzy),
    else from ``ROS_DISTRO``.
    """
    for distribution in ('ros-fastdds', 'ros-fastrtps'):
        try:
            return int(version(distribution).split('.')[0])
        except (PackageNotFoundError, ValueError):
            continue
    return FAST_DDS_BY_DISTRO.get(env.get('ROS_DISTRO', ''))


def profile_variables(env: Mapping[str, str]) -> tuple[str, ...]:
    """The environment variables that make the Fast DDS in use load a profile.

    Its own, or both names when its version is unknown (a 3.x then warns that the old one is
    deprecated).
    """
    major = fast_dds_major(env)
    return (PROFILE_VARIABLES[major],) if major in PROFILE_VARIABLES else tuple(
        PROFILE_VARIABLES.values())


def isolated_env(domain_id: int, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return ``base`` (default: os.environ) with DDS confined to loopback and ``domain_id``.

    Besides the discovery range, Fast DDS gets a transport profile that binds UDP to
    127.0.0.1 and shared memory only (``config/dds/fastdds_loopback.xml``), under the
    variable its version reads (:func:`profile_variables`).
    """
    env = dict(os.environ if base is None else base)
    env['ROS_DOMAIN_ID'] = str(domain_id)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    env['ROS_STATIC_PEERS'] = ''
    env.pop('ROS_LOCALHOST_ONLY', None)  # deprecated; conflicts with the discovery range
    env['RMW_IMPLEMENTATION'] = 'rmw_fastrtps_cpp'
    for name in PROFILE_VARIABLES.values():   # a caller's profile for another version
        env.pop(name, None)
    for name in profile_variables(env):
        env[name] = str(resolve_resource(LOOPBACK_PROFILE))
    return env
