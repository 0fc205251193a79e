"""The cameras of a cell: names, resolution, intrinsics and calibration (no rclpy, no MuJoCo).

``config/cameras.yaml`` names each camera as realsense2_camera would (its topics live under
``/<namespace>/<name>/``, its optical frame is ``<name>_color_optical_frame``) and the MJCF
``<camera>`` that renders it. A camera may carry a calibration file: the real camera's
``camera_info`` YAML (camera_calibration_parsers' format) and, optionally, its extrinsics,
so the simulated camera matches the real one.

Frames: the optical frame is ROS's (REP 103/104): x right, y down, z forward, in m.
Pixels: OpenCV's, the centre of the top-left pixel is (0, 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simops_core.command_line import ConfigError
from simops_core.yaml_fields import Fields, is_number, read_yaml

CAMERAS_FILE = 'config/cameras.yaml'
MAX_SIDE = 4096   # pixels: a larger image is a typo


class CameraConfigError(ConfigError):
    """A cameras file or a calibration file is missing or has a bad field."""


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera: image size (pixels) and focal lengths and principal point (pixels)."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def from_fovy(cls, width: int, height: int, fovy: float) -> Intrinsics:
        """Square pixels over a vertical field of view ``fovy`` (deg), centred, as MuJoCo renders.

        OpenGL maps the frustum's edges onto the image's outer pixel edges, so the principal
        point is ``((width - 1) / 2, (height - 1) / 2)`` in pixel-centre coordinates.
        """
        f = 0.5 * height / math.tan(math.radians(fovy) / 2)
        return cls(width, height, f, f, (width - 1) / 2, (height - 1) / 2)

    @property
    def k(self) -> tuple[float, ...]:
        """``CameraInfo.k``: the 3x3 camera matrix, row-major."""
        return (self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0)

    @property
    def p(self) -> tuple[float, ...]:
        """``CameraInfo.p``: the 3x4 projection matrix of a monocular camera, row-major."""
        return (self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0)

    def resized(self, width: int, height: int) -> Intrinsics:
        """The same optics at another resolution (pixel edges scale, not pixel centres)."""
        sx, sy = width / self.width, height / self.height
        return Intrinsics(width, height, self.fx * sx, self.fy * sy,
                          (self.cx + 0.5) * sx - 0.5, (self.cy + 0.5) * sy - 0.5)

    def project(self, points: np.ndarray) -> np.ndarray:
        """Pixels ``(N, 2)`` (u, v) of ``points`` ``(N, 3)`` in the optical frame (m, z > 0)."""
        points = np.asarray(points, dtype=float).reshape(-1, 3)
        z = points[:, 2]
        return np.stack([self.fx * points[:, 0] / z + self.cx,
                         self.fy * points[:, 1] / z + self.cy], axis=1)


@dataclass(frozen=True)
class Extrinsics:
    """The optical frame's pose in the frame of MJCF body ``parent``.

    ``translation`` (3,) in m; ``rotation`` (4,) a unit quaternion (x, y, z, w), ROS's order.
    """

    parent: str
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]


@dataclass(frozen=True)
class Calibration:
    """A real camera's calibration: rectified intrinsics and, optionally, extrinsics."""

    source: str
    intrinsics: Intrinsics
    extrinsics: Extrinsics | None = None


@dataclass(frozen=True)
class CameraSpec:
    """One camera: ROS name, the MJCF camera that renders it, resolution (pixels)."""

    name: str
    mujoco_camera: str
    width: int
    height: int
    calibration: Calibration | None = None

    @property
    def frame_id(self) -> str:
        """The colour optical frame, which the aligned depth image shares (realsense2_camera)."""
        return f'{self.name}_color_optical_frame'

    def resized(self, width: int, height: int) -> CameraSpec:
        """This camera at another resolution; a calibrated camera keeps its own."""
        return self if self.calibration is not None else replace(self, width=width,
                                                                 height=height)


@dataclass(frozen=True)
class CameraTopics:
    """A camera's topics in realsense2_camera's layout (absolute names)."""

    color: str
    color_info: str
    depth: str
    depth_info: str

    def all(self) -> tuple[str, ...]:
        """Every topic, colour first."""
        return (self.color, self.color_info, self.depth, self.depth_info)


@dataclass(frozen=True)
class CameraRig:
    """The cameras of ``config/cameras.yaml`` under one topic namespace."""

    namespace: str
    cameras: dict[str, CameraSpec]

    def topics(self, name: str) -> CameraTopics:
        """The topics of camera ``name``: ``/<namespace>/<name>/color/image_raw`` and so on."""
        base = f'/{self.namespace}/{name}' if self.namespace else f'/{name}'
        return CameraTopics(f'{base}/color/image_raw', f'{base}/color/camera_info',
                            f'{base}/aligned_depth_to_color/image_raw',
                            f'{base}/aligned_depth_to_color/camera_info')

    def select(self, names: Sequence[str]) -> list[CameraSpec]:
        """The cameras ``names``, in that order; :class:`CameraConfigError` for an unknown one."""
        chosen = []
        for name in names:
            if name not in self.cameras:
                raise CameraConfigError(f'unknown camera {name!r}; config/cameras.yaml has '
                                        f'{", ".join(self.cameras) or "none"}')
            chosen.append(self.cameras[name])
        return chosen


def load_cameras(path: str | Path = CAMERAS_FILE) -> CameraRig:
    """Read a cameras file; every error names the file and the field."""
    file, raw = read_yaml(path, CameraConfigError, 'cameras file', version=1)
    f = Fields(str(file), CameraConfigError)
    f.known(raw, ('version', 'namespace', 'cameras'), '')
    namespace = f.get(raw, 'namespace', str).strip('/')
    cameras = {}
    for name, entry in f.mapping(raw.get('cameras') or {}, 'cameras').items():
        where = f'cameras.{name}'
        entry = f.mapping(entry, where)
        f.known(entry, ('mujoco_camera', 'width', 'height', 'calibration'), where)
        width, height = (_side(f, entry, key, f'{where}.{key}') for key in ('width', 'height'))
        calibration = None
        if entry.get('calibration'):
            calibration = load_calibration(f.get(entry, 'calibration', str,
                                                 f'{where}.calibration'))
            width, height = calibration.intrinsics.width, calibration.intrinsics.height
        cameras[str(name)] = CameraSpec(str(name), f.get(entry, 'mujoco_camera', str,
                                                         f'{where}.mujoco_camera'),
                                        width, height, calibration)
    return CameraRig(namespace, cameras)


def load_calibration(path: str | Path) -> Calibration:
    """A ``camera_info`` YAML (``image_width``, ``image_height``, ``projection_matrix``...).

    The rectified projection ``P`` gives the intrinsics, as ROS consumers of a rectified
    image use it; the optional ``extrinsics`` mapping (``parent``, ``translation``,
    ``rotation`` (x, y, z, w)) places the optical frame on an MJCF body.
    """
    file, raw = read_yaml(path, CameraConfigError, 'calibration file')
    f = Fields(str(file), CameraConfigError)
    raw = f.mapping(raw, '')
    width, height = (_side(f, raw, key, key) for key in ('image_width', 'image_height'))
    matrix = f.mapping(raw.get('projection_matrix') or raw.get('camera_matrix'),
                       'projection_matrix')
    data = matrix.get('data')
    if (not isinstance(data, list) or len(data) not in (9, 12)
            or not all(is_number(v) and math.isfinite(v) for v in data)):
        f.fail('projection_matrix.data', 'must be 9 or 12 finite numbers (row-major)')
    cols = len(data) // 3
    fx, cx, fy, cy = data[0], data[2], data[cols + 1], data[cols + 2]
    if fx <= 0 or fy <= 0:
        f.fail('projection_matrix.data', f'needs positive focal lengths, got {fx}, {fy}')
    extrinsics = None
    if raw.get('extrinsics') is not None:
        extrinsics = _extrinsics(f, f.mapping(raw['extrinsics'], 'extrinsics'))
    return Calibration(str(file), Intrinsics(width, height, float(fx), float(fy), float(cx),
                                             float(cy)), extrinsics)


def _extrinsics(f: Fields, raw: dict[str, Any]) -> Extrinsics:
    f.known(raw, ('parent', 'translation', 'rotation'), 'extrinsics')
    values = {}
    for key, size in (('translation', 3), ('rotation', 4)):
        v = raw.get(key)
        if (not isinstance(v, list) or len(v) != size
                or not all(is_number(x) and math.isfinite(x) for x in v)):
            f.fail(f'extrinsics.{key}', f'must be {size} finite numbers')
        values[key] = tuple(float(x) for x in v)
    norm = math.sqrt(sum(x * x for x in values['rotation']))
    if abs(norm - 1.0) > 1e-3:
        f.fail('extrinsics.rotation', f'must be a unit quaternion (x, y, z, w), norm {norm:.4f}')
    rotation = tuple(x / norm for x in values['rotation'])
    return Extrinsics(f.get(raw, 'parent', str, 'extrinsics.parent'),
                      values['translation'], rotation)   # type: ignore[arg-type]


def _side(f: Fields, table: dict[str, Any], key: str, field: str) -> int:
    value = f.get(table, key, int, field)
    if not 1 <= value <= MAX_SIDE:
        f.fail(field, f'must be 1 to {MAX_SIDE} pixels, got {value}')
    return value

