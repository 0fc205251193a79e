"""``simops-demo``: the main job of README command 1.

Until the full record/fit/validate loop lands, the demo runs the FR3 scene headless: it
holds ``home``, then tracks a 0.3 rad step on every arm joint, and prints the tracking
error, the flange pose and the real-time factor it achieved.
"""

from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np

from simops_core.paths import resolve_resource
from simops_core.robot_spec import load_robot_spec

STEP = 0.3  # rad, commanded offset from home (clipped to the joint limits)


def main(argv: list[str] | None = None) -> int:
    """Run the headless demo; return the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=3.0, help='simulated time (s)')
    parser.add_argument('--robot', default='fr3', help='robot spec name or YAML path')
    parser.add_argument('--model', default='models/fr3/scene.xml', help='MJCF scene')
    args = parser.parse_args(argv)

    spec = load_robot_spec(args.robot)
    model = mujoco.MjModel.from_xml_path(str(resolve_resource(args.model)))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key('home').id)
    qadr = np.array([model.joint(n).qposadr[0] for n in spec.arm_joints])
    act = np.array([model.actuator(f'{n}_servo').id for n in spec.arm_joints])
    target = np.clip(spec.home + STEP, spec.position_lower, spec.position_upper)
    data.ctrl[act] = target

    steps = round(args.seconds / model.opt.timestep)
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(model, data)
    wall = time.perf_counter() - start

    error = np.abs(data.qpos[qadr] - target)
    flange = data.site('flange').xpos
    print(f'SimOps demo: {model.nq}-dof scene from {args.model}, robot {spec.name}')
    print(f'  simulated {args.seconds:.1f} s in {wall:.2f} s wall: '
          f'{args.seconds / wall:.1f}x real time at {1 / model.opt.timestep:.0f} Hz physics')
    print(f'  step of {STEP} rad on all joints: max tracking error {1e3 * error.max():.2f} mrad')
    print(f'  flange at x={flange[0]:.3f} y={flange[1]:.3f} z={flange[2]:.3f} m (base frame)')
    return 0 if error.max() < 0.01 else 1


if __name__ == '__main__':
    raise SystemExit(main())
