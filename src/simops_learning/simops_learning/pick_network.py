"""The pick-and-place policy module: a kinematics layer, then an MLP, exported like reach's.

:class:`PickPolicy` maps an observation (batch, card.observation_size) float32 to a raw
action (batch, card.action.size) in [-1, 1]:

1. :class:`ArmKinematics` computes, from the newest frame's measured arm joints q (7,) rad,
   the hand's pose by the model's fixed body transforms and joint rotations (MuJoCo's
   kinematic tree, read once from the model), hence the grasp point (between the finger
   pads) and the hand's yaw;
2. task features from it, all in the base frame (m): cube − grasp point, goal − cube and
   goal − grasp point, the first two's horizontal lengths, the gripper opening and the
   heights of grasp point, cube and goal: what the expert's decision depends on;
3. an MLP (tanh) on the standardised features says where the grasp point moves this step
   (m) and the gripper command (the older frames of the card's observation are not used);
4. :class:`TaskSpaceLaw` turns the step into joint deltas (resolved-rate control on the
   kinematics layer's Jacobian, the hand kept pointing down and square to the cube).

The scripted expert (:mod:`simops_learning.pick_expert`) decides the same step and gripper
command and acts through the same law, so the network imitates a low-dimensional,
geometric decision; its weights are learnt by DAgger (:mod:`simops_learning.pick_train`).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import torch
from torch import nn

from simops_core.policy_card import PolicyCard
from simops_core.robot_spec import RobotSpec
from simops_learning.expert import HAND_BODY
from simops_learning.network import frame_slots, newest_slots
from simops_learning.pick_env import GRASP_DEPTH
from simops_sim.model_index import ModelIndex

FEATURES = 15                # the network's inputs
MOVE_UNIT = 0.05             # m of grasp-point step per network output unit
HORIZONTAL = ((0, 1), (3, 4), (6, 7))   # the inputs' horizontal (x, y) pairs (PickPolicy.features)


class ArmKinematics(nn.Module):
    """Forward kinematics of the chain from the base to ``body``: q (B, 7) → pose.

    Every body on the chain keeps its fixed offset (m) and rotation from its parent; a body
    with an arm joint turns about its own z axis by that joint (the FR3 and Panda models'
    layout; anything else is refused).
    """

    def __init__(self, model: mujoco.MjModel, index: ModelIndex, body: str) -> None:
        super().__init__()
        chain = []
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
        while bid > 0 and bid != index.base_body:
            chain.append(bid)
            bid = int(model.body_parentid[bid])
        chain.reverse()
        arm_joints = [int(j) for j in model.dof_jntid[index.dof_adr[:index.arm_dof]]]
        offsets, rotations, joints = [], [], []
        for b in chain:
            rotation = np.empty(9)
            mujoco.mju_quat2Mat(rotation, model.body_quat[b])
            offsets.append(model.body_pos[b].copy())
            rotations.append(rotation.reshape(3, 3))
            joint = -1
            for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
                if j in arm_joints:
                    if not (np.allclose(model.jnt_axis[j], [0, 0, 1])
                            and np.allclose(model.jnt_pos[j], 0)):
                        raise ValueError(f'joint {model.joint(j).name} does not turn about its '
                                         "body's z axis at its origin")
                    joint = arm_joints.index(j)
            joints.append(joint)
        self.register_buffer('offsets', torch.tensor(np.array(offsets), dtype=torch.float32))
        self.register_buffer('rotations',
                             torch.tensor(np.array(rotations), dtype=torch.float32))
        self.joints: list[int] = joints

    def forward(self, q: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chain's pose for joints q (B, 7) rad, in the base frame.

        Returns the body's position (B, 3) m and rotation (B, 3, 3), and each arm joint's
        origin (B, 7, 3) m and axis (B, 7, 3).
        """
        batch = q.shape[0]
        position = torch.zeros(batch, 3, dtype=q.dtype)
        rotation = torch.eye(3, dtype=q.dtype).expand(batch, 3, 3)
        origins: list[torch.Tensor] = []
        axes: list[torch.Tensor] = []
        for i, joint in enumerate(self.joints):
            position = position + rotation @ self.offsets[i]
            rotation = rotation @ self.rotations[i]
            if joint >= 0:
                origins.append(position)
                axes.append(rotation[:, :, 2])
                c, s = torch.cos(q[:, joint]), torch.sin(q[:, joint])
                zero, one = torch.zeros_like(c), torch.ones_like(c)
                turn = torch.stack([c, -s, zero, s, c, zero, zero, zero, one], dim=1)
                rotation = rotation @ turn.reshape(batch, 3, 3)
        return position, rotation, torch.stack(origins, dim=1), torch.stack(axes, dim=1)


def turn_scene(features: torch.Tensor, steps: torch.Tensor, angle: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, 15) and grasp-point steps (B, 3) of the scene turned by ``angle`` (B,) rad.

    The turn is about the vertical through the grasp point. The inputs are three relative
    vectors, two horizontal lengths, the opening and three heights
    (:meth:`PickPolicy.features`): turning the cube and the goal about that vertical turns
    the vectors' horizontal parts (:data:`HORIZONTAL`) and leaves the rest. The grasp
    expert's decision (:mod:`simops_learning.pick_expert`: horizontal distances, heights,
    and targets relative to the cube, the goal and the grasp point) turns with them, its
    gripper command unchanged. Behaviour cloning shows the network every heading of a
    demonstrated scene this way. Returns new tensors.
    """
    cos, sin = torch.cos(angle), torch.sin(angle)
    features, steps = features.clone(), steps.clone()
    for x, y in HORIZONTAL:
        features[:, x], features[:, y] = (cos * features[:, x] - sin * features[:, y],
                                          sin * features[:, x] + cos * features[:, y])
    steps[:, 0], steps[:, 1] = (cos * steps[:, 0] - sin * steps[:, 1],
                                sin * steps[:, 0] + cos * steps[:, 1])
    return features, steps


def quaternion_yaw(quat: torch.Tensor) -> torch.Tensor:
    """The yaw (B,) rad about the base z axis of quaternions (B, 4) x-y-z-w."""
    x, y, z, w = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def square_yaw(hand_yaw: torch.Tensor, cube_yaw: torch.Tensor) -> torch.Tensor:
    """The hand's yaw (B,) rad square to the cube's faces nearest ``hand_yaw`` (B,) rad.

    The cube's yaw ``cube_yaw`` (B,) rad, modulo a quarter turn.
    """
    quarter = torch.pi / 2
    return cube_yaw + torch.round((hand_yaw - cube_yaw) / quarter) * quarter


class TaskSpaceLaw(nn.Module):
    """Joint deltas that move the grasp point and keep the hand square over the cube.

    Resolved-rate control at the grasp point (``depth`` m below the hand along its axis):
    ``dq = J⁺ [move; orient · ω] + (I − J⁺J) · posture · (home − q)``, with J the (6, 7)
    geometric Jacobian of the kinematics layer, J⁺ its damped pseudo-inverse, ``move`` (3,)
    m the grasp point's step, and ω (3,) rad the rotation to a hand pointing down with its
    fingers square to the cube's faces (the cube's yaw, modulo a quarter turn, nearest the
    hand's). ``dq`` is returned in action units (rad / ``scale``), scaled down as a vector to
    at most one unit. The expert and the policy share it.
    """

    def __init__(self, kinematics: ArmKinematics, home: np.ndarray, scale: float,
                 depth: float = GRASP_DEPTH, damping: float = 0.02, orient: float = 0.3,
                 posture: float = 0.05) -> None:
        super().__init__()
        self.kinematics = kinematics
        self.register_buffer('home', torch.tensor(home, dtype=torch.float32))
        self.scale, self.depth, self.damping = float(scale), float(depth), float(damping)
        self.orient, self.posture = float(orient), float(posture)

    def grasp(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Grasp point (B, 3) m and the hand's yaw (B,) rad for joints q (B, 7) rad."""
        position, rotation, _, _ = self.kinematics(q)
        return (position + self.depth * rotation[:, :, 2],
                torch.atan2(rotation[:, 1, 0], rotation[:, 0, 0]))

    def forward(self, q: torch.Tensor, move: torch.Tensor, cube_yaw: torch.Tensor
                ) -> torch.Tensor:
        """Action units (B, 7) for joints q (B, 7) rad, move (B, 3) m, cube yaw (B,) rad."""
        position, rotation, origins, axes = self.kinematics(q)
        grasp = position + self.depth * rotation[:, :, 2]
        yaw = square_yaw(torch.atan2(rotation[:, 1, 0], rotation[:, 0, 0]), cube_yaw)
        c, s = torch.cos(yaw), torch.sin(yaw)
        zero = torch.zeros_like(c)
        target = torch.stack([c, s, zero, s, -c, zero, zero, zero, zero - 1.0],
                             dim=1).reshape(-1, 3, 3)
        turn = target @ rotation.transpose(1, 2)
        omega = 0.5 * torch.stack([turn[:, 2, 1] - turn[:, 1, 2], turn[:, 0, 2] - turn[:, 2, 0],
                                   turn[:, 1, 0] - turn[:, 0, 1]], dim=1)
        linear = torch.cross(axes, grasp[:, None, :] - origins, dim=2)
        jac = torch.cat([linear.transpose(1, 2), axes.transpose(1, 2)], dim=1)   # (B, 6, 7)
        error = torch.cat([move, self.orient * omega], dim=1)
        square = jac @ jac.transpose(1, 2) + self.damping ** 2 * torch.eye(6, dtype=q.dtype)
        pinv = jac.transpose(1, 2) @ torch.linalg.inv(square)                    # (B, 7, 6)
        null = torch.eye(7, dtype=q.dtype) - pinv @ jac
        dq = (pinv @ error[:, :, None] + null @ (self.posture * (self.home - q))[:, :, None])
        dq = dq[:, :, 0] / self.scale
        largest = torch.clamp(torch.amax(torch.abs(dq), dim=1, keepdim=True), min=1.0)
        return dq / largest


class PickPolicy(nn.Module):
    """Kinematics layer, task features, an MLP and the task-space law; see the module doc."""

    def __init__(self, card: PolicyCard, spec: RobotSpec, model: mujoco.MjModel,
                 index: ModelIndex, hidden: Sequence[int], extra: int = 0) -> None:
        super().__init__()
        self.history = card.history   # the card's frames (the envs' card layout)
        self.law = TaskSpaceLaw(ArmKinematics(model, index, HAND_BODY), spec.home,
                                card.action.scale)
        located = [newest_slots(card, source, fields) for source, fields in (
            ('joint_position', spec.arm_joints), ('object_position', ('x', 'y', 'z')),
            ('object_quaternion', ('x', 'y', 'z', 'w')), ('goal_position', ('x', 'y', 'z')),
            ('gripper_width', ('width',)))]
        # q (7), cube (3), its quaternion x-y-z-w (4), goal (3), opening (1) of the newest frame
        self.register_buffer('read_at', torch.cat([at for at, _, _ in located]))
        self.register_buffer('read_scale', torch.cat([scale for _, scale, _ in located]))
        self.register_buffer('read_offset', torch.cat([offset for _, _, offset in located]))
        size = FEATURES + extra
        self.register_buffer('input_mean', torch.zeros(size))
        self.register_buffer('input_std', torch.ones(size))
        layers: list[nn.Module] = []
        width = size
        for units in hidden:
            layers += [nn.Linear(width, units), nn.Tanh()]
            width = units
        layers.append(nn.Linear(width, 4))
        self.body = nn.Sequential(*layers)
        self.move_unit = MOVE_UNIT

    def inputs(self, observation: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The network's input (B, 15), not yet standardised, and what the law needs.

        Returns the input, the measured arm joints q (B, 7) rad and the cube's yaw (B,) rad.
        """
        return self.features(self.quantities(observation))

    def quantities(self, observation: torch.Tensor) -> torch.Tensor:
        """The quantities (B, 18) :meth:`features` reads, from observations (B, obs size)."""
        return observation[:, self.read_at] / self.read_scale + self.read_offset

    def features(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`inputs` from the quantities (B, 18) the network reads, in SI units.

        ``raw``: the measured arm joints q (7) rad, the cube's centre (3) m and quaternion
        x-y-z-w (4), the goal (3) m and the gripper opening (1) m, base frame. A dataset's
        frames (:mod:`simops_learning.demonstrations`) hold them by name.
        """
        q, cube, quat, goal = raw[:, :7], raw[:, 7:10], raw[:, 10:14], raw[:, 14:17]
        grasp, _ = self.law.grasp(q)
        cube_yaw = quaternion_yaw(quat)
        to_cube, to_goal = cube - grasp, goal - cube
        features = torch.cat([
            to_cube, to_goal, goal - grasp,
            torch.linalg.vector_norm(to_cube[:, :2], dim=1, keepdim=True),
            torch.linalg.vector_norm(to_goal[:, :2], dim=1, keepdim=True),
            raw[:, 17:18], grasp[:, 2:], cube[:, 2:], goal[:, 2:]], dim=1)
        return features, q, cube_yaw

    def set_normalization(self, inputs: np.ndarray) -> None:
        """Standardisation of the network's input from samples (N, size)."""
        self.input_mean.copy_(torch.as_tensor(inputs.mean(axis=0), dtype=torch.float32))
        self.input_std.copy_(torch.as_tensor(np.maximum(inputs.std(axis=0), 1e-3),
                                             dtype=torch.float32))

    def head(self, features: torch.Tensor) -> torch.Tensor:
        """The network: (B, 4), the grasp point's step in ``MOVE_UNIT`` and the gripper."""
        return self.body((features - self.input_mean) / self.input_std)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """Raw action (B, 7 + 1) in [-1, 1] for observations (B, observation size)."""
        features, q, cube_yaw = self.inputs(observation)
        out = self.head(features)
        arm = self.law(q, out[:, :3] * self.move_unit, cube_yaw)
        return torch.cat([arm, torch.clamp(out[:, 3:], -1.0, 1.0)], dim=1)


class InFlightPolicy(PickPolicy):
    """A :class:`PickPolicy` that also reads where its commands in flight take the hand.

    Besides the 15 task features it reads, from the card's ``H`` frames: the grasp point's
    shift (m, base frame) by the sum of its last k arm actions, k = 1 … H (the clipped
    actions the card observes, scaled as the policy step scales them; with the card's
    ``last_command`` reference these are the commands a delay may still hold), and the
    measured grasp point's shifts between consecutive frames (H − 1 of them: how late the
    arm answered). That is ``6 H − 3`` inputs more. DAgger labels it with the expert's
    decision from the joints the commands in flight lead to
    (:mod:`simops_learning.pick_expert`), so the network learns to act for a command delay
    it is not told, from the two kinds of shift.
    """

    def __init__(self, card: PolicyCard, spec: RobotSpec, model: mujoco.MjModel,
                 index: ModelIndex, hidden: Sequence[int]) -> None:
        super().__init__(card, spec, model, index, hidden, extra=6 * card.history - 3)
        # (H, 7) observation slots, newest frame first, and their scale and offset (7,)
        for name, source in (('action', 'last_action'), ('joints', 'joint_position')):
            at, scale, offset = frame_slots(card, source, spec.arm_joints)
            self.register_buffer(f'{name}_at', at)
            self.register_buffer(f'{name}_scale', scale)
            self.register_buffer(f'{name}_offset', offset)
        self.step_size = float(card.action.scale)            # rad per action unit

    def inputs(self, observation: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The network's input (B, 15 + 6 H - 3), the measured q (B, 7) rad, the cube's yaw."""
        features, q, cube_yaw = self.features(self.quantities(observation))
        return torch.cat([features, self.in_flight(observation, q)], dim=1), q, cube_yaw

    def in_flight(self, observation: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The commanded and the measured shifts (B, 6 H - 3) m of the grasp point."""
        actions = observation[:, self.action_at] / self.action_scale + self.action_offset
        sent = torch.cumsum(actions, dim=1) * self.step_size           # (B, H, 7) rad
        measured = observation[:, self.joints_at] / self.joints_scale + self.joints_offset
        grasp, _ = self.law.grasp(q)
        shifts = [self.law.grasp(q + sent[:, k])[0] - grasp for k in range(self.history)]
        frames = [self.law.grasp(measured[:, k])[0] for k in range(self.history)]
        shifts += [frames[k] - frames[k + 1] for k in range(self.history - 1)]
        return torch.cat(shifts, dim=1)
