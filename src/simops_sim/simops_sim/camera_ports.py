"""The simulator's camera topics: realsense2_camera's layout, pre-serialized (rclpy wiring).

For each camera ``/<ns>/<name>/color/image_raw`` (rgb8), ``.../color/camera_info``,
``.../aligned_depth_to_color/image_raw`` (32FC1, m) and its ``camera_info``, all in
``<name>_color_optical_frame`` and stamped with the frame's sim time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from simops_core.camera_rig import CameraRig, CameraSpec, Intrinsics
from simops_core.topics import QosSpec
from simops_ros.qos import qos_from_spec
from simops_sim.rgbd import RgbdImage
from simops_sim.wire import CameraInfoEncoder, ImageEncoder


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
