"""Rendered cameras: intrinsics against where things render, metric depth, calibration files,
appearance randomisation (no ROS here; the node's topics are in test_camera_node.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest

from simops_core.camera_rig import (
    Calibration,
    CameraConfigError,
    Extrinsics,
    Intrinsics,
    load_calibration,
    load_cameras,
)
from simops_sim.appearance import load_appearance
from simops_sim.model_index import load_model
from simops_sim.rgbd import RgbdRenderer, snapshot

SCENE = 'models/fr3/scene.xml'


@pytest.fixture(scope='module')
def scene() -> tuple[mujoco.MjModel, mujoco.MjData]:
    model = load_model(SCENE)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY,
                                                                'home'))
    mujoco.mj_forward(model, data)
    return model, data


def optical_pose(renderer: RgbdRenderer, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Camera ``index``'s optical frame in the world: position (3,), rotation (3, 3)."""
    cam = mujoco.mj_name2id(renderer.model, mujoco.mjtObj.mjOBJ_CAMERA,
                            renderer.cameras[index].mujoco_camera)
    pos = renderer.data.cam_xpos[cam].copy()
    rot = renderer.data.cam_xmat[cam].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
    return pos, rot


def rendered_centroid(renderer: RgbdRenderer, data: mujoco.MjData, index: int,
                      target: np.ndarray) -> tuple[np.ndarray, int]:
    """Mean pixel (u, v) of the pixels the goal sphere changes when placed at ``target``."""
    model = renderer.model
    goal = int(model.body('goal').mocapid[0])
    away, there = snapshot(data), snapshot(data)
    away.mocap_pos[goal] = (50.0, 50.0, 50.0)
    there.mocap_pos[goal] = target
    before = renderer.render(away)[index].color.astype(int)
    after = renderer.render(there)[index].color.astype(int)
    v, u = np.nonzero(np.abs(after - before).sum(axis=2) > 0)
    return np.array([u.mean(), v.mean()]), len(u)


CALIBRATED = Intrinsics(320, 240, 205.0, 231.0, 141.3, 131.9)   # off-centre, fx != fy


@pytest.mark.parametrize('camera,calibrated', [('scene', False), ('wrist', False),
                                               ('wrist', True)])
def test_a_known_point_projects_through_camera_info_to_where_it_renders(
        scene: tuple[mujoco.MjModel, mujoco.MjData], camera: str, calibrated: bool) -> None:
    model, data = scene
    spec = load_cameras().select([camera])[0]
    if calibrated:
        spec = replace(spec, calibration=Calibration('test', CALIBRATED))
    renderer = RgbdRenderer(model, [spec])
    try:
        renderer.set_state(snapshot(data))
        pos, rot = optical_pose(renderer, 0)
        intrinsics = renderer.intrinsics[camera]
        if calibrated:
            assert intrinsics == CALIBRATED
        for offset in ([0.04, -0.03, 0.40], [-0.06, 0.05, 0.55], [0.0, 0.0, 0.3]):
            target = pos + rot @ np.array(offset)
            rendered, pixels = rendered_centroid(renderer, data, 0, target)
            assert pixels > 50   # the 2 cm sphere covers a blob, not a pixel or two
            projected = intrinsics.project(rot.T @ (target - pos))[0]
            assert np.linalg.norm(rendered - projected) < 1.0, (rendered, projected)
    finally:
        renderer.close()


def test_depth_is_metres_along_the_optical_axis(
        scene: tuple[mujoco.MjModel, mujoco.MjData]) -> None:
    """Rays through pixels that see the table top (z = 0) meet it at the rendered depth."""
    model, data = scene
    renderer = RgbdRenderer(model, load_cameras().select(['scene']))
    try:
        image = renderer.render(snapshot(data))[0]
        pos, rot = optical_pose(renderer, 0)
        k = renderer.intrinsics['scene']
        for u, v in ((160, 239), (40, 200), (250, 225)):
            ray = rot @ np.array([(u - k.cx) / k.fx, (v - k.cy) / k.fy, 1.0])
            expected = -pos[2] / ray[2]   # the optical-axis distance where it meets z = 0
            assert image.depth[v, u] == pytest.approx(expected, abs=1e-3)
        assert np.isnan(image.depth[0, 0])   # the sky: nothing within the far plane
        assert image.color.shape == (240, 320, 3) and image.color.dtype == np.uint8
    finally:
        renderer.close()


def test_extrinsics_from_a_calibration_file_place_the_optical_frame_on_the_body(
        scene: tuple[mujoco.MjModel, mujoco.MjData]) -> None:
    model, data = scene
    calibration = load_calibration('config/cameras/wrist_d405.yaml')
    spec = replace(load_cameras().select(['wrist'])[0], calibration=calibration)
    renderer = RgbdRenderer(model, [spec])
    try:
        renderer.set_state(snapshot(data))
        pos, rot = optical_pose(renderer, 0)
        hand = renderer.data.body('fr3_hand')
        ext = calibration.extrinsics
        assert ext is not None
        x, y, z, w = ext.rotation
        expected = np.zeros(9)
        mujoco.mju_quat2Mat(expected, np.array([w, x, y, z]))
        body_rot = hand.xmat.reshape(3, 3)
        np.testing.assert_allclose(pos, hand.xpos + body_rot @ np.array(ext.translation),
                                   atol=1e-9)
        np.testing.assert_allclose(rot, body_rot @ expected.reshape(3, 3), atol=1e-9)
        assert renderer.intrinsics['wrist'] == calibration.intrinsics
    finally:
        renderer.close()


def test_resizing_keeps_the_field_of_view() -> None:
    k = Intrinsics.from_fovy(320, 240, 58.0)
    big = k.resized(640, 480)
    assert big == Intrinsics.from_fovy(640, 480, 58.0)


@pytest.mark.parametrize('text,field', [
    ('image_width: 0\nimage_height: 240\n', 'image_width'),
    ('image_width: 320\nimage_height: 240\nprojection_matrix: {data: [1, 2]}\n',
     'projection_matrix.data'),
    ('image_width: 320\nimage_height: 240\nprojection_matrix: {data: [0, 0, 160, 0, 0, 200,'
     ' 120, 0, 0, 0, 1, 0]}\n', 'projection_matrix.data'),
    ('image_width: 320\nimage_height: 240\ncamera_matrix: {data: [200, 0, 160, 0, 200, 120,'
     ' 0, 0, 1]}\nextrinsics: {parent: hand, translation: [0, 0, 0], rotation: [0, 0, 0, 2]}'
     '\n', 'extrinsics.rotation'),
])
def test_a_bad_calibration_file_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / 'cal.yaml'
    path.write_text(text)
    with pytest.raises(CameraConfigError, match=f"{path}: field '{field}'"):
        load_calibration(path)


def test_an_unknown_camera_or_mjcf_camera_is_refused(
        scene: tuple[mujoco.MjModel, mujoco.MjData]) -> None:
    rig = load_cameras()
    with pytest.raises(CameraConfigError, match="unknown camera 'ceiling'"):
        rig.select(['ceiling'])
    from simops_sim.rgbd import RenderError
    missing = replace(rig.cameras['scene'], mujoco_camera='nope')
    with pytest.raises(RenderError, match="no camera 'nope'"):
        RgbdRenderer(scene[0], [missing])
    wrong_body = replace(rig.cameras['wrist'], calibration=Calibration(
        'test', Intrinsics.from_fovy(320, 240, 58.0),
        Extrinsics('fr3_link3', (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))))
    with pytest.raises(RenderError, match="parent 'fr3_link3' is not the body"):
        RgbdRenderer(scene[0], [wrong_body])


def test_appearance_draws_change_only_the_renderers_copy_and_repeat_with_the_seed(
        scene: tuple[mujoco.MjModel, mujoco.MjData]) -> None:
    model, data = scene
    rgba = model.geom_rgba.copy()
    cams = load_cameras().select(['scene'])
    renderer = RgbdRenderer(model, cams, load_appearance())
    try:
        state = snapshot(data)
        plain = renderer.render(state)[0].color
        images = []
        for seed in (1, 1, 2):
            renderer.randomize(np.random.default_rng(seed))
            images.append(renderer.render(state)[0].color)
        assert np.array_equal(images[0], images[1])
        assert not np.array_equal(images[0], images[2])
        assert np.abs(images[0].astype(int) - plain).mean() > 2.0
        np.testing.assert_array_equal(model.geom_rgba, rgba)   # the physics model untouched
    finally:
        renderer.close()
