"""Several arms in one MuJoCo world: one model, one data, one clock (no rclpy).

A dual-arm scene (``models/fr3_duo/scene.xml``, franka_description's ``fr3_duo`` names)
attaches one arm model twice with name prefixes (MJCF ``<attach prefix="left_">``). Each arm
is a :class:`~simops_sim.physics.Physics` over the shared ``MjData``, indexed by its prefix:
targets, trajectory plans, the gripper, the command delay, friction, sensor biases and
protective stops are the arm's own. The world does what touches everything: it writes the
model's parameters, steps (the actuator law's rows, one per arm, over the one data: every arm
sets its actuators, one ``mj_step``, every arm checks its limits) and resets.
"""

from __future__ import annotations

from collections.abc import Mapping

import mujoco

from simops_core.robot_spec import RobotSpec
from simops_core.sim_params import SimParams, SimParamsError
from simops_sim.actuator_law import ArmLaws, advance
from simops_sim.model_index import ModelError, keyframe_id
from simops_sim.model_params import apply_arm_params
from simops_sim.physics import Physics


class World:
    """The arms ``{prefix: spec}`` of ``model``, stepped together; see the module docstring.

    ``reflexes``: every arm stops on its limits (:mod:`simops_sim.reflexes`); ``joint_map``
    renames the spec's joints in every arm (:func:`~simops_sim.model_index.index_model`).
    """

    def __init__(self, model: mujoco.MjModel, arms: Mapping[str, RobotSpec],
                 params: Mapping[str, SimParams] | None = None, reflexes: bool = False,
                 joint_map: Mapping[str, str] | None = None) -> None:
        if not arms:
            raise ModelError('a world needs at least one arm; name each arm\'s prefix')
        self.model = model
        self.data = mujoco.MjData(model)
        # Every arm is indexed before any parameters are written, so each index holds the
        # model's own nominal values.
        self.arms = {prefix: Physics(model, spec, joint_map, reflexes=reflexes, prefix=prefix,
                                     data=self.data) for prefix, spec in arms.items()}
        self._order = tuple(self.arms.values())
        self.apply_params(params or {})
        self.reset_keyframe(None)

    @property
    def time(self) -> float:
        """Sim time (s), one clock for every arm."""
        return float(self.data.time)

    @property
    def timestep(self) -> float:
        """Physics step (s)."""
        return float(self.model.opt.timestep)

    def apply_params(self, params: Mapping[str, SimParams]) -> None:
        """Give each arm its ``params[prefix]`` (nominal where absent), in one model write."""
        unknown = sorted(set(params) - set(self.arms))
        if unknown:
            raise SimParamsError(f'params for arm {unknown[0]!r}, which this world does not '
                                 f'have ({", ".join(map(repr, self.arms))})')
        chosen = {prefix: params.get(prefix, SimParams()) for prefix in self.arms}
        apply_arm_params(self.model, [(chosen[p], arm.index) for p, arm in self.arms.items()])
        for prefix, arm in self.arms.items():
            arm.take_params(chosen[prefix])

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps, every arm on its own targets or plan."""
        if len(self._order) == 1:   # one arm: its own row and bindings, nothing to stack
            arm = self._order[0]
            advance(arm.law, arm.sites, n)
            return
        laws = [arm.law for arm in self._order]
        together = ArmLaws.stack(laws)
        advance(together, [arm.site for arm in self._order], n)
        together.unstack(laws)

    def reset_keyframe(self, name: str | None) -> None:
        """Reset to keyframe ``name`` (its ctrl are the targets), or hold qpos0 for None.

        Sim time restarts at 0; every arm drops its commands and ends its stop.
        """
        if name is None:
            mujoco.mj_resetData(self.model, self.data)
            mujoco.mj_forward(self.model, self.data)
            for arm in self._order:
                arm.hold_here()
            return
        mujoco.mj_resetDataKeyframe(self.model, self.data, keyframe_id(self.model, name))
        for arm in self._order:
            arm.settle()

    def diverged(self) -> str | None:
        """Why the shared state is unusable, or None (:meth:`Physics.diverged`, world-wide)."""
        return self._order[0].diverged()

    def recover(self, name: str | None, time: float) -> None:
        """After a divergence: back to keyframe ``name`` at sim ``time`` (s), every arm holding."""
        self.reset_keyframe(name)
        self.data.time = time
