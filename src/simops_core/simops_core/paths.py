"""Find workspace resources (``config/``, ``models/``, ``launch/``) by relative path.

A relative path such as ``config/robot/fr3.yaml`` is looked up, in order:

1. relative to the current directory;
2. in the share directory of ``simops_bringup`` (where ``colcon build`` installs the
   workspace's config, models and launch files), found through the ament index;
3. in the source workspace that holds this file (an editable or ``--symlink-install``
   checkout), identified by its ``colcon.meta``.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARE_PACKAGE = 'simops_bringup'
WORKSPACE_MARKER = 'colcon.meta'
ROBOT_SCENE = 'models/{robot}/scene.xml'   # a robot's shipped MJCF scene (robot: spec name)


def resolve_resource(path: str | Path) -> Path:
    """Return an existing file or directory for ``path``; raise FileNotFoundError if none."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        if candidate.exists():
            return candidate
        raise FileNotFoundError(f'{candidate} does not exist')
    searched = [Path.cwd(), *resource_roots()]
    for root in searched:
        if (root / candidate).exists():
            return (root / candidate).resolve()
    places = ', '.join(str(p) for p in searched)
    raise FileNotFoundError(f'{path} not found in {places}; pass an absolute path or run '
                            'from the workspace root')


def resource_roots() -> list[Path]:
    """Directories that hold config/, models/ and launch/, most specific first."""
    roots = []
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        share = Path(prefix) / 'share' / SHARE_PACKAGE
        if prefix and share.is_dir():
            roots.append(share)
    workspace = source_workspace()
    if workspace is not None:
        roots.append(workspace)
    return roots


def source_workspace() -> Path | None:
    """The checkout this module lives in, if it is run from source; else None."""
    for parent in Path(__file__).resolve().parents:
        if (parent / WORKSPACE_MARKER).is_file() and (parent / 'config').is_dir():
            return parent
    return None
