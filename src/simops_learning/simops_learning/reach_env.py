"""``SimOps/FR3Reach-v0``: move the FR3 flange to a goal, as the ROS graph would run it.

Each :meth:`FR3ReachEnv.step` is one tick of the policy node followed by one lockstep period
of the simulator node (``sync_mode:=lockstep``, ``control_period`` = 1 / card rate):

1. the node's mode machine decides the tick (:mod:`simops_core.motion_supervisor`: the
   ramp, a hold on stale joint states, the e-stop); when it runs the policy, the action goes
   through the node's policy step (:mod:`simops_core.policy_step`: the safety pipeline at
   the joint state the observation was built from), else the held target goes out;
2. the command goes to the shared :class:`~simops_sim.physics.Physics` as the simulator
   node applies a streamed target: reached linearly from the current target over the
   period (the arm's JointTrajectoryController starts a one-point trajectory from the
   measured state instead: docs/limits.md);
   the gripper width is set directly. Then ``period / timestep`` physics steps run (the
   command reaches the actuators after the model's command delay);
3. the joint state at the end of the period, plus noise when randomised, and the object pose
   build the next observation with the shared observation builder.

Frames and units: base frame, m, rad. Observation: (card.observation_size,) float32;
action: (card.action.size,) float32 in ±card.action.clip. Reward: minus the flange-goal
distance (m) per step, +10 on success. An episode terminates on success (distance below
``success_radius``), when the node would fault (an arm joint faster than its velocity
limit), or on a protective stop: the arm stopping itself as the real arm would
(:mod:`simops_sim.reflexes`, the simulator node's check; ``info['protective_stop']`` says
why, and the episode is no success). It is truncated after ``max_episode_steps``.

``reset(options=...)`` accepts ``goal`` (3,) m, ``conditions`` (:class:`Conditions`),
``ramp_time`` (s), ``level`` (this episode's curriculum level in [0, 1]) and ``scenario``
(a :class:`~simops_sim.scenarios.Scenario`: a push, a moved goal, joint states or object
poses that stop coming, an e-stop and recovery, played at its ticks); otherwise the goal is
uniform in the workspace box and, with a :class:`DomainRandomization`, the conditions are
drawn at the curriculum's level. ``info['mode']`` is the node's mode after the tick.
A tick that does not run the policy (a hold, or no new joint state) ignores its action and
returns the last observation again.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from simops_core.franka_ros2 import ArmModeWatch
from simops_core.motion_supervisor import Decision, MotionSupervisor, stand_still
from simops_core.paths import ROBOT_SCENE, resolve_resource
from simops_core.policy_card import CardError, PolicyCard, load_policy_card
from simops_core.policy_step import PolicyStep, StepSettings
from simops_core.robot_spec import gripper_width, load_robot_spec
from simops_core.sim_params import (
    SimParams,
    load_sim_params,
    merge_sim_params,
    sensor_model_of,
)
from simops_core.tasks import TASKS
from simops_learning.curriculum import Curriculum
from simops_learning.reach_card import HISTORY, parse_card, reach_card
from simops_sim.perception import Perception, SensorNoise
from simops_sim.physics import Physics
from simops_sim.randomization import Conditions, DomainRandomization
from simops_sim.reflexes import ProtectiveStop, robot_mode, stop_errors, user_stop_pressed
from simops_sim.scenarios import ARM_STOPS, USER_STOP, ScenarioRun
from simops_sim.sim_profiles import VALIDATION, apply_profile, sim_profile, steps_per_period
from simops_sim.trajectory_plan import TrajectoryPlan, point_goal

ENV_ID = TASKS['reach'].env_id
MAX_EPISODE_STEPS = 200
SUCCESS_RADIUS = 0.02                                  # m
# Goals for the flange. The lowest keeps the Franka Hand (fingertips 0.1034 m below the
# flange) about 2.5 cm above the table at the goal: a goal lower than that can only be
# reached by pressing the hand onto the table, which trips the arm's collision reflex.
WORKSPACE_LOW = np.array([0.3, -0.3, 0.13])            # m, base frame
WORKSPACE_HIGH = np.array([0.7, 0.3, 0.45])
SUCCESS_BONUS = 10.0
ARM_STOP_ERROR = 'joint_reflex'   # the franka_msgs Errors field an arm_stop scenario sets
DEFAULT_KEYFRAME = 'home'


def episode_goal(seed: int, episode: int) -> np.ndarray:
    """The goal (3,) m of episode ``episode`` of a run seeded ``seed`` (uniform workspace)."""
    return np.random.default_rng([seed, episode]).uniform(WORKSPACE_LOW, WORKSPACE_HIGH)


class FR3ReachEnv(gym.Env):
    """Gymnasium env of the FR3 reach task; see the module docstring.

    ``card_path``: policy card whose observation and action layout the env uses (default:
    the reach card layout); ``sim_params_file``: calibrated physics (SimParams YAML);
    ``randomization`` and ``curriculum``: domain randomisation per episode (``None``: the
    fixed ``conditions``); ``safety``: the policy node's settings. The node's mode machine
    (:class:`~simops_core.motion_supervisor.MotionSupervisor`) runs on env time, tick ``k``
    at ``k * period`` s: the ramp blends in as ``min(k * period / ramp_time, 1)`` after a
    reset, what the node sees with on-time ticks. ``profile``: the simulator's MuJoCo options
    (:mod:`simops_sim.sim_profiles`; ``'training'`` for speed, ``'validation'`` as the
    simulator node runs). ``sensor_model``: a SimParams file whose learned sensor model
    (``fit --actuator-model``) the arm reports its efforts through, beside the calibration
    (the validation sim's; :mod:`simops_sim.sensor_model`). ``sensors``: read the joints
    and the object through the profile's sensor errors (:mod:`simops_sim.perception`: noise,
    the object pose's latency and dropouts), as the gate's validation sim does; otherwise
    (and when the profile names none) the simulator's exact state, as the simulator node
    publishes it.
    """

    metadata: dict[str, Any] = {'render_modes': []}  # noqa: RUF012 - gymnasium's API
    task = 'reach'           # the task (simops_core.tasks) of the default card layout
    card_history = HISTORY   # frames of the default card layout
    # s between two _sample calls (None: once a period); a profile's safety_sample overrides it
    sample_period: float | None = None

    def __init__(self, card_path: str | Path | None = None,
                 sim_params_file: str | Path | None = None,
                 randomization: DomainRandomization | None = None,
                 curriculum: Curriculum | None = None,
                 conditions: Conditions | None = None,
                 safety: StepSettings | None = None,
                 max_episode_steps: int = MAX_EPISODE_STEPS,
                 success_radius: float = SUCCESS_RADIUS,
                 robot: str = 'fr3', model: str | None = None,
                 keyframe: str = DEFAULT_KEYFRAME, profile: str = VALIDATION,
                 sensor_model: str | Path | None = None, sensors: bool = False) -> None:
        self.spec_robot = load_robot_spec(robot)
        spec = self.spec_robot
        self.card: PolicyCard = (
            load_policy_card(card_path, spec.joint_names, spec.arm_joints) if card_path
            else parse_card(reach_card(spec, history=self.card_history, task=self.task), spec,
                            Path('<card layout>')))
        if self.card.images:
            raise CardError(f'{card_path}: the card takes camera images; the Gym envs render '
                            'none yet (an image policy runs in the policy node)')
        self.safety = safety or StepSettings()
        self.policy_step = PolicyStep(self.card, spec, self.safety)
        self.ramp_time = self.safety.ramp_time   # this episode's (randomised) ramp, s
        model = model or ROBOT_SCENE.format(robot=robot)
        self.profile = sim_profile(profile)
        mj_model = apply_profile(mujoco.MjModel.from_xml_path(str(resolve_resource(model))),
                                 self.profile)
        self.physics = Physics(mj_model, spec, reflexes=True)
        fitted = load_sim_params(sim_params_file) if sim_params_file else SimParams()
        if sensor_model:   # the validation sim's torque sensors: a learned model
            fitted = replace(fitted, actuator_model=sensor_model_of(sensor_model))
        self.base_params = merge_sim_params(self.physics.nominal, fitted)
        self.randomization = randomization
        self.curriculum = curriculum or Curriculum()
        self.conditions = conditions or Conditions()
        self.keyframe = keyframe
        self.max_episode_steps = max_episode_steps
        self.success_radius = success_radius
        self.period = 1.0 / self.card.control_rate
        self.substeps = steps_per_period(self.physics.timestep, self.period, profile)
        self.sensors: SensorNoise | None = self.profile.sensors if sensors else None
        self.perception: Perception | None = None
        # the joint state the node reads was measured this many physics steps before the end
        self._late_steps = round(self.sensors.joint_latency / self.physics.timestep
                                 ) if self.sensors is not None else 0
        if self._late_steps >= self.substeps:
            raise ValueError(f'joint_latency {self.sensors.joint_latency:g} s is not shorter '
                             f'than a control period ({self.period:g} s)')
        self._late: np.ndarray | None = None   # that state (3, N), taken during the period
        self._done = 0   # physics steps of the current period run so far
        self._chunks = self._period_chunks()
        self.supervisor = MotionSupervisor(start_enabled=True, ramp_time=self.ramp_time)
        self.scenario = ScenarioRun(None, self.period)
        self._decision = Decision(run=True, publish=True, restart=True, blend=0.0)
        self._acts = True           # this tick runs the policy on a new observation
        self._measured_at = 0       # the tick of the newest joint state
        self._obs = np.zeros(0, np.float32)
        self._fault, self._action = False, np.zeros(self.card.action.size)
        self.episodes = 0
        self.goal = np.zeros(3)
        self._applied: Conditions | None = None
        self._joints = np.zeros((3, len(spec.joint_names)))
        self._steps = 0
        clip = self.card.action.clip
        self.action_space = gym.spaces.Box(-clip, clip, (self.card.action.size,), np.float32)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.card.observation_size,),
                                                np.float32)

    # --- episode -------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode at the keyframe; see the module docstring for ``options``."""
        super().reset(seed=seed)
        options = options or {}
        rng = self.np_random
        conditions, ramp = self.conditions, self.safety.ramp_time
        if self.randomization is not None:
            level = options.get('level', self.curriculum.level(self.episodes))
            conditions, ramp = self.randomization.sample(rng, level)
        conditions = options.get('conditions', conditions)
        ramp = float(options.get('ramp_time', ramp))
        goal = options.get('goal')
        self.goal = (np.asarray(goal, dtype=float).copy() if goal is not None
                     else self._sample_goal(rng))
        self._set_conditions(conditions)
        self.ramp_time = ramp
        self.physics.reset_keyframe(self.keyframe)
        self._arrange(rng, options)
        self.physics.set_goal_pose(self.goal, np.array([1.0, 0.0, 0.0, 0.0]))
        self.episodes += 1
        self._steps, self._late = 0, None
        if self.sensors is not None:   # draws of its own: the episode's others stay as they were
            self.perception = Perception(self.sensors, self._own_rng())
        scenario = options.get('scenario')
        self.scenario = ScenarioRun(scenario, self.period,
                                    self._own_rng() if scenario is not None else None)
        self.physics.push(self._pushed_body(), np.zeros(3))
        self.supervisor = MotionSupervisor(start_enabled=True, ramp_time=ramp)
        self._arm_modes = ArmModeWatch()
        self.policy_step.forget()
        self._tick_inputs()
        return self._decide(), self._info(fault=False)

    def _own_rng(self) -> np.random.Generator:
        """A generator of the episode's own (spawned from its seed): other draws stay."""
        return np.random.default_rng(self.np_random.bit_generator.seed_seq.spawn(1)[0])

    def _pushed_body(self) -> int:
        """The body a push scenario pushes (the flange, or the object when it names it)."""
        index = self.physics.index
        return index.object_body if self.scenario.pushes_object else index.flange_body

    def episode_options(self, seed: int, episode: int) -> dict[str, Any]:
        """``reset`` options fixing episode ``episode`` of a run seeded ``seed``: its goal."""
        return {'goal': episode_goal(seed, episode)}

    def _sample_goal(self, rng: np.random.Generator) -> np.ndarray:
        """A goal (3,) m, base frame, when ``reset`` is given none: uniform in the workspace."""
        return rng.uniform(WORKSPACE_LOW, WORKSPACE_HIGH)

    def _arrange(self, rng: np.random.Generator, options: dict[str, Any]) -> None:
        """Place the scene's objects after the keyframe reset (the reach task leaves them)."""

    def _advance(self) -> None:
        """Run one control period of physics steps, in chunks of ``sample_period``."""
        for chunk in self._chunks:
            self.physics.step(chunk)
            self._sample(chunk)

    def chunks(self) -> tuple[int, ...]:
        """The physics steps of one control period, cut where the env samples its figures.

        Under a joint latency, also cut where the joint state the node reads is measured.
        """
        return self._chunks

    def _period_chunks(self) -> tuple[int, ...]:
        """:meth:`chunks`, worked out once: they depend on the profile and sensors only.

        A task that samples its safety figures does so every ``sample_period``, or every
        ``safety_sample`` of the profile that names one; at least once a period.
        """
        every = self.sample_period and (self.profile.safety_sample or self.sample_period)
        size = (min(self.substeps, max(1, round(every / self.physics.timestep)))
                if every else self.substeps)
        ends = set(range(size, self.substeps, size)) | {self.substeps}
        if self._late_steps:
            ends.add(self.substeps - self._late_steps)
        ends_sorted = sorted(ends)
        return tuple(end - start
                     for start, end in zip([0, *ends_sorted], ends_sorted, strict=False))

    def _sample(self, steps: int) -> None:
        """After each chunk of ``steps`` physics steps: the joint state at a latency's step.

        The step is counted from the period's start. The reach task samples nothing else.
        """
        self._done += steps
        if self._late_steps and self._done == self.substeps - self._late_steps:
            self._late = self._joints.copy()
            self.physics.read_joints(self._late)

    def _reward(self, info: dict[str, Any], action: np.ndarray) -> float:
        """Minus the flange-goal distance (m), plus the success bonus."""
        return -info['distance'] + (SUCCESS_BONUS if info['is_success'] else 0.0)

    def _set_conditions(self, conditions: Conditions) -> None:
        if conditions != self._applied:
            self.physics.apply_params(conditions.sim_params(
                self.base_params, self.spec_robot.arm_joints, self.physics.index.mass_bodies,
                self.period))
            self._applied = conditions
        self.conditions_now = conditions

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One policy-node tick and one lockstep period of the simulator."""
        self.begin_step(action)
        self._advance()
        return self.finish_step()

    def begin_step(self, action: np.ndarray) -> None:
        """The first part of :meth:`step`: the policy node's tick, the command to the arm.

        A batch runner calls it, advances many envs' physics together
        (:func:`simops_sim.physics_batch.step_together`, :meth:`chunks`, :meth:`_sample`),
        then calls :meth:`finish_step`; the result is :meth:`step`'s, bit for bit.
        """
        decision, step = self._decision, self.policy_step
        self._fault, self._action = False, np.zeros(self.card.action.size)
        self._done, self._late = 0, None
        if self._acts:
            out = step.command(action, decision.blend)
            self._send(out.state.target, out.state.gripper)
            self._fault, self._action = out.fault, out.action
        elif not decision.run:   # the node's hold, brake or silence: stand_still's
            held = stand_still(self.supervisor, decision, step.state, step.limits, nullcontext())
            if held is not None:
                self._send(held.target, held.gripper)
            step.state = held if held is not None or decision.publish else None
        # else: no joint state since the last command; the node sends nothing
        push = self.scenario.push_force(self._steps)
        if push is not None:
            self.physics.push(self._pushed_body(), push)

    def _send(self, target: np.ndarray, gripper: float) -> None:
        """The node's command: the arm target (7,) rad reached over the period, the width m."""
        physics = self.physics
        physics.follow(TrajectoryPlan(point_goal(target, self.period), physics.time,
                                      physics.arm_target))
        if self.card.action.gripper:
            physics.set_gripper_width(gripper)

    def finish_step(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The last part of :meth:`step`: measure, decide the next tick, judge the period."""
        self._steps += 1
        self._tick_inputs()
        obs = self._decide()
        info = self._info(fault=self._fault)
        too_fast = self.policy_step.out_of_domain() is not None
        info['out_of_domain'] = too_fast
        success = info['is_success']
        reward = self._reward(info, self._action)
        truncated = self._steps >= self.max_episode_steps
        stopped = info['protective_stop'] != '' and not self.scenario.arm_stopped(self._steps)
        return obs, float(reward), bool(success or too_fast or stopped), truncated, info

    def _tick_inputs(self) -> None:
        """At tick ``_steps``: the scenario's events, then what the node reads."""
        tick, scenario = self._steps, self.scenario
        if scenario.moves_goal(tick):
            self.goal = self._sample_goal(scenario.rng)
            self.physics.set_goal_pose(self.goal, np.array([1.0, 0.0, 0.0, 0.0]))
        scenario.drive(self.supervisor, tick)
        physics = self.physics
        if scenario.arm_stopped(tick):   # the arm's own stop, or its user stop pressed
            if physics.stop is None:
                physics.latch_stop(
                    user_stop_pressed(physics.time)
                    if scenario.event == USER_STOP else
                    ProtectiveStop(ARM_STOP_ERROR, '', physics.time,
                                   'the arm stopped itself (a scenario)'))
        elif scenario.arm_recovers(tick):   # its error recovery; it holds where it stopped
            physics.clear_stop()
        if scenario.event in ARM_STOPS:   # the node reads the arm's mode, as on franka's state
            reason = self._arm_modes.read(robot_mode(physics.stop), stop_errors(physics.stop))
            if reason:
                self.supervisor.fault(reason)
        self._measure(joints=not scenario.joint_states_lost(tick),
                      scene=not scenario.object_pose_lost(tick))

    def _decide(self) -> np.ndarray:
        """The node's decision at this tick; the observation it infers from.

        Joint states older than ``stale_state_timeout`` are not ready (the node holds); a
        tick with no new joint state runs no policy (one command per measured state). Either
        way the last observation is returned again.
        """
        age = (self._steps - self._measured_at) * self.period
        ready = age <= self.safety.stale_state_timeout + 1e-9
        decision = self.supervisor.tick(self._steps * self.period, ready,
                                        '' if ready else f'stale joint states ({age:.3f} s old)',
                                        self.policy_step.state is not None)
        self._decision = decision
        self._acts = decision.run and (decision.restart or age == 0)
        if self._acts:
            step = self.policy_step
            if decision.restart:
                arm = len(self.spec_robot.arm_joints)
                self._obs = step.restart(float(gripper_width(step.raw.joint_position[arm:])))
            else:
                self._obs = step.observe()
        return self._obs.copy()

    # --- measurement -----------------------------------------------------------------------

    def _measure(self, joints: bool = True, scene: bool = True) -> None:
        """Fill the policy step's inputs, as the node reads them at the end of a period.

        Joint position and velocity (9,), object position (3,) and quaternion xyzw (4,), goal
        (3,): what the node reads from /joint_states, /object_pose and /goal_pose at the end of a
        period, with the episode's observation noise on the joints. ``joints``, ``scene``
        false: none came this period (a scenario), the last ones stay.
        """
        raw = self.policy_step.raw
        if joints:
            read = self._late if self._late is not None else self._joints
            if self._late is None:
                self.physics.read_joints(read)
            position, velocity = read[0].copy(), read[1].copy()
            if self.perception is not None:
                position, velocity = self.perception.joints(position, velocity)
            noise = self.conditions_now.obs_noise
            if noise > 0:
                position += self.np_random.normal(0.0, noise, position.shape)
                velocity += self.np_random.normal(0.0, 10.0 * noise, velocity.shape)
            raw.joint_position[:], raw.joint_velocity[:] = position, velocity
            self._measured_at = self._steps
        if scene:
            obj_pos, obj_quat = self.true_object_pose()
            if self.perception is not None:
                obj_pos, obj_quat = self.perception.object(obj_pos, obj_quat)
            raw.object_position[:], raw.object_quaternion[:] = obj_pos, obj_quat[[1, 2, 3, 0]]
        raw.goal_position[:] = self.goal

    def true_object_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """The object's true pose, before any perception: position (3,) m, quat (4,) wxyz.

        In the base frame; the origin and the identity in a scene without an object.
        """
        index = self.physics.index
        if index.object_body < 0:
            return np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        return self.physics.body_pose(index.object_body)

    def flange_position(self) -> np.ndarray:
        """The flange position (3,) m in the base frame (true, without noise)."""
        return self.physics.body_pose(self.physics.index.flange_body)[0]

    def _tracked(self) -> np.ndarray:
        """What must reach the goal: the flange (3,) m, base frame, true."""
        return self.flange_position()

    def _info(self, fault: bool, tracked: np.ndarray | None = None) -> dict[str, Any]:
        """The period's info; ``tracked``: :meth:`_tracked`'s position when already read."""
        tracked = self._tracked() if tracked is None else tracked
        distance = float(np.linalg.norm(tracked - self.goal))
        state = self.policy_step.state
        command = np.append(state.target, state.gripper) if state is not None else None
        stop = self.physics.stop
        return {'distance': distance,
                'is_success': stop is None and distance < self.success_radius,
                'command': command, 'fault': fault, 'goal': self.goal.copy(),
                'conditions': self.conditions_now, 'mode': self.supervisor.mode.value,
                'protective_stop': '' if stop is None else stop.message()}
