"""Step many :class:`~simops_sim.physics.Physics` together: the actuator law on n rows (no rclpy).

``Physics.step`` runs the controller's law (:mod:`simops_sim.actuator_law`) on its arm's one
row before and after every ``mj_step``. :func:`step_together` stacks the rows of many arms
and runs the same :func:`~simops_sim.actuator_law.advance` over them: the law on arrays of
shape (n_arms, ...), then each arm's own ``mj_step`` on its own model and data. Every arm
ends bit for bit where ``physics.step(steps)`` would have left it
(``tests/sim/test_physics_batch.py``): it is the same code, element by element, and MuJoCo's is
untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

from simops_sim.actuator_law import ArmLaws, advance
from simops_sim.physics import Physics


def step_together(arms: Sequence[Physics], steps: int) -> None:
    """Advance every arm ``steps`` physics steps, as ``arm.step(steps)`` each would.

    Arms of one layout (actuator inputs, arm joints, velocity actuators) share one stacked
    law; an arm of a World cannot be stepped alone (its World steps every arm).
    """
    groups: dict[tuple, list[Physics]] = {}
    for arm in arms:
        if arm.shared:
            arm.step(steps)   # raises: the World steps its arms
        law = arm.law
        layout = (law.command.shape[1], law.arm, tuple(law.slots))
        groups.setdefault(layout, []).append(arm)
    for group in groups.values():
        laws = [arm.law for arm in group]
        together = ArmLaws.stack(laws)
        advance(together, [arm.site for arm in group], steps)
        together.unstack(laws)
