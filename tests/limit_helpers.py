"""The FR3's limits from config/robot/fr3.yaml's raw numbers, in plain floats.

Computed here, independently of the code under test (``simops_core.robot_spec``,
``simops_core.safety``, ``simops_sim.reflexes``), for the safety and reflex tests.
"""

from __future__ import annotations

import math

import numpy as np
import yaml

from simops_core.paths import resolve_resource

RAW = yaml.safe_load(resolve_resource('config/robot/fr3.yaml').read_text())
ARM, GRIPPER = RAW['arm'], RAW['gripper']


def allowed_velocity(position: np.ndarray) -> tuple[list[float], list[float]]:
    """Franka's position-based limits (rad/s) at ``position``, joint by joint in plain floats:

    upper = min(v_max, max(0, -v_offset + sqrt(max(0, 2 a_dec (q_max - q))))), lower likewise
    ("Robot and interface specifications", "Position-Based Velocity Limits")."""
    lower, upper = [], []
    for i, q in enumerate(position):
        v_max, offset, dec = ARM['velocity'][i], ARM['velocity_offset'][i], ARM['deceleration'][i]
        q_min, q_max = ARM['position_lower'][i], ARM['position_upper'][i]
        upper.append(min(v_max, max(0.0, -offset + math.sqrt(max(0.0, 2 * dec * (q_max - q))))))
        lower.append(max(-v_max, min(0.0, offset - math.sqrt(max(0.0, 2 * dec * (q - q_min))))))
    return lower, upper
