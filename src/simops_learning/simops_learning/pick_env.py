"""``SimOps/FR3PickPlace-v0``: grasp the 4 cm cube, carry it and place it at a goal.

The reach env's clockwork unchanged (:class:`~simops_learning.reach_env.FR3ReachEnv`: one
policy-node tick, through the shared policy step and safety pipeline, then one lockstep period
of the shared physics), with the task's scene, reward and safety accounting:

- **Scene.** At reset the cube (4 cm, its centre 0.02 m above the table) is put at a uniform
  position in ``OBJECT_LOW``…``OBJECT_HIGH`` with a uniform yaw in ±``MAX_YAW``; the goal (the
  cube centre's target) is uniform in ``GOAL_LOW``…``GOAL_HIGH``, at least ``MIN_TRAVEL`` from
  the cube. ``reset(options=...)`` also accepts ``object`` (x, y, yaw) in m and rad.
- **Success**: the cube's centre within ``success_radius`` (0.02 m) of the goal; the episode
  then terminates. At most 200 steps (10 s at 20 Hz).
- **Reward** per step: minus the grasp point–cube distance (m, reaching), plus
  ``GRASP_BONUS`` while both fingers touch the cube and it is off the table, minus twice the
  cube–goal distance (m, placing), minus ``ACTION_COST`` · |action|², plus ``SUCCESS_BONUS``
  on success; with ``reward_terms`` ({failure mode: weight}), minus their penalties
  (:mod:`simops_learning.reward_terms`: what the improve stage adds where PPO trains).
- **Safety**, measured every ``SAMPLE_PERIOD`` (10 ms, 100 Hz) and reported per episode
  in ``info``: ``peak_joint_speed`` (rad/s, largest arm joint), ``peak_contact_force`` (N, the
  largest normal force between the hand or fingers and anything but the cube: MuJoCo's
  contact forces) and ``unsafe`` when they exceed ``SAFE_JOINT_SPEED`` (1.5 rad/s) or
  ``SAFE_CONTACT_FORCE`` (20 N); ``dropped`` once the cube, lifted in a grasp earlier in the
  episode, is out of the grasp away from its goal.

Frames and units: base frame, m, rad, N.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mujoco
import numpy as np

from simops_core.tasks import TASKS
from simops_learning.reach_env import MAX_EPISODE_STEPS, SUCCESS_BONUS, FR3ReachEnv
from simops_learning.reward_terms import Penalties

ENV_ID = TASKS['pick_place'].env_id
CUBE_HALF = 0.02                                   # m, the cube's half size
OBJECT_LOW = np.array([0.35, -0.25])               # m, cube centre x, y on the table
OBJECT_HIGH = np.array([0.65, 0.25])
MAX_YAW = np.pi / 4                                # rad
GOAL_LOW = np.array([0.3, -0.3, CUBE_HALF])        # m, the cube centre's goal, base frame
GOAL_HIGH = np.array([0.7, 0.3, 0.3])
MIN_TRAVEL = 0.10                                  # m between the cube and its goal
GRASP_DEPTH = 0.09                                 # m below the flange: the finger pads' centre
GRASP_BONUS = 0.5
ACTION_COST = 0.01
SAFE_JOINT_SPEED = 1.5                             # rad/s
SAFE_CONTACT_FORCE = 20.0                          # N
SAMPLE_PERIOD = 0.01                               # s between safety samples
PICK_HISTORY = 3                                   # observation frames of the pick card
IN_FLIGHT_HISTORY = 7       # frames of an in-flight policy's card (pick_network.InFlightPolicy)
LEFT_FINGER, RIGHT_FINGER = 'fr3_leftfinger', 'fr3_rightfinger'


class FR3PickPlaceEnv(FR3ReachEnv):
    """Gymnasium env of the FR3 pick-and-place task; see the module docstring.

    Arguments as :class:`~simops_learning.reach_env.FR3ReachEnv`, ``reward_terms``
    ({name: weight} of :data:`~simops_learning.reward_terms.TERMS`; default none) and
    ``history``: the frames of the default card layout (without ``card_path``).
    """

    task = 'pick_place'
    card_history = PICK_HISTORY
    sample_period = SAMPLE_PERIOD

    def __init__(self, reward_terms: Mapping[str, float] | None = None,
                 history: int = PICK_HISTORY, **kwargs: Any) -> None:
        self.card_history = history
        kwargs.setdefault('max_episode_steps', MAX_EPISODE_STEPS)
        self.penalties = Penalties(reward_terms or {}, kwargs['max_episode_steps'])
        super().__init__(**kwargs)
        model, index = self.physics.model, self.physics.index
        if index.object_body < 0:
            raise ValueError('the pick-and-place task needs a model with an object body')
        joint = model.body_jntadr[index.object_body]
        self._object_qpos = int(model.jnt_qposadr[joint])
        self._object_dof = int(model.jnt_dofadr[joint])
        fingers = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
                   for name in (LEFT_FINGER, RIGHT_FINGER)]
        self._finger_geoms = [set(np.flatnonzero(model.geom_bodyid == body)) for body in fingers]
        self._hand_geoms = set(index.hand_geoms.tolist())
        self._object_geoms = set(index.object_geoms.tolist())
        self._force = np.zeros(6)
        self.object_start = np.zeros(3)
        self.peak_speed = self.peak_force = 0.0
        self.was_lifted = False   # the cube was off the table in a grasp at some step

    # --- scene ---------------------------------------------------------------------------

    def _sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(GOAL_LOW, GOAL_HIGH)

    def _arrange(self, rng: np.random.Generator, options: dict[str, Any]) -> None:
        """Put the cube on the table (``options['object']``: x, y, yaw, or drawn)."""
        placed = options.get('object')
        if placed is None:
            for _ in range(100):
                xy = rng.uniform(OBJECT_LOW, OBJECT_HIGH)
                if np.linalg.norm(np.append(xy, CUBE_HALF) - self.goal) >= MIN_TRAVEL:
                    break
            placed = (*xy, rng.uniform(-MAX_YAW, MAX_YAW))
        x, y, yaw = (float(v) for v in placed)
        data = self.physics.data
        qpos = data.qpos[self._object_qpos:self._object_qpos + 7]
        qpos[:3] = (x, y, CUBE_HALF)
        qpos[3:] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
        data.qvel[self._object_dof:self._object_dof + 6] = 0.0
        mujoco.mj_forward(self.physics.model, data)
        self.object_start = np.array([x, y, yaw])
        self.peak_speed = self.peak_force = 0.0
        self.was_lifted = False
        self.penalties.reset()

    # --- stepping and safety -------------------------------------------------------------

    def _sample(self, steps: int) -> None:
        """After each ``SAMPLE_PERIOD`` of physics steps: peak joint speed and force.

        Also at a joint latency's step, and the base class's reading there.
        """
        super()._sample(steps)
        physics = self.physics
        speeds = physics.data.qvel[physics.index.dof_adr[:physics.index.arm_dof]]
        self.peak_speed = max(self.peak_speed, float(np.max(np.abs(speeds))))
        self.peak_force = max(self.peak_force, self.contact_force())

    def contact_force(self) -> float:
        """Largest normal force (N) between the hand or fingers and anything but the cube."""
        model, data = self.physics.model, self.physics.data
        hand, cube, force = self._hand_geoms, self._object_geoms, self._force
        largest = 0.0
        for i in range(data.ncon):
            contact = data.contact[i]
            pair = (contact.geom1, contact.geom2)
            if not (pair[0] in hand or pair[1] in hand) or pair[0] in cube or pair[1] in cube:
                continue
            mujoco.mj_contactForce(model, data, i, force)
            largest = max(largest, abs(float(force[0])))
        return largest

    def grasped(self) -> bool:
        """Both fingers touch the cube."""
        data, cube = self.physics.data, self._object_geoms
        touching = [False, False]
        for i in range(data.ncon):
            contact = data.contact[i]
            for geom, other in ((contact.geom1, contact.geom2), (contact.geom2, contact.geom1)):
                if other in cube:
                    for side, geoms in enumerate(self._finger_geoms):
                        touching[side] |= geom in geoms
        return all(touching)

    # --- task ----------------------------------------------------------------------------

    def object_position(self) -> np.ndarray:
        """The cube centre (3,) m in the base frame (true, without noise)."""
        return self.true_object_pose()[0]

    def grasp_point(self) -> np.ndarray:
        """Between the finger pads: ``GRASP_DEPTH`` below the flange along the hand axis (m)."""
        physics = self.physics
        position, quat = physics.body_pose(physics.index.flange_body)
        axis = np.empty(3)
        mujoco.mju_rotVecQuat(axis, np.array([0.0, 0.0, 1.0]), quat)
        return position + GRASP_DEPTH * axis

    def episode_options(self, seed: int, episode: int) -> dict[str, Any]:
        """No options: the reset seed draws the episode's cube and goal."""
        return {}

    def _tracked(self) -> np.ndarray:
        return self.object_position()

    def _info(self, fault: bool) -> dict[str, Any]:
        cube = self.object_position()
        info = super()._info(fault, cube)
        grasped = self.grasped()
        lifted = grasped and cube[2] > CUBE_HALF + 0.005
        self.was_lifted |= lifted
        info.update(
            reach_distance=float(np.linalg.norm(self.grasp_point() - cube)), grasped=grasped,
            lifted=lifted, object_position=cube,
            dropped=self.was_lifted and not grasped and not info['is_success'],
            peak_joint_speed=self.peak_speed, peak_contact_force=self.peak_force,
            unsafe=self.peak_speed > SAFE_JOINT_SPEED or self.peak_force > SAFE_CONTACT_FORCE)
        return info

    def _reward(self, info: dict[str, Any], action: np.ndarray) -> float:
        return float(-info['reach_distance'] + (GRASP_BONUS if info['lifted'] else 0.0)
                     - 2.0 * info['distance'] - ACTION_COST * float(np.dot(action, action))
                     + (SUCCESS_BONUS if info['is_success'] else 0.0) - self.penalties(info))
