"""Benchmark the simulator's cameras: render cost per frame, achieved rate, physics lateness.

1. In-process: one ``RgbdRenderer`` renders the FR3 scene (scene and wrist cameras, RGB-D,
   one render pass each) at each resolution; ms per camera frame, no physics beside it.
2. The sim node as a real process over DDS at realtime_factor 1.0 (1 kHz physics and
   /joint_states) with both cameras at ``--rate`` Hz: the frames a subscriber receives per
   camera and second, the node's render ms (/diagnostics), and the physics' real-time factor
   and worst lateness of a step against its deadline, against a run without cameras; then
   the same with the recorder taking everything (its CPU, the messages it lost).

    .venv/bin/python bench/camera.py [--seconds 15] [--rate 30]

Targets (issue #19, 2 cores, no GPU): scene and wrist RGB-D at >= 10 Hz each at 320x240
while the physics keeps real time.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from proc_stats import cpu_seconds

from simops_core.dds_isolation import claim_domain_id, isolated_env

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests'))
RESOLUTIONS = ((320, 240), (640, 480))
CAMERAS = ('scene', 'wrist')


def render_cost(width: int, height: int, frames: int = 60) -> float:
    """Mean ms per camera frame (colour + depth) rendering the scene and wrist cameras."""
    import mujoco

    from simops_core.camera_rig import load_cameras
    from simops_sim.model_index import load_model
    from simops_sim.rgbd import RgbdRenderer, snapshot

    model = load_model('models/fr3/scene.xml')
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    cams = [c.resized(width, height) for c in load_cameras().select(CAMERAS)]
    renderer = RgbdRenderer(model, cams)
    try:
        state = snapshot(data)
        renderer.render(state)   # warm up: the first frame compiles shaders
        started = time.perf_counter()
        for _ in range(frames):
            renderer.render(state)
        return 1e3 * (time.perf_counter() - started) / (frames * len(cams))
    finally:
        renderer.close()


def cpu_share(width: int, height: int, frames: int = 60) -> float:
    """Mean ms per camera frame of the work a GPU would not take over.

    That is converting the depth buffer into metres, flipping both images and serialising
    them into messages.
    """
    import numpy as np

    from simops_sim.rgbd import metric_depth
    from simops_sim.serialized_messages import ImageEncoder

    rng = np.random.default_rng(0)
    color = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    buffer = rng.uniform(0.0, 1.0, (height, width)).astype(np.float32)
    rgb, depth = (ImageEncoder(width, height, encoding, 'bench') for encoding in
                  ('rgb8', '32FC1'))
    started = time.perf_counter()
    for _ in range(frames):
        rgb.encode(0, np.flipud(color))
        depth.encode(0, metric_depth(np.flipud(buffer), 0.01, 50.0))
    return 1e3 * (time.perf_counter() - started) / frames


def run_node(seconds: float, rate: float, size: tuple[int, int] | None,
             log_dir: Path, record: str = '') -> dict[str, float]:
    """The sim node at realtime_factor 1 with both cameras at ``size`` (None: none).

    With ``record`` (the MCAP compression: none or zstd), the recorder (continuous, default
    topics) runs beside it: its CPU, the messages it lost and the bag's MB per second.
    """
    from diagnostic_msgs.msg import DiagnosticArray
    from ros_helpers import NodeProcess, RosProbe
    from sensor_msgs.msg import Image

    from simops_core.camera_rig import load_cameras
    from simops_core.topics import load_qos, load_topics
    from simops_ros.qos import qos_from_spec

    rig = load_cameras()
    probe = RosProbe('camera_bench')
    counts = dict.fromkeys(CAMERAS, 0)
    diagnostics = load_topics()['diagnostics'].name
    probe.subscribe(diagnostics, DiagnosticArray)
    for name in CAMERAS:
        def count(_: bytes, name: str = name) -> None:
            counts[name] += 1
        probe.node.create_subscription(Image, rig.topics(name).color, count,
                                       qos_from_spec(load_qos('image')), raw=True)
    args = ['--ros-args', '-p', 'realtime_factor:=1.0', '-p', f'camera_rate:={rate}']
    if size is not None:
        args += ['-p', f'cameras:=[{",".join(CAMERAS)}]', '-p', f'camera_width:={size[0]}',
                 '-p', f'camera_height:={size[1]}']
    recorder: dict[str, float] = {}
    try:
        with NodeProcess.ros2_run('simops_sim', 'sim', *args,
                                  log_path=log_dir / f'sim_{size}.log') as node:
            probe.wait_for_messages(diagnostics, count=3, timeout=60)
            bags = log_dir / f'bags_{record}'
            rec = NodeProcess.ros2_run(
                'simops_recorder', 'record', '--ros-args', '-p', f'root:={bags}',
                '-p', 'mode:=continuous', '-p', f'compression:={record}',
                log_path=log_dir / f'rec_{record}.log') if record else None
            if rec is not None:
                time.sleep(5.0)   # discovery and subscriptions
                cpu0 = cpu_seconds(rec.proc.pid)
            first = dict(counts)
            diag0 = len(probe.messages(diagnostics))
            wall0 = time.monotonic()
            time.sleep(seconds)
            wall = time.monotonic() - wall0
            received = {k: (counts[k] - first[k]) / wall for k in CAMERAS}
            diags = probe.messages(diagnostics)[diag0:]
            if rec is not None:
                recorder['recorder_cpu_pct'] = 100 * (cpu_seconds(rec.proc.pid) - cpu0) / wall
                rec.stop()
                lost = re.findall(r'(\d+) messages, (\d+) lost', rec.output)
                recorder['recorded'], recorder['lost'] = map(float, lost[-1])
                size_mb = sum(f.stat().st_size for f in bags.rglob('*.mcap')) / 1e6
                recorder['bag_mb_s'] = size_mb / (wall + 5.0)   # the 5 s before are in it
            node.stop()
    finally:
        probe.close()

    def values(task: str) -> list[dict[str, float]]:
        rows = []
        for msg in diags:
            for status in msg.status:
                if status.name.endswith(task):
                    rows.append({kv.key: float(kv.value) for kv in status.values
                                 if kv.key.replace('_', '').isalnum()
                                 and _is_float(kv.value)})
        return rows

    physics = values(': physics')
    figures = {'rtf': sum(v['realtime_factor'] for v in physics) / len(physics),
               'rtf_worst': min(v['realtime_factor'] for v in physics),
               'lag_ms': max(v['lag_max_ms'] for v in physics),
               'overruns': max(v['overruns'] for v in physics),
               'state_hz': sum(v['joint_state_rate_hz'] for v in physics) / len(physics)}
    figures |= recorder
    render = values(': cameras')
    if render:
        figures |= {'render_ms': sum(v['render_ms_mean'] for v in render) / len(render),
                    'render_ms_max': max(v['render_ms_max'] for v in render),
                    'skipped': sum(v['camera_frames_skipped'] for v in render)}
        figures |= {f'{k}_hz': v for k, v in received.items()}
    return figures


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=15.0, help='wall time per node run')
    parser.add_argument('--rate', type=float, default=30.0, help='camera_rate (Hz)')
    args = parser.parse_args()
    os.environ.setdefault('MUJOCO_GL', 'egl')
    print(f'load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores, '
          f'MUJOCO_GL={os.environ["MUJOCO_GL"]}')
    costs = {size: render_cost(*size) for size in RESOLUTIONS}
    print('in-process render cost, FR3 scene, one camera frame = colour + depth, one pass:')
    for (w, h), ms in costs.items():
        share = cpu_share(w, h)
        print(f'  {w}x{h}: {ms:6.2f} ms per camera frame ({1e3 / ms:5.1f} frames/s on one '
              f'thread), of which {share:.2f} ms depth conversion, flips and serialisation '
              '(what stays on the CPU with a GPU)')
    claim = claim_domain_id()
    os.environ.update(isolated_env(claim.domain_id))
    with tempfile.TemporaryDirectory() as tmp:
        runs = {'no cameras': run_node(args.seconds, args.rate, None, Path(tmp))}
        for w, h in RESOLUTIONS:
            runs[f'scene + wrist RGB-D {w}x{h} at {args.rate:g} Hz'] = run_node(
                args.seconds, args.rate, (w, h), Path(tmp))
        for compression in ('none', 'zstd'):
            runs[f'scene + wrist RGB-D 320x240 at {args.rate:g} Hz, recorded, compression '
                 f'{compression}'] = run_node(args.seconds, args.rate, RESOLUTIONS[0],
                                              Path(tmp), record=compression)
    claim.release()
    print(f'sim node, realtime_factor 1.0, 1 kHz physics and /joint_states, {args.seconds:g} s:')
    for label, f in runs.items():
        print(f'  {label}:')
        print(f'    physics real-time factor  {f["rtf"]:.4f} (worst 1 s window '
              f'{f["rtf_worst"]:.4f}), lateness max {f["lag_ms"]:.2f} ms, '
              f'{f["overruns"]:.0f} overruns, /joint_states {f["state_hz"]:.0f} Hz')
        if 'render_ms' in f:
            print(f'    render                    {f["render_ms"]:.1f} ms per frame of both '
                  f'cameras (max {f["render_ms_max"]:.1f}), {f["skipped"]:.0f} frames skipped')
            print('    received                  ' + ', '.join(
                f'{k} {f[f"{k}_hz"]:.1f} Hz' for k in CAMERAS))
        if 'recorder_cpu_pct' in f:
            print(f'    recorder (continuous)     {f["recorder_cpu_pct"]:.1f} % of one core, '
                  f'{f["recorded"]:.0f} messages, {f["lost"]:.0f} lost, bag '
                  f'{f["bag_mb_s"]:.1f} MB/s')
    print(f'load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    cams = runs[f'scene + wrist RGB-D 320x240 at {args.rate:g} Hz']
    met = (all(cams[f'{k}_hz'] >= 10.0 for k in CAMERAS) and cams['rtf'] > 0.98)
    print('target (both cameras >= 10 Hz at 320x240, physics real-time factor > 0.98):',
          'met' if met else 'NOT met')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
