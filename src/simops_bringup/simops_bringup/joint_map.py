"""The simulator's ``joint_map`` for a robot whose spec names its joints unlike the model.

The Panda shares the FR3's kinematics, so ``models/fr3`` serves it: its spec joints
(``panda_joint1``...) map in order onto the joints of the spec the model is named after
(``fr3_joint1``...). Joint names are read from the MJCF with the standard library, following
``<include>``; no MuJoCo needed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from simops_bringup.arguments import GraphError, robot_names
from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec


def model_joint_names(model: str) -> set[str]:
    """Names of every joint in the MJCF ``model`` and the files it includes."""
    try:
        return _joint_names(resolve_resource(model))
    except (FileNotFoundError, OSError, ET.ParseError) as exc:
        raise GraphError(f'cannot read model {model}: {exc}') from None


def _joint_names(file: Path) -> set[str]:
    names = set()
    for element in ET.parse(file).getroot().iter():
        if element.tag == 'include':
            names |= _joint_names(file.parent / element.get('file', ''))
        elif element.tag in ('joint', 'freejoint') and element.get('name'):
            names.add(element.get('name', ''))
    return names


def joint_map(robot: str, model: str) -> tuple[str, ...]:
    """``spec_joint=model_joint`` pairs for ``robot`` on ``model``; empty when names match."""
    wanted = load_robot_spec(robot).joint_names
    present = model_joint_names(model)
    if set(wanted) <= present:
        return ()
    for other in robot_names():
        native = load_robot_spec(other).joint_names
        if set(native) <= present:
            return tuple(f'{a}={b}' for a, b in zip(wanted, native, strict=True))
    raise GraphError(f'model {model} has neither the joints of robot {robot} nor those of any '
                     'spec in config/robot; pass model:= a scene for that robot')
