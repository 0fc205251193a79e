"""Appearance randomisation of rendered cameras: lights, colours, textures, camera poses.

The ranges live beside the physics ranges, in ``config/randomization.yaml`` (``appearance``),
and are drawn at the same moments (start and every reset). They change only a renderer's
own copy of the model (:class:`simops_sim.rgbd.RgbdRenderer`), never the physics. Camera pose
jitter moves what a camera renders, not the extrinsics it publishes: a real camera's
calibration is never exact either. No rclpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simops_core.yaml_fields import Fields, is_number, read_yaml
from simops_sim.randomization import RANDOMIZATION_FILE, RandomizationError


@dataclass(frozen=True)
class AppearanceRanges:
    """Full ranges of the appearance draws.

    ``light`` (low, high) factor on light diffuse colours; ``light_tilt`` (deg); ``color``
    largest RGB change (0-1 scale); ``texture`` largest tint factor change;
    ``camera_position`` (m) per axis; ``camera_rotation`` (deg) about a random axis.
    """

    light: tuple[float, float]
    light_tilt: float
    color: float
    texture: float
    camera_position: float
    camera_rotation: float


class Appearance:
    """A model's nominal looks, and draws around them written into that model.

    ``model`` is the renderer's own copy; :meth:`apply` returns the texture ids whose data
    changed, which the renderer uploads to the GL context.
    """

    def __init__(self, model: mujoco.MjModel, ranges: AppearanceRanges) -> None:
        self.model, self.ranges = model, ranges
        self._geom_rgba = model.geom_rgba.copy()
        self._mat_rgba = model.mat_rgba.copy()
        self._light_diffuse = model.light_diffuse.copy()
        self._light_dir = model.light_dir.copy()
        self._headlight = np.array(model.vis.headlight.diffuse)
        self._cam_pos = model.cam_pos.copy()
        self._cam_quat = model.cam_quat.copy()
        self._tex_data = model.tex_data.copy()

    def apply(self, rng: np.random.Generator) -> list[int]:
        """Write one draw into the model; the ids of the retinted textures."""
        m, r = self.model, self.ranges
        m.geom_rgba[:, :3] = np.clip(self._geom_rgba[:, :3] + rng.uniform(
            -r.color, r.color, (m.ngeom, 3)), 0.0, 1.0)
        m.mat_rgba[:, :3] = np.clip(self._mat_rgba[:, :3] + rng.uniform(
            -r.color, r.color, (m.nmat, 3)), 0.0, 1.0)
        gains = rng.uniform(*r.light, m.nlight + 1)
        m.light_diffuse[:] = np.clip(self._light_diffuse * gains[:m.nlight, None], 0.0, 1.0)
        m.vis.headlight.diffuse = np.clip(self._headlight * gains[-1], 0.0, 1.0)
        for i in range(m.nlight):
            m.light_dir[i] = _tilt(self._light_dir[i], math.radians(r.light_tilt), rng)
        m.cam_pos[:] = self._cam_pos + rng.uniform(-r.camera_position, r.camera_position,
                                                   (m.ncam, 3))
        for i in range(m.ncam):
            turn = np.zeros(4)
            axis = rng.normal(size=3)
            angle = math.radians(rng.uniform(0.0, r.camera_rotation))
            mujoco.mju_axisAngle2Quat(turn, axis / np.linalg.norm(axis), angle)
            mujoco.mju_mulQuat(m.cam_quat[i], self._cam_quat[i], turn)
        changed = []
        for t in range(m.ntex):
            start, count = int(m.tex_adr[t]), int(m.tex_width[t] * m.tex_height[t])
            channels = int(m.tex_nchannel[t])
            if channels < 3 or count == 0:
                continue
            tint = rng.uniform(1.0 - r.texture, 1.0 + r.texture, channels)
            tint[3:] = 1.0
            base = self._tex_data[start:start + count * channels].reshape(count, channels)
            m.tex_data[start:start + count * channels] = np.clip(
                base * tint, 0, 255).astype(np.uint8).ravel()
            changed.append(t)
        return changed


def _tilt(direction: np.ndarray, max_angle: float, rng: np.random.Generator) -> np.ndarray:
    """``direction`` (3,) turned by up to ``max_angle`` (rad) about a random perpendicular."""
    norm = float(np.linalg.norm(direction))
    if norm == 0.0 or max_angle == 0.0:
        return direction.copy()
    d = direction / norm
    axis = np.cross(d, rng.normal(size=3))
    axis /= np.linalg.norm(axis)
    angle = rng.uniform(0.0, max_angle)
    # Rodrigues' rotation of d about axis (perpendicular to d)
    return norm * (d * math.cos(angle) + np.cross(axis, d) * math.sin(angle))


def load_appearance(path: str | Path = RANDOMIZATION_FILE) -> AppearanceRanges:
    """The ``appearance`` mapping of a randomisation file; every field is required."""
    file, raw = read_yaml(path, RandomizationError, 'randomisation')
    check = Fields(str(file), RandomizationError)
    table = check.mapping(check.mapping(raw, '').get('appearance'), 'appearance')
    names = tuple(f.name for f in fields(AppearanceRanges))
    check.known(table, names, 'appearance')
    values: dict[str, Any] = {}
    for name in names:
        where = f'appearance.{name}'
        if name == 'light':
            value = table.get(name)
            if not (isinstance(value, list) and len(value) == 2
                    and all(is_number(v) for v in value) and 0 <= value[0] <= value[1]):
                check.fail(where, f'must be [low, high] with 0 <= low <= high, got {value!r}')
            values[name] = (float(value[0]), float(value[1]))
        else:
            values[name] = check.number(table, name, where, minimum=0.0)
    return AppearanceRanges(**values)
