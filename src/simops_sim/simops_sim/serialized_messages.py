"""Pre-serialized joint state, clock, pose and robot state messages for the simulator.

rclpy converts a Python message field by field on every ``publish``; at 1 kHz that costs as
much CPU as the physics. These encoders serialize a template once (CDR, through
``rclpy.serialization``), locate the stamp and the number arrays in it, and afterwards only
overwrite those bytes; ``Publisher.publish`` accepts the resulting serialized bytes. Joint
names and frame id are fixed at construction, so every field's byte offset is fixed too.
Camera images (``sensor_msgs/Image``, whose pixels are the message's last field) and their
``CameraInfo`` are templated the same way, so a 320x240 frame costs one copy of its pixels.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from franka_msgs.msg import Errors, FrankaRobotState
from geometry_msgs.msg import PoseStamped
from rclpy.serialization import serialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState

from simops_core.camera_rig import Intrinsics
from simops_core.stamps import split_nanoseconds

_STAMP_SEC, _STAMP_NANOSEC = 0x5EC0FFEE & 0x7FFFFFFF, 0x0DDBA11
# Image encodings the simulator publishes: channels and pixel type.
IMAGE_ENCODINGS = {'rgb8': (3, np.dtype(np.uint8)), '32FC1': (1, np.dtype('<f4'))}


def _locate(buffer: bytes, values: np.ndarray) -> int:
    """Byte offset of ``values`` (as little-endian bytes) in ``buffer``; it must occur once."""
    pattern = values.astype('<f8').tobytes() if values.dtype.kind == 'f' else (
        values.astype('<u4').tobytes())
    offset = buffer.find(pattern)
    if offset < 0 or buffer.find(pattern, offset + 1) >= 0:
        raise RuntimeError('cannot locate a field in the serialized template message')
    return offset


class _Template:
    """A serialized message whose stamp (sec, nanosec) sits at a known offset."""

    def __init__(self, serialized: bytes) -> None:
        self.buffer = bytearray(serialized)
        stamp = np.array([_STAMP_SEC, _STAMP_NANOSEC], dtype=np.uint32)
        self._stamp = np.ndarray(2, dtype='<u4', buffer=self.buffer,
                                 offset=_locate(serialized, stamp))

    def set_stamp(self, nanoseconds: int) -> None:
        self._stamp[0], self._stamp[1] = split_nanoseconds(nanoseconds)


class JointStateEncoder(_Template):
    """Serialized ``sensor_msgs/JointState`` with fixed names and frame id."""

    def __init__(self, names: Sequence[str], frame_id: str) -> None:
        count = len(names)
        sentinels = np.pi * (1.0 + np.arange(3 * count).reshape(3, count))
        msg = JointState(name=list(names), position=sentinels[0].tolist(),
                         velocity=sentinels[1].tolist(), effort=sentinels[2].tolist())
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        serialized = serialize_message(msg)
        super().__init__(serialized)
        self.rows = tuple(np.ndarray(count, dtype='<f8', buffer=self.buffer,
                                     offset=_locate(serialized, row)) for row in sentinels)
        """Writable (n,) views of the position, velocity and effort arrays in the buffer."""

    def encode(self, nanoseconds: int) -> bytes:
        """Serialized message at sim time ``nanoseconds`` with the current ``rows``."""
        self.set_stamp(nanoseconds)
        return bytes(self.buffer)


class ClockEncoder(_Template):
    """Serialized ``rosgraph_msgs/Clock``."""

    def __init__(self) -> None:
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        super().__init__(serialize_message(msg))

    def encode(self, nanoseconds: int) -> bytes:
        """Serialized clock message at sim time ``nanoseconds``."""
        self.set_stamp(nanoseconds)
        return bytes(self.buffer)


class PoseStampedEncoder(_Template):
    """Serialized ``geometry_msgs/PoseStamped`` with a fixed frame id."""

    def __init__(self, frame_id: str) -> None:
        sentinels = np.pi * np.arange(1.0, 8.0)
        msg = PoseStamped()
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z, o.x, o.y, o.z, o.w = sentinels.tolist()
        serialized = serialize_message(msg)
        super().__init__(serialized)
        self._pose = np.ndarray(7, dtype='<f8', buffer=self.buffer,
                                offset=_locate(serialized, sentinels))

    def encode(self, nanoseconds: int, pos: np.ndarray, quat_wxyz: np.ndarray) -> bytes:
        """Serialized pose at sim time ``nanoseconds``: ``pos`` (3,) m, MuJoCo's (w, x, y, z).

        ROS orders the quaternion (x, y, z, w).
        """
        self.set_stamp(nanoseconds)
        self._pose[:3] = pos
        self._pose[3:6] = quat_wxyz[1:]
        self._pose[6] = quat_wxyz[0]
        return bytes(self.buffer)


class RobotStateEncoder(_Template):
    """Serialized ``franka_msgs/FrankaRobotState`` with the fields the simulator fills.

    Fixed joint ``names`` and ``frame_id``; per message: the header stamp, ``rows`` (6, 7)
    (measured q, dq, tau_J; desired q, dq; ``tau_ext_hat_filtered`` effort), ``time`` (s),
    ``robot_mode`` and the two error flag sets (by franka_msgs' ``Errors`` field names).
    Every other field stays zero; the nested headers are not stamped.
    """

    def __init__(self, names: Sequence[str], frame_id: str) -> None:
        self._flags = {name: k for k, name in enumerate(Errors.get_fields_and_field_types())}
        count = len(names)
        sentinels = np.pi * (1.0 + np.arange(6 * count).reshape(6, count))
        when = np.array([np.e * 1e3])

        # Flag sentinels: two 0/1 patterns no other field can repeat; the robot mode
        # (uint8) and the two Errors structs (bools) are the message's last fields, without
        # CDR padding between them.
        pattern = np.random.default_rng(0).integers(0, 2, (2, len(self._flags)), np.uint8)
        msg = FrankaRobotState()
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        rows = sentinels.tolist()
        for state, fields in ((msg.measured_joint_state, rows[:3]),
                              (msg.desired_joint_state, rows[3:5])):
            state.name = list(names)
            state.position, state.velocity = fields[0], fields[1]
            state.effort = fields[2] if len(fields) > 2 else []
        msg.tau_ext_hat_filtered.name = list(names)
        msg.tau_ext_hat_filtered.effort = rows[5]
        msg.time = float(when[0])
        msg.robot_mode = FrankaRobotState.ROBOT_MODE_AUTOMATIC_ERROR_RECOVERY
        for flags, bits in ((msg.current_errors, pattern[0]), (msg.last_motion_errors,
                                                               pattern[1])):
            for name, bit in zip(self._flags, bits, strict=True):
                setattr(flags, name, bool(bit))
        serialized = serialize_message(msg)
        super().__init__(serialized)
        self.rows = tuple(np.ndarray(count, dtype='<f8', buffer=self.buffer,
                                     offset=_locate(serialized, row)) for row in sentinels)
        """Writable (n,) views: measured q, dq, tau_J; desired q, dq; contact torque."""
        self._time = np.ndarray(1, dtype='<f8', buffer=self.buffer,
                                offset=_locate(serialized, when))
        flags = len(self._flags)
        start = serialized.find(pattern.tobytes())
        if start < 1 or serialized[start - 1] != msg.robot_mode:
            raise RuntimeError('cannot locate a field in the serialized template message')
        self._mode = start - 1
        self._current = slice(start, start + flags)
        self._last = slice(start + flags, start + 2 * flags)

    def encode(self, nanoseconds: int, time: float, mode: int, current: str | None,
               last: str | None) -> bytes:
        """Serialized state at ``nanoseconds`` with the current ``rows``.

        ``time`` sim s; ``mode`` a ``ROBOT_MODE_*`` value; ``current`` and ``last`` the
        ``Errors`` field set in each flag set, or None for none.
        """
        self.set_stamp(nanoseconds)
        self._time[0] = time
        self.buffer[self._mode] = mode
        for where, error in ((self._current, current), (self._last, last)):
            self.buffer[where] = bytes(where.stop - where.start)
            if error is not None:
                self.buffer[where.start + self._flags[error]] = 1
        return bytes(self.buffer)


class ImageEncoder(_Template):
    """Serialized ``sensor_msgs/Image`` of a fixed size, encoding and frame id.

    ``encoding`` is ``rgb8`` (pixels ``(H, W, 3)`` uint8) or ``32FC1`` (``(H, W)`` float32,
    little-endian, as REP 118 depth images in m).
    """

    def __init__(self, width: int, height: int, encoding: str, frame_id: str) -> None:
        channels, dtype = IMAGE_ENCODINGS[encoding]
        step = width * channels * dtype.itemsize
        msg = Image(height=height, width=width, encoding=encoding, is_bigendian=0, step=step)
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        msg.data = np.zeros(step * height, dtype=np.uint8).tobytes()
        serialized = serialize_message(msg)
        super().__init__(serialized)
        size = step * height
        offset = len(serialized) - size   # data, a uint8 sequence, is the last field
        if int.from_bytes(serialized[offset - 4:offset], 'little') != size:
            raise RuntimeError('cannot locate the pixels in the serialized template image')
        self.shape = (height, width, channels) if channels > 1 else (height, width)
        self.pixels = np.ndarray(self.shape, dtype=dtype, buffer=self.buffer, offset=offset)

    def encode(self, nanoseconds: int, pixels: np.ndarray) -> bytes:
        """The image stamped ``nanoseconds`` holding ``pixels`` (shape and type as built)."""
        self.set_stamp(nanoseconds)
        self.pixels[...] = pixels
        return bytes(self.buffer)


class CameraInfoEncoder(_Template):
    """Serialized ``sensor_msgs/CameraInfo`` of a rectified pinhole camera (no distortion)."""

    def __init__(self, intrinsics: Intrinsics, frame_id: str) -> None:
        msg = CameraInfo(height=intrinsics.height, width=intrinsics.width,
                         distortion_model='plumb_bob', d=[0.0] * 5, k=list(intrinsics.k),
                         r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                         p=list(intrinsics.p))
        msg.header.frame_id = frame_id
        msg.header.stamp.sec, msg.header.stamp.nanosec = _STAMP_SEC, _STAMP_NANOSEC
        super().__init__(serialize_message(msg))

    def encode(self, nanoseconds: int) -> bytes:
        """The camera info stamped ``nanoseconds``."""
        self.set_stamp(nanoseconds)
        return bytes(self.buffer)
