"""Scripted grasp expert for ``SimOps/FR3PickPlace-v0``: top grasps by phase.

Every tick it reads the observation's quantities (measured arm joints, gripper width, cube
pose, goal; base frame, m, rad), picks the phase they imply, and steps the grasp point
(``GRASP_DEPTH`` below the flange, between the finger pads) a fraction ``gain`` of the way
to the phase's target through the policy's own
:class:`~simops_learning.pick_network.TaskSpaceLaw` (the hand kept pointing down, its fingers
square to the cube's faces):

============  =======================================================  =======
phase         when, and where the grasp point goes                     gripper
============  =======================================================  =======
``carry``     the hand is shut on the cube: lift it to ``lift``, move  closed
              over the goal, lower it (no lower than ``clear``)
``close``     the grasp point is on the cube, or the hand is closing   closed
              around it
``descend``   the hand is over the cube: down toward at most           open
              ``descent`` below the grasp point
``approach``  otherwise: ``hover`` over the cube (straight up first    open
              when the hand is low beside it)
============  =======================================================  =======

The phase is a function of the observation, so a learner imitates it without hidden state:
the expert's decision (the step and the gripper command) is what the policy network learns.

Under a command delay the measured joints lag the commands already sent; stepping from
them, the expert's loop (an integrator, as the card's reference is the last command) rings,
and from 5 control periods of delay on it mostly fails. Given ``ahead`` (the measured joints plus
the commands still in flight, :attr:`simops_sim.physics.Physics.arm_in_flight`), it steps
from where the arm is headed instead (a Smith predictor); whether the hand is shut on, or
closing around, the cube it still judges from the measured joints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from simops_learning.pick_env import CUBE_HALF
from simops_learning.pick_network import TaskSpaceLaw, quaternion_yaw

PHASES = ('approach', 'descend', 'close', 'carry')
UP = np.array([0.0, 0.0, 1.0])


@dataclass(frozen=True)
class PickGains:
    """Expert settings (m).

    ``gain``: fraction of the way to the target stepped per tick; ``pinch``: height of the
    grasp point over the cube's centre when it closes (the fingertips then clear the table);
    ``hover``: height over that before descending toward at most ``descent`` below the grasp
    point; ``lift``:
    height of the carried cube's centre while it travels; ``over`` and ``at``: horizontal
    and vertical tolerances for closing (and ``over`` for "over the goal"); ``near``: how
    far the cube may sit from the grasp point while descending, closing or carried;
    ``held``: the largest opening that counts as shut on the cube; ``open``: below this
    opening, with the cube between the fingers, the hand keeps closing (the vertical
    tolerance then no longer applies, so a delayed arm's bobbing does not reopen it);
    ``clear``: the carried cube's lowest bottom above the table (a goal on the table is
    then reached within the 2 cm success radius).
    """

    gain: float = 0.3
    pinch: float = 0.02
    hover: float = 0.08
    descent: float = 0.015
    lift: float = 0.12
    over: float = 0.01
    near: float = 0.02
    at: float = 0.006
    held: float = 2 * CUBE_HALF + 0.006
    clear: float = 0.01
    open: float = 0.075


class PickExpert:
    """Maps the pick-and-place observation's quantities to a decision and an action (8,).

    The decision is the grasp point's step and the gripper command; ``law`` turns it into
    the joint deltas.
    """

    def __init__(self, law: TaskSpaceLaw, gains: PickGains | None = None) -> None:
        self.law = law
        self.gains = gains or PickGains()
        self.phase = PHASES[0]

    def decide(self, q: np.ndarray, width: float, cube: np.ndarray, goal: np.ndarray,
               ahead: np.ndarray | None = None) -> tuple[np.ndarray, float]:
        """The grasp point's step (3,) m and the gripper command (+1 open, -1 closed).

        From the measured arm ``q`` (7,) rad, the opening ``width`` m, the cube's centre and
        the ``goal`` (3,) m; ``ahead`` (7,) rad: the joints the commands in flight lead to
        (None: ``q``, no delay).
        """
        g = self.gains
        grasp = self._grasp(q)
        shift = np.zeros(3) if ahead is None else self._grasp(ahead) - grasp
        pinch = cube + UP * g.pinch     # where the grasp point holds the cube
        horizontal = float(np.linalg.norm(grasp[:2] - cube[:2]))
        vertical = float(grasp[2] - pinch[2])
        if width <= g.held and horizontal < g.near and abs(vertical) < g.near:
            self.phase, gripper = 'carry', -1.0
            cube = cube + shift   # where the held cube is headed
            return g.gain * (self._carry_target(cube, goal) - cube), gripper
        closing = width < g.open and horizontal < g.near and abs(vertical) < g.near
        grasp = grasp + shift   # the phases below, and their steps, from where it is headed
        horizontal = float(np.linalg.norm(grasp[:2] - cube[:2]))
        vertical = float(grasp[2] - pinch[2])
        if closing or (horizontal < g.over and abs(vertical) < g.at):
            self.phase, gripper, target = 'close', -1.0, pinch
        elif horizontal < g.near and vertical < g.hover + g.near:
            self.phase, gripper = 'descend', 1.0
            target = np.array([*cube[:2], max(pinch[2], grasp[2] - g.descent)])
        else:
            self.phase, gripper, target = 'approach', 1.0, pinch + UP * g.hover
            if vertical < g.hover - g.near:   # low beside the cube: rise before moving across
                target = np.array([*grasp[:2], target[2]])
        return g.gain * (target - grasp), gripper

    def _grasp(self, q: np.ndarray) -> np.ndarray:
        """The grasp point (3,) m, base frame, for arm joints ``q`` (7,) rad."""
        with torch.inference_mode():
            grasp = self.law.grasp(torch.as_tensor(q, dtype=torch.float32)[None])[0][0]
        return grasp.numpy().astype(float)

    def action(self, q: np.ndarray, move: np.ndarray, gripper: float,
               cube_quat: np.ndarray) -> np.ndarray:
        """Action (8,) that executes a decision: the law's joint deltas, then ``gripper``."""
        with torch.inference_mode():
            cube_yaw = quaternion_yaw(torch.as_tensor(np.asarray(cube_quat, float))[None])
            arm = self.law(torch.as_tensor(q, dtype=torch.float32)[None],
                           torch.as_tensor(move, dtype=torch.float32)[None],
                           cube_yaw.float())[0]
        return np.append(arm.numpy().astype(float), gripper)

    def _carry_target(self, cube: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """Where the carried cube's centre goes next: up, across at ``lift``, down.

        Never lower than ``clear`` above the table: a delayed arm overshoots, and pressing
        a held cube into the table trips the collision reflex.
        """
        g = self.gains
        travel = float(np.linalg.norm(goal[:2] - cube[:2]))
        cruise = max(g.lift, float(goal[2]))
        if travel < g.over:
            return np.array([goal[0], goal[1], max(float(goal[2]), CUBE_HALF + g.clear)])
        if cube[2] < cruise - 0.02:
            return np.array([cube[0], cube[1], cruise])
        return np.array([goal[0], goal[1], cruise])
