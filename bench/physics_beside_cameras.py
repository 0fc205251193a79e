"""Benchmark the 1 kHz physics beside the camera thread in one process, by GIL switch interval.

The simulator node's physics and camera threads share one interpreter. MuJoCo releases the
GIL in ``mj_step`` and while rendering, so after every step the physics thread must take the
GIL back. If the camera thread is running Python at that moment (encoding, publishing), the
physics thread waits up to ``sys.getswitchinterval()`` (5 ms by default). This script runs
the stepper (realtime factor 1, the FR3 scene) and the camera loop (scene and wrist RGB-D,
320x240 at 30 Hz, each frame encoded into ``sensor_msgs/Image`` bytes as the node does, no
DDS) in a fresh process for each switch interval. For each run it prints the physics'
real-time factor, mean and max step wall time, worst lateness, overruns and the achieved
camera rate.

    .venv/bin/python bench/physics_beside_cameras.py [--seconds 20] [--intervals 0.005 0.0005]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time


def run(seconds: float, interval: float) -> dict[str, float]:
    """One run in this process at switch interval ``interval`` (s); the summed figures."""
    import numpy as np

    from simops_core.camera_rig import load_cameras
    from simops_core.robot_spec import load_robot_spec
    from simops_sim.camera_loop import CameraLoop
    from simops_sim.model_index import load_model
    from simops_sim.serialized_messages import ImageEncoder
    from simops_sim.stepper import Stepper, Timing
    from simops_sim.world import World

    sys.setswitchinterval(interval)
    spec = load_robot_spec('fr3')
    world = World(load_model('models/fr3/scene.xml'), {'': spec}, reflexes=True)
    timing = Timing('realtime', 1.0, 0.05, 0.5, 5.0, 1000.0, 0.0, 0.0, 100.0)
    stepper = Stepper(world, timing, 'home', None, 0, None, lambda key, text: None)
    cameras = [c.resized(320, 240) for c in load_cameras().select(['scene', 'wrist'])]
    loop = CameraLoop(stepper, cameras, 30.0)
    encoders = {c.name: (ImageEncoder(320, 240, 'rgb8', c.frame_id),
                         ImageEncoder(320, 240, '32FC1', c.frame_id)) for c in cameras}
    sent: list[int] = []

    def deliver(images: list, stamp: int) -> None:
        for image in images:
            color, depth = encoders[image.camera]
            sent.append(len(color.encode(stamp, image.color)) + len(depth.encode(stamp,
                                                                                 image.depth)))

    running = threading.Event()
    running.set()
    threads = [threading.Thread(target=stepper.run, args=(running, lambda frame: None)),
               threading.Thread(target=loop.run, args=(running, deliver))]
    for thread in threads:
        thread.start()
    loop.ready.wait()
    time.sleep(1.0)   # the shaders compile on the first frame
    stepper.report()
    loop.report()
    windows = []
    for _ in range(round(seconds)):
        time.sleep(1.0)
        windows.append((stepper.report().values, loop.report()))
    running.clear()
    stepper.wake()
    for thread in threads:
        thread.join(timeout=5.0)
    physics = [w[0] for w in windows]
    return {'realtime_factor': float(np.mean([v['realtime_factor'] for v in physics])),
            'worst_window': float(min(v['realtime_factor'] for v in physics)),
            'step_us_mean': float(np.mean([v['step_time_mean_us'] for v in physics])),
            'step_us_max': float(max(v['step_time_max_us'] for v in physics)),
            'lag_ms_max': float(max(v['lag_max_ms'] for v in physics)),
            'overruns': float(physics[-1]['overruns']),
            'follower_wait_ms': float(np.sum([v['follower_wait_ms'] for v in physics])),
            'camera_hz': float(np.mean([w[1]['camera_rate_hz'] for w in windows]))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=20.0, help='wall time per run')
    parser.add_argument('--intervals', type=float, nargs='+', default=[0.005, 0.0005],
                        help='sys.setswitchinterval values (s)')
    parser.add_argument('--repeats', type=int, default=2, help='runs per interval')
    parser.add_argument('--one', type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run(args.seconds, args.one)))
        return 0
    print(f'physics (1 kHz, factor 1) beside scene + wrist RGB-D 320x240 at 30 Hz in one '
          f'process, {args.seconds:g} s per run:')
    for _ in range(args.repeats):
        for interval in args.intervals:
            out = subprocess.run([sys.executable, __file__, '--one', str(interval),
                                  '--seconds', str(args.seconds)], capture_output=True,
                                 text=True, check=True)
            f = json.loads(out.stdout.strip().splitlines()[-1])
            print(f'  switch interval {1e3 * interval:5.2f} ms: factor '
                  f'{f["realtime_factor"]:.4f} (worst 1 s {f["worst_window"]:.4f}), step '
                  f'{f["step_us_mean"]:.0f} us mean, {f["step_us_max"]:.0f} max, lateness '
                  f'{f["lag_ms_max"]:.1f} ms max, {f["overruns"]:.0f} overruns, waited for '
                  f'the camera {f["follower_wait_ms"]:.0f} ms; cameras {f["camera_hz"]:.1f} Hz')
    print(f'load average after: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores')
    return 0


if __name__ == '__main__':
    sys.exit(main())
