"""The simulator's cameras on ROS: realsense2_camera's topics, the camera thread (rclpy).

For each camera ``/<ns>/<name>/color/image_raw`` (rgb8), ``.../color/camera_info``,
``.../aligned_depth_to_color/image_raw`` (32FC1, m) and its ``camera_info``, all in
``<name>_color_optical_frame``, pre-serialized and stamped with the frame's sim time.
:class:`SimCameras` starts :class:`~simops_sim.camera_loop.CameraLoop` on its own thread for
the sim node and reports it on ``/diagnostics``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from simops_core.camera_rig import (
    CameraRig,
    CameraSpec,
    Intrinsics,
    load_cameras,
)
from simops_core.command_line import ConfigError
from simops_core.topics import QosSpec, load_qos
from simops_ros.diagnostics import diagnostic_array, status_name
from simops_ros.qos import qos_from_spec
from simops_sim.appearance import load_appearance
from simops_sim.camera_loop import CameraLoop
from simops_sim.rgbd import RenderError, RgbdImage, gl_backend
from simops_sim.serialized_messages import CameraInfoEncoder, ImageEncoder
from simops_sim.stepper import Stepper


class CameraPorts:
    """Publishers and encoders of ``cameras`` on ``node``; :meth:`publish` per frame."""

    def __init__(self, node: Node, rig: CameraRig, cameras: Sequence[CameraSpec],
                 intrinsics: Mapping[str, Intrinsics], qos: QosSpec) -> None:
        profile = qos_from_spec(qos)
        self._ports = {}
        for spec in cameras:
            topics = rig.topics(spec.name)
            info = CameraInfoEncoder(intrinsics[spec.name], spec.frame_id)
            self._ports[spec.name] = (
                node.create_publisher(Image, topics.color, profile),
                ImageEncoder(spec.width, spec.height, 'rgb8', spec.frame_id),
                node.create_publisher(CameraInfo, topics.color_info, profile),
                node.create_publisher(Image, topics.depth, profile),
                ImageEncoder(spec.width, spec.height, '32FC1', spec.frame_id),
                node.create_publisher(CameraInfo, topics.depth_info, profile),
                info)

    def publish(self, images: Sequence[RgbdImage], stamp_ns: int) -> None:
        """Publish each camera's colour, depth and both camera infos stamped ``stamp_ns``."""
        for image in images:
            color_pub, color, color_info, depth_pub, depth, depth_info, info = (
                self._ports[image.camera])
            color_pub.publish(color.encode(stamp_ns, image.color))
            depth_pub.publish(depth.encode(stamp_ns, image.depth))
            stamped = info.encode(stamp_ns)
            color_info.publish(stamped)
            depth_info.publish(stamped)


class SimCameras:
    """The sim node's cameras (its ``cameras``, ``camera_*`` and ``randomize`` settings).

    Opens the renderer on a camera thread and waits for it, so a missing OpenGL or an
    unknown camera refuses the node's start (:class:`ConfigError`, one line); later, a
    failure of the thread goes to ``on_failure``.
    """

    def __init__(self, node: Node, stepper: Stepper, settings: Any, running: threading.Event,
                 on_failure: Callable[[BaseException], None]) -> None:
        s, self._node, self.rate = settings, node, settings.camera_rate
        rig = load_cameras(s.camera_config)
        chosen = [spec.resized(s.camera_width, s.camera_height) for spec in rig.select(s.cameras)]
        qos = load_qos('image')
        appearance = load_appearance() if s.randomize else None
        self.loop = CameraLoop(stepper, chosen, s.camera_rate, appearance, s.seed)
        self._ports: CameraPorts | None = None
        started = threading.Event()
        failed: list[BaseException] = []

        def render() -> None:
            try:
                self.loop.run(running, self._publish)
            except Exception as exc:   # at start: refuses the node; later: fatal
                failed.append(exc)
                if started.is_set():
                    on_failure(exc)
                self.loop.ready.set()

        self._thread = threading.Thread(target=render, name='cameras', daemon=True)
        self._thread.start()
        self.loop.ready.wait()
        if failed:
            raise ConfigError(str(failed[0]) if isinstance(failed[0], RenderError)
                              else repr(failed[0]))
        started.set()
        self._ports = CameraPorts(node, rig, chosen, self.loop.intrinsics, qos)
        names = ', '.join(f'{c.name} {c.width}x{c.height}' for c in chosen)
        node.get_logger().info(f'rendering {names} RGB-D at {s.camera_rate:g} Hz '
                               f'(MUJOCO_GL={gl_backend()})')

    def _publish(self, images: list[RgbdImage], stamp_ns: int) -> None:
        if self._ports is not None:
            self._ports.publish(images, stamp_ns)

    def status(self, realtime_factor: float, hardware_id: str, stamp_ns: int
               ) -> DiagnosticStatus:
        """The ``cameras`` status of the window since the last one; WARN below the rate."""
        values = self.loop.report()
        slow = values['camera_rate_hz'] < 0.9 * self.rate * realtime_factor
        return diagnostic_array(status_name(self._node, 'cameras'), hardware_id,
                                'warn' if slow else 'ok',
                                'rendering below camera_rate' if slow else 'ok', values,
                                stamp_ns).status[0]

    def join(self) -> None:
        """Wait for the camera thread (after its ``running`` cleared)."""
        self._thread.join(timeout=5.0)
