"""The sim node's cameras as a real process over DDS: realsense2_camera's topics, sim-time
stamps at camera_rate, CameraInfo from the field of view, render time on /diagnostics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from ros_helpers import RosProbe
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image
from sim_helpers import qos, stamp, start_sim, topic

from simops_core.camera_rig import Intrinsics, load_cameras
from simops_core.topics import load_qos
from simops_ros.qos import qos_from_spec

RIG = load_cameras()
IMAGE_QOS = qos_from_spec(load_qos('image'))


def test_scene_and_wrist_rgbd_on_realsense_topics_stamped_with_sim_time(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    for name in ('scene', 'wrist'):
        t = RIG.topics(name)
        for image_topic in (t.color, t.depth):
            ros_probe.subscribe(image_topic, Image, IMAGE_QOS)
        for info_topic in (t.color_info, t.depth_info):
            ros_probe.subscribe(info_topic, CameraInfo, IMAGE_QOS)
    ros_probe.subscribe(topic('clock').name, Clock, qos('clock'))
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray)
    with start_sim(tmp_path, 'cameras:=[scene, wrist]', 'camera_rate:=20.0',
                   'camera_width:=160', 'camera_height:=120') as node:
        scene = RIG.topics('scene')
        colors = ros_probe.wait_for_messages(scene.color, count=30, timeout=60)
        diags = ros_probe.wait_for_messages(topic('diagnostics').name, count=3, timeout=30)
        clock = ros_probe.wait_for_messages(topic('clock').name)[-1].clock
        depth = ros_probe.wait_for_messages(scene.depth, count=5)[-1]
        info = ros_probe.wait_for_messages(scene.color_info, count=5)[-1]
        depth_info = ros_probe.wait_for_messages(scene.depth_info, count=5)[-1]
        wrist = ros_probe.wait_for_messages(RIG.topics('wrist').color, count=5)[-1]
        node.stop()
    image = colors[-1]
    assert (image.encoding, image.width, image.height, image.step) == ('rgb8', 160, 120, 480)
    assert image.header.frame_id == 'scene_color_optical_frame'
    pixels = np.frombuffer(bytes(image.data), np.uint8).reshape(120, 160, 3)
    assert pixels.std() > 10   # a rendered scene, not a blank buffer
    assert (depth.encoding, depth.width, depth.height, depth.step) == ('32FC1', 160, 120, 640)
    metres = np.frombuffer(bytes(depth.data), '<f4').reshape(120, 160)
    seen = metres[np.isfinite(metres)]
    assert seen.size > 1000 and 0.3 < np.median(seen) < 5.0   # the table, about 1-2 m away
    assert depth.header.frame_id == info.header.frame_id == 'scene_color_optical_frame'
    assert wrist.header.frame_id == 'wrist_color_optical_frame'
    expected = Intrinsics.from_fovy(160, 120, 42.5)   # the MJCF scene camera's fovy
    np.testing.assert_allclose(info.k, expected.k)
    np.testing.assert_allclose(info.p, expected.p)
    assert (info.width, info.height, info.distortion_model) == (160, 120, 'plumb_bob')
    assert depth_info.k.tolist() == info.k.tolist()
    # Stamps are sim time (the /clock the node publishes), one frame per 1/20 s of it.
    stamps = np.array([stamp(m) for m in colors])
    assert stamps[-1] <= clock.sec + 1e-9 * clock.nanosec
    periods = np.diff(stamps)
    assert np.all(periods > 0)
    assert np.median(periods) == pytest.approx(0.05, abs=0.0015)
    statuses = {s.name: {kv.key: kv.value for kv in s.values} for s in diags[-1].status}
    cams = statuses['sim: cameras']
    assert float(cams['render_ms_mean']) > 0 and int(cams['cameras']) == 2
    assert float(statuses['sim: physics']['realtime_factor']) > 0.9


def test_an_unknown_camera_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    with start_sim(tmp_path, 'cameras:=[ceiling]') as node:
        assert node.wait(timeout=30) == 2
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert lines[-1].endswith("unknown camera 'ceiling'; config/cameras.yaml has scene, wrist")
    assert 'Traceback' not in node.output


def test_no_offscreen_opengl_refuses_to_start_with_one_line(tmp_path: Path,
                                                            ros_env: dict[str, str]) -> None:
    env = {**ros_env, 'MUJOCO_GL': 'glx'}   # valid for MuJoCo, but no offscreen context
    with start_sim(tmp_path, 'cameras:=[scene]', env=env) as node:
        assert node.wait(timeout=60) == 2
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert "MUJOCO_GL='glx' cannot render offscreen here; use egl or osmesa" in lines[-1]
    assert 'Traceback' not in node.output


def test_randomize_draws_a_new_appearance_on_every_reset(ros_probe: RosProbe,
                                                         tmp_path: Path) -> None:
    from ros_helpers import wait_until
    from std_srvs.srv import Trigger

    color = RIG.topics('scene').color
    ros_probe.subscribe(color, Image, IMAGE_QOS)

    def pixels(msg: Image) -> np.ndarray:
        return np.frombuffer(bytes(msg.data), np.uint8).astype(int)

    with start_sim(tmp_path, 'cameras:=[scene]', 'camera_width:=160', 'camera_height:=120',
                   'randomize:=true', 'seed:=4') as node:
        before = ros_probe.wait_for_messages(color, count=10, timeout=60)
        still = np.abs(pixels(before[-1]) - pixels(before[-2])).mean()
        client = ros_probe.node.create_client(Trigger, '/sim/reset')
        assert client.wait_for_service(timeout_sec=20)
        future = client.call_async(Trigger.Request())
        assert wait_until(future.done, 10) and future.result().success
        count = len(ros_probe.messages(color))
        after = ros_probe.wait_for_messages(color, count=count + 10, timeout=30)
        node.stop()
    changed = np.abs(pixels(after[-1]) - pixels(before[-1])).mean()
    assert still < 1.0 < 5.0 < changed, (still, changed)   # the arm holds; the looks change
