"""Offscreen RGB-D rendering of a model's cameras (no rclpy).

:class:`RgbdRenderer` keeps its own copy of the model and its own ``MjData``: it renders a
:class:`Snapshot` of the physics state, so the physics never waits for a frame, and the
appearance randomisation (:mod:`simops_sim.appearance`) and the calibration touch only the
copy. One OpenGL context serves every camera, made current on the thread that renders.
Each camera costs one render pass, which fills the colour and the depth buffer together.

Headless rendering uses ``MUJOCO_GL`` (``egl``, the default without a display, or
``osmesa``): on a machine without a GPU, Mesa's software rasteriser (Debian ``libegl1
libegl-mesa0 libgl1-mesa-dri``). What it costs there is set by the render flags: shadows
cost about 10x the rest of a frame, reflections 2x (``bench/camera.py``), so both are off,
as are the skybox and multisampling (which also made depth 0.15 % short); cameras are real
sensors, not the viewer. Mesa renders on one thread (``LP_NUM_THREADS``, unless set).

Images: colour ``(H, W, 3)`` uint8 RGB and depth ``(H, W)`` float32 metres along the
optical axis (NaN where nothing is within the far plane), top row first.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from simops_core.camera_rig import CameraSpec, Intrinsics
from simops_sim.appearance import Appearance, AppearanceRanges

# Render flags off for speed on a software rasteriser (see the module docstring).
FAST_FLAGS_OFF = (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION,
                  mujoco.mjtRndFlag.mjRND_SKYBOX)
SENSOR_SCALE = 1e-3   # MJCF length units per pixel of a calibrated camera's sensor
BACKENDS = ('egl', 'osmesa', 'glfw')


class RenderError(RuntimeError):
    """No offscreen OpenGL context, or a camera the model does not have."""


@dataclass(frozen=True)
class Snapshot:
    """What a frame needs of the physics state.

    Positions ``qpos`` (nq,), ``mocap_pos`` (nmocap, 3), ``mocap_quat`` (nmocap, 4); the sim
    ``time`` (s).
    """

    time: float
    qpos: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray


def snapshot(data: mujoco.MjData) -> Snapshot:
    """A copy of ``data``'s positions; cheap enough to take under the physics lock."""
    return Snapshot(float(data.time), data.qpos.copy(), data.mocap_pos.copy(),
                    data.mocap_quat.copy())


@dataclass(frozen=True)
class RgbdImage:
    """One camera's frame: ``color`` (H, W, 3) uint8, ``depth`` (H, W) float32 m."""

    camera: str
    time: float
    color: np.ndarray
    depth: np.ndarray


def gl_backend() -> str:
    """The OpenGL backend: ``MUJOCO_GL`` if set, else glfw with a display and egl without."""
    chosen = os.environ.get('MUJOCO_GL', '').lower().strip()
    if chosen:
        return chosen
    return 'glfw' if os.environ.get('DISPLAY') else 'egl'


def _gl_context(width: int, height: int) -> object:
    # Mesa's llvmpipe rasterises on as many threads as there are cores; on a small machine
    # its bursts starve the physics, DDS and the recorder (1 kHz joint states were lost
    # beside two cameras on 2 cores). One thread renders a 320x240 frame in ~5 ms.
    os.environ.setdefault('LP_NUM_THREADS', '1')
    backend = gl_backend()
    if backend not in BACKENDS:
        raise RenderError(f'MUJOCO_GL={backend!r} cannot render offscreen here; use egl or '
                          'osmesa')
    try:
        if backend == 'egl':
            from mujoco.egl import GLContext
        elif backend == 'osmesa':
            from mujoco.osmesa import GLContext
        else:
            from mujoco.glfw import GLContext
        context = GLContext(width, height)
        context.make_current()
    except Exception as exc:  # PyOpenGL and the GL libraries raise many kinds
        raise RenderError(
            f'cannot open an offscreen OpenGL context with MUJOCO_GL={backend} '
            f'({" ".join(str(exc).split())[:200]}); install Debian libegl1 libegl-mesa0 '
            'libgl1-mesa-dri (egl) or libosmesa6 (MUJOCO_GL=osmesa)') from None
    return context


def metric_depth(buffer: np.ndarray, near: float, far: float) -> np.ndarray:
    """Depth (m) (H, W) float32 from a reversed-z depth ``buffer`` (H, W).

    The buffer is 1 at ``near`` and 0 at ``far`` (m). The perspective projection stores
    ``(n / z) (f - z) / (f - n)`` for a point at distance ``z`` along the axis, so
    ``z = f n / (n + buffer (f - n))``; the far plane (nothing rendered) is NaN.
    """
    n, f = near, far
    z = buffer.astype(np.float64)
    depth = (f * n / (n + z * (f - n))).astype(np.float32)
    depth[z <= 0.0] = np.nan
    return depth


class RgbdRenderer:
    """Renders ``cameras`` of ``model`` offscreen; create, use and close on one thread.

    A camera's MJCF ``fovy`` and resolution give its intrinsics, unless it has a
    calibration, whose intrinsics and extrinsics are written into this renderer's model.
    """

    def __init__(self, model: mujoco.MjModel, cameras: Sequence[CameraSpec],
                 appearance: AppearanceRanges | None = None) -> None:
        self.model = copy.copy(model)
        self.data = mujoco.MjData(self.model)
        self.cameras = tuple(cameras)
        self._ids = []
        for spec in self.cameras:
            cam = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, spec.mujoco_camera)
            if cam < 0:
                names = [self.model.camera(i).name for i in range(self.model.ncam)]
                raise RenderError(f'camera {spec.name}: the model has no camera '
                                  f'{spec.mujoco_camera!r} (it has {names or "none"}); add a '
                                  '<camera> or fix config/cameras.yaml')
            self._ids.append(cam)
            if spec.calibration is not None:
                self._calibrate(cam, spec)
        self.intrinsics = {spec.name: self._intrinsics(cam, spec)
                           for cam, spec in zip(self._ids, self.cameras, strict=True)}
        width = max((s.width for s in self.cameras), default=1)
        height = max((s.height for s in self.cameras), default=1)
        self.model.vis.global_.offwidth = max(width, self.model.vis.global_.offwidth)
        self.model.vis.global_.offheight = max(height, self.model.vis.global_.offheight)
        self.model.vis.quality.offsamples = 0
        self._gl = _gl_context(width, height)
        self._context = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_50)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        # Depth read back reversed (1 at near, 0 at far): float precision where it matters.
        self._context.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self.scene = mujoco.MjvScene(self.model, maxgeom=1000)
        for flag in FAST_FLAGS_OFF:
            self.scene.flags[flag] = 0
        # After the calibration: pose jitter is around the calibrated pose.
        self._appearance = None if appearance is None else Appearance(self.model, appearance)
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        extent = self.model.stat.extent
        self.near = float(self.model.vis.map.znear * extent)   # m
        self.far = float(self.model.vis.map.zfar * extent)     # m

    def _calibrate(self, cam: int, spec: CameraSpec) -> None:
        assert spec.calibration is not None
        k = spec.calibration.intrinsics
        s = SENSOR_SCALE
        m = self.model
        m.cam_resolution[cam] = (k.width, k.height)
        m.cam_sensorsize[cam] = (k.width * s, k.height * s)
        # MuJoCo's principal point is an offset (length units) from the sensor centre
        # towards the image's top-left corner (checked in tests/sim/test_cameras.py).
        m.cam_intrinsic[cam] = (k.fx * s, k.fy * s, (k.width / 2 - 0.5 - k.cx) * s,
                                (k.height / 2 - 0.5 - k.cy) * s)
        extrinsics = spec.calibration.extrinsics
        if extrinsics is not None:
            body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, extrinsics.parent)
            if body < 0:
                raise RenderError(f'camera {spec.name}: calibration {spec.calibration.source} '
                                  f'puts it on body {extrinsics.parent!r}, which the model '
                                  'does not have')
            if int(m.cam_bodyid[cam]) != body:
                raise RenderError(f'camera {spec.name}: calibration parent '
                                  f'{extrinsics.parent!r} is not the body of MJCF camera '
                                  f'{spec.mujoco_camera!r} '
                                  f'({m.body(int(m.cam_bodyid[cam])).name!r})')
            # A MuJoCo camera looks along its -z with y up, the optical frame along +z with
            # y down: the same x axis, turned 180 deg about it.
            x, y, z, w = extrinsics.rotation
            mujoco.mju_mulQuat(m.cam_quat[cam], np.array([w, x, y, z]),
                               np.array([0.0, 1.0, 0.0, 0.0]))
            m.cam_pos[cam] = extrinsics.translation
            m.cam_mode[cam] = mujoco.mjtCamLight.mjCAMLIGHT_FIXED

    def _intrinsics(self, cam: int, spec: CameraSpec) -> Intrinsics:
        if spec.calibration is not None:
            return spec.calibration.intrinsics
        return Intrinsics.from_fovy(spec.width, spec.height, float(self.model.cam_fovy[cam]))

    def randomize(self, rng: np.random.Generator) -> None:
        """Draw a new appearance (lights, colours, textures, camera poses) from ``rng``.

        Call on the rendering thread; without appearance ranges this does nothing.
        """
        if self._appearance is None:
            return
        self._gl.make_current()   # type: ignore[attr-defined]
        for texture in self._appearance.apply(rng):
            mujoco.mjr_uploadTexture(self.model, self._context, texture)

    def set_state(self, state: Snapshot) -> None:
        """Pose the copy as ``state`` (kinematics, cameras and lights only)."""
        d = self.data
        d.qpos[:], d.mocap_pos[:], d.mocap_quat[:] = state.qpos, state.mocap_pos, state.mocap_quat
        d.time = state.time
        mujoco.mj_kinematics(self.model, d)
        mujoco.mj_camlight(self.model, d)

    def render(self, state: Snapshot) -> list[RgbdImage]:
        """Every camera's colour and depth of ``state``."""
        self.set_state(state)
        return [self.render_camera(i) for i in range(len(self.cameras))]

    def render_camera(self, index: int) -> RgbdImage:
        """Camera ``index``'s frame of the posed copy (:meth:`set_state`)."""
        spec, cam = self.cameras[index], self._ids[index]
        self._gl.make_current()   # type: ignore[attr-defined]
        self._camera.fixedcamid = cam
        mujoco.mjv_updateScene(self.model, self.data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL, self.scene)
        rect = mujoco.MjrRect(0, 0, spec.width, spec.height)
        mujoco.mjr_render(rect, self.scene, self._context)
        color = np.empty((spec.height, spec.width, 3), dtype=np.uint8)
        buffer = np.empty((spec.height, spec.width), dtype=np.float32)
        mujoco.mjr_readPixels(color, buffer, rect, self._context)
        return RgbdImage(spec.name, float(self.data.time), np.flipud(color),
                         metric_depth(np.flipud(buffer), self.near, self.far))

    def close(self) -> None:
        """Free the GL resources (on the rendering thread)."""
        self._gl.make_current()   # type: ignore[attr-defined]
        self._context.free()
        self._gl.free()   # type: ignore[attr-defined]
