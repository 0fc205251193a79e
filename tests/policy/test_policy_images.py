"""Policies that take camera images: the card's image terms, the image inputs, and the policy
node on the simulator's wrist camera (real processes over DDS), holding on a stale image."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from policy_helpers import SPEC, diagnostics, states, targets, watch
from ros_helpers import NodeProcess, RosProbe, wait_until

from simops_core.observation import ImageBuilder
from simops_core.policy_card import CardError, ImageTerm, load_policy_card, parse_policy_card

CNN_CARD = Path('models/policy/fr3_reach_wrist_cnn.yaml')
CNN_MODEL = CNN_CARD.with_suffix('.pt')
WRIST = '/camera/wrist/color/image_raw'


def term(width: int = 4, height: int = 3, mean: float = 0.5, std: float = 0.25) -> ImageTerm:
    return ImageTerm('/cam', width, height, (mean,) * 3, (std,) * 3, 0.2)


def test_the_shipped_cnn_card_takes_the_wrist_image() -> None:
    card = load_policy_card(CNN_CARD, SPEC.joint_names, SPEC.arm_joints)
    (image,) = card.images
    assert (image.topic, image.width, image.height, image.max_age) == (WRIST, 64, 48, 0.2)


@pytest.mark.parametrize('change,field', [
    ({'topic': 'camera/wrist'}, 'topic'),
    ({'width': 0}, 'width'),
    ({'std': [0.2, 0.0, 0.2]}, 'std'),
    ({'mean': [0.5, 0.5]}, 'mean'),
    ({'max_age': 0}, 'max_age'),
    ({'colour': True}, 'colour'),
])
def test_a_bad_image_term_names_its_field(change: dict[str, object], field: str) -> None:
    raw = yaml.safe_load(CNN_CARD.read_text())
    raw['observation']['images'][0].update(change)
    with pytest.raises(CardError, match=rf"observation\.images\[0\]\.{field}'"):
        parse_policy_card(raw, CNN_CARD, SPEC.joint_names, SPEC.arm_joints)


def test_images_are_block_averaged_and_normalised_channel_first() -> None:
    builder = ImageBuilder([term(width=2, height=1)])
    pixels = np.zeros((2, 4, 3), dtype=np.uint8)
    pixels[:, :2, 0] = 255          # left half red
    pixels[0, 2:, 2] = 255          # top-right quarter blue
    out = builder.set(0, pixels)
    assert out.shape == (3, 1, 2) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, 0, 0], [(1.0 - 0.5) / 0.25, -2.0, -2.0])
    np.testing.assert_allclose(out[:, 0, 1], [-2.0, -2.0, (0.5 - 0.5) / 0.25])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 12), st.integers(1, 12),
       st.integers(0, 2**32 - 1))
def test_any_image_size_gives_the_terms_size_within_the_normalised_range(
        height: int, width: int, out_h: int, out_w: int, seed: int) -> None:
    builder = ImageBuilder([term(out_w, out_h)])
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = builder.set(0, pixels)
    assert out.shape == (3, out_h, out_w)
    assert np.all(out >= -2.0 - 1e-5) and np.all(out <= 2.0 + 1e-5)   # (0..1 - 0.5) / 0.25


def start_policy(tmp_path: Path, name: str = 'policy') -> NodeProcess:
    return NodeProcess.ros2_run('simops_policy', 'policy', '--ros-args',
                                '-p', f'model_path:={CNN_MODEL.resolve()}',
                                '-p', 'ramp_time:=0.5', '-p', 'start_enabled:=true',
                                '-p', 'use_sim_time:=true', log_path=tmp_path / f'{name}.log')


def start_sim(tmp_path: Path, *params: str) -> NodeProcess:
    args = [arg for p in params for arg in ('-p', p)]
    return NodeProcess.ros2_run('simops_sim', 'sim', '--ros-args', *args,
                                log_path=tmp_path / 'sim.log')


def test_the_cnn_policy_runs_at_20_hz_on_the_rendered_wrist_camera(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    watch(ros_probe)
    with start_sim(tmp_path, 'cameras:=[wrist]') as sim, start_policy(tmp_path) as node:
        assert wait_until(lambda: 'RUNNING' in states(ros_probe), 60), node.output
        first = len(targets(ros_probe))
        time.sleep(3.0)
        sent = len(targets(ros_probe)) - first
        assert wait_until(lambda: float(diagnostics(ros_probe).get('inference_p50_ms', 0)) > 0,
                          5.0)
        values = diagnostics(ros_probe)
        assert node.stop() == 0, node.output
        assert sim.stop() == 0, sim.output
    assert 54 <= sent <= 66, sent   # 20 Hz for 3 s
    assert states(ros_probe)[-1] == 'RUNNING'
    assert int(values['faults_stale_image']) == 0
    # One command per period of sim time: none skipped, none computed twice from one state.
    # (How evenly they come is a timing figure of the host: bench/control_loop.py prints the
    # CNN policy's period p99.)
    assert (int(values['overruns']), int(values['repeated_states'])) == (0, 0), str(values)


def test_without_images_the_policy_waits_and_a_stale_image_holds_the_arm(
        ros_probe: RosProbe, tmp_path: Path) -> None:
    watch(ros_probe)
    with start_sim(tmp_path) as sim, start_policy(tmp_path) as node:   # no cameras
        assert wait_until(lambda: f'waiting for {WRIST}' in diagnostics(ros_probe).get(
            'reason', ''), 30), (diagnostics(ros_probe), node.output)
        assert 'RUNNING' not in states(ros_probe) and len(targets(ros_probe)) == 0
        node.stop()
        sim.stop()
    # One frame per second: between frames the image is older than the card's 0.2 s.
    with start_sim(tmp_path, 'cameras:=[wrist]', 'camera_rate:=1.0') as sim, \
            start_policy(tmp_path, 'policy_slow') as node:
        assert wait_until(lambda: int(diagnostics(ros_probe).get('faults_stale_image', 0))
                          >= 2, 30), (diagnostics(ros_probe), node.output)
        assert 'HOLD' in states(ros_probe) or 'stale' in diagnostics(ros_probe)['reason']
        node.stop()
        sim.stop()


@pytest.mark.ros_free
def test_the_envs_the_gate_and_rollouts_refuse_an_image_policy_in_one_line(
        tmp_path: Path) -> None:
    import subprocess

    from ros_helpers import installed_executable

    from simops_learning.reach_env import FR3ReachEnv
    with pytest.raises(CardError, match='takes camera images'):
        FR3ReachEnv(card_path=CNN_CARD)
    for exe, args in (('simops-validate', ['--policy', str(CNN_MODEL), '--episodes', '1']),
                      ('simops-rollout', ['--policy', str(CNN_MODEL), '--out',
                                          str(tmp_path / 'ds')])):
        result = subprocess.run([str(installed_executable('simops_learning', exe)), *args],
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode in (2, 4), result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and 'takes camera images' in lines[0], result.stderr
    assert not (tmp_path / 'ds').exists()
