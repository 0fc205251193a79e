"""A pipeline file: one task's loop as code, checked field by field (no rclpy).

``pipelines/<robot>_<task>.yaml`` says what ``simops-pipeline run`` does with the existing
commands, in order: calibrate (``fit`` on the bags, or a given SimParams), train
(``simops-train`` in that physics), gate (``simops-validate`` against it) and promote
(``simops-promote``)::

    version: 1
    robot: fr3                     # config/robot/<robot>.yaml
    task: reach                    # simops_core.tasks
    calibration:                   # optional; none: the model's nominal physics
      bags: [recordings/excite]    # fitted with fit's defaults, or
      holdout: []                  #   evaluated only
      sim_params: null             # a SimParams file instead of bags
      actuator_model: none         # with bags: also learn what the torque sensors read
                                   #   (linear or mlp), which the validation sim reports
      fit: {weights: recording}    # fit's options: weights, grouped_iters, full_iters
    sims:                          # optional: the profiles of config/sim_profiles.yaml
      training: training           #   simops-train's simulator
      validation: validation       #   the gate's
      gap: false                   #   also gate in the training sim: the sim-to-sim gap
      sensors: false               #   the gate reads through the validation profile's
                                   #   sensor errors (simops-validate --sensors)
    policy: null                   # optional: a trained policy (.pt, its card beside it)
                                   #   to gate instead of training one
    train: {seed: 0, goals: 4000, updates: 20000, eval_episodes: 60, workers: 2}
                                   #   (pick_place: rounds, episodes, ppo_iterations, and
                                   #   in_flight: true for simops-train --in-flight)
    randomization: {delay: 3}      # optional: the training ranges, over the task's in
                                   #   config/randomization.yaml
    datasets:                      # optional, pick_place: recorded episodes fed back into
      paths: [demos/lerobot]       #   training: LeRobot datasets (simops-dataset export),
      bags: [recordings/demos]     #   and/or rosbag2 episodes (a bag, or a folder of bags)
                                   #   that the export stage turns into one
      expert_rounds: 3             #   co-train: DAgger rounds with the grasp expert in the
                                   #   training sim (0: the datasets alone)
      share: 0.1                   #   with expert rounds: the datasets' share of the batches
      twist_at_cap: exact          #   simops-train --twist-at-cap
      init_policy: null            #   a policy (.pt) to fine-tune instead of a new network
    gate:
      grid: {friction: [0.3, 0.8, 1.5], mass: [0.5, 1, 1.5], delay: [0, 1, 2, 3]}
      scenarios: [push_arm, estop] #   adversarial scenarios of config/scenarios.yaml: a
                                   #   cell each at the calibrated physics
      episodes: 30
      seed: 0
      thresholds: {pass_mean: 0.85, pass_min: 0.6, marginal_mean: 0.7}
      workers: 2
    feedback:                      # optional: the improve stage after a FAIL or MARGINAL
      max_rounds: 3                #   retrain and gate again at most this often
      change: [randomization]      #   what it may change: the training ranges, widened to
                                   #   the failing cells (the gate's dr_suggestion.yaml);
                                   #   scenarios: train through the failing ones;
                                   #   reward (pick_place with train.ppo_iterations):
                                   #   PPO's reward pays for the failure modes seen
    promote: true                  # a PASS appends the policy's promotion record

With ``datasets``, the train stage is ``simops-train --dataset ...`` (and the improve stage's
retraining too, from its last policy): a changed dataset re-runs training and everything
after it.

Relative paths are relative to the file. Every error is one line naming the file and the
field (:class:`PipelineError`, exit 2).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from simops_core.bag_reader import METADATA_FILE
from simops_core.command_line import ConfigError, UsageError
from simops_core.paths import resolve_resource
from simops_core.policy_card import CardError, load_policy_card
from simops_core.robot_spec import load_robot_spec
from simops_core.tasks import DEFAULT_TASK, TASK_NAMES, TASKS
from simops_core.yaml_fields import Fields
from simops_learning.training_options import FINE_TUNED_TASK, TrainingAsked, refusal
from simops_sim.randomization import (
    RandomizationError,
    default_randomization,
    parse_randomization,
)
from simops_sim.sim_profiles import TRAINING, VALIDATION, load_sim_profiles
from simops_sysid.fit_weights import WEIGHTS

PIPELINE_VERSION = 1
TOP_LEVEL = ('version', 'robot', 'task', 'calibration', 'sims', 'policy', 'train',
             'randomization', 'datasets', 'gate', 'feedback', 'promote')
SIMS_FIELDS = ('training', 'validation', 'gap', 'sensors')
CALIBRATION_FIELDS = ('bags', 'holdout', 'sim_params', 'actuator_model', 'fit')
FIT_FIELDS = ('weights', 'grouped_iters', 'full_iters')   # fit's options a pipeline may set
ACTUATOR_MODELS = ('none', 'linear', 'mlp')   # fit --actuator-model's kinds
# simops-train's options a pipeline may set (counts; pick_place's rounds and episodes, PPO),
# and its one flag (pick_place: an in-flight policy)
TRAIN_FIELDS = ('seed', 'goals', 'updates', 'eval_episodes', 'rounds', 'episodes',
                'ppo_iterations', 'workers', 'in_flight')
DATASETS_FIELDS = ('paths', 'bags', 'expert_rounds', 'share', 'twist_at_cap', 'init_policy')
GATE_FIELDS = ('grid', 'scenarios', 'episodes', 'seed', 'thresholds', 'workers')
THRESHOLD_FIELDS = ('pass_mean', 'pass_min', 'marginal_mean')
FEEDBACK_FIELDS = ('max_rounds', 'change')
# what the improve stage may change between rounds: the training ranges; the events the
# training plays (the gate's failing scenarios); penalty terms in PPO's reward
CHANGES = ('randomization', 'scenarios', 'reward')
DEFAULT_CHANGE = ('randomization',)


class PipelineError(ConfigError):
    """A pipeline file is missing or malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Datasets:
    """Recorded episodes the training clones (``simops-train --dataset``); paths absolute.

    ``paths``: LeRobot datasets; ``bags``: the folders given for rosbag2 episodes and
    ``episodes`` the bags they hold, exported in the schema of ``card`` (the policy card to
    refine, else the shipped one of the robot and task). ``expert_rounds``: DAgger rounds
    with the grasp expert in the training sim next to them (0: the datasets alone);
    ``share``: with rounds, the datasets' share of the batches (the expert-labelled states'
    is the rest); ``init_policy``: a policy to fine-tune.
    """

    paths: tuple[Path, ...]
    bags: tuple[Path, ...] = ()
    episodes: tuple[Path, ...] = ()
    card: Path | None = None
    expert_rounds: int = 3
    share: float = 0.1
    twist_at_cap: str = 'exact'
    init_policy: Path | None = None


@dataclass(frozen=True)
class Pipeline:
    """A checked pipeline file; paths absolute. See the module docstring."""

    path: Path
    robot: str
    task: str
    bags: tuple[Path, ...] = ()
    holdout: tuple[Path, ...] = ()
    sim_params: Path | None = None
    train: dict[str, int] = field(default_factory=dict)
    grid: tuple[str, ...] = ()
    episodes: int = 30
    gate_seed: int = 0
    thresholds: dict[str, float] = field(default_factory=dict)
    gate_workers: int = 2
    promote: bool = True
    training_sim: str = TRAINING
    validation_sim: str = VALIDATION
    sim_gap: bool = False
    actuator_model: str = 'none'   # learned from the bags for the validation sim's sensors
    randomization: dict[str, Any] = field(default_factory=dict)   # the complete ranges
    max_rounds: int = 0            # improve rounds after a FAIL or MARGINAL (0: no stage)
    change: tuple[str, ...] = DEFAULT_CHANGE
    sensors: bool = False          # the gate reads through its profile's sensor errors
    policy: Path | None = None     # a trained policy to gate instead of training one
    fit: dict[str, Any] = field(default_factory=dict)   # fit's options (FIT_FIELDS)
    scenarios: tuple[str, ...] = ()   # the gate's adversarial scenarios (config/scenarios.yaml)
    datasets: Datasets | None = None   # recorded episodes the training clones
    in_flight: bool = False        # pick_place: train an in-flight policy (--in-flight)

    @property
    def name(self) -> str:
        """The pipeline's name: its file's stem."""
        return self.path.stem


def load_pipeline(path: str | Path, robots: tuple[str, ...]) -> Pipeline:
    """Read and check the pipeline file at ``path``; ``robots``: the robot specs there are."""
    path = Path(path).resolve()
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise PipelineError(f'pipeline file {path} does not exist') from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        message = str(exc).replace('\n', ' ')
        raise PipelineError(f'{path}: cannot parse the pipeline: {message}') from None
    check = Fields(str(path), PipelineError)
    root = check.mapping(raw, '')
    check.known(root, TOP_LEVEL, '')
    if root.get('version') != PIPELINE_VERSION or isinstance(root.get('version'), bool):
        check.fail('version', f'must be {PIPELINE_VERSION}, got {root.get("version")!r}')
    robot = check.choice(root, 'robot', robots)
    task = check.choice(root, 'task', TASK_NAMES)
    calibration = check.mapping(root.get('calibration') or {}, 'calibration')
    check.known(calibration, CALIBRATION_FIELDS, 'calibration')
    bags = _paths(check, path, calibration, 'bags')
    holdout = _paths(check, path, calibration, 'holdout')
    sim_params = calibration.get('sim_params')
    if sim_params is not None:
        if not isinstance(sim_params, str) or not sim_params:
            check.fail('calibration.sim_params', f'must be a file path, got {sim_params!r}')
        if bags:
            check.fail('calibration', 'gives both bags and sim_params; choose one')
        sim_params = _existing(check, path.parent / sim_params, 'calibration.sim_params')
    if holdout and not bags:
        check.fail('calibration.holdout', 'needs bags to fit')
    actuator_model = (check.choice(calibration, 'actuator_model', ACTUATOR_MODELS,
                                   'calibration.actuator_model')
                      if 'actuator_model' in calibration else 'none')
    if actuator_model != 'none' and not bags:
        check.fail('calibration.actuator_model', 'is learned from bags; give calibration.bags')
    fit = _fit_options(check, calibration.get('fit'))
    if fit and not bags:
        check.fail('calibration.fit', 'sets fit\'s options; give calibration.bags to fit')
    sims = check.mapping(root.get('sims') or {}, 'sims')
    check.known(sims, SIMS_FIELDS, 'sims')
    profiles = tuple(load_sim_profiles())
    training_sim = check.choice(sims, 'training', profiles, 'sims.training') \
        if 'training' in sims else TRAINING
    validation_sim = check.choice(sims, 'validation', profiles, 'sims.validation') \
        if 'validation' in sims else VALIDATION
    sim_gap, sensors = sims.get('gap', False), sims.get('sensors', False)
    for key, value in (('gap', sim_gap), ('sensors', sensors)):
        if not isinstance(value, bool):
            check.fail(f'sims.{key}', f'must be true or false, got {value!r}')
    if sensors and load_sim_profiles()[validation_sim].sensors is None:
        check.fail('sims.sensors', f'the {validation_sim} profile names no sensors')
    policy = _policy(check, path, root.get('policy'), robot, task, 'policy')
    train = check.mapping(root.get('train') or {}, 'train')
    check.known(train, TRAIN_FIELDS, 'train')
    in_flight = train.get('in_flight', False)
    if not isinstance(in_flight, bool):
        check.fail('train.in_flight', f'must be true or false, got {in_flight!r}')
    counts = {key: _count(check, train, key, f'train.{key}', 0 if key in ('seed',
                                                                          'ppo_iterations')
                          else 1) for key in train if key != 'in_flight'}
    gate = check.mapping(root.get('gate') or {}, 'gate')
    check.known(gate, GATE_FIELDS, 'gate')
    axes = check.mapping(gate.get('grid') or {}, 'gate.grid')
    if not all(isinstance(v, list) and v for v in axes.values()):
        check.fail('gate.grid', f'maps each axis to a list of values, got {axes!r}')
    grid = [f'{name}={",".join(str(v) for v in values)}' for name, values in axes.items()]
    _check_grid(check, grid)
    scenarios = _scenarios(check, gate.get('scenarios', []), task)
    thresholds = check.mapping(gate.get('thresholds') or {}, 'gate.thresholds')
    check.known(thresholds, THRESHOLD_FIELDS, 'gate.thresholds')
    levels = {key: check.number(thresholds, key, f'gate.thresholds.{key}', 0.0)
              for key in thresholds}
    if any(v > 1.0 for v in levels.values()):
        check.fail('gate.thresholds', f'are success fractions within [0, 1], got {levels}')
    promote = root.get('promote', True)
    if not isinstance(promote, bool):
        check.fail('promote', f'must be true or false, got {promote!r}')
    feedback = check.mapping(root.get('feedback') or {}, 'feedback')
    check.known(feedback, FEEDBACK_FIELDS, 'feedback')
    change = feedback.get('change', list(DEFAULT_CHANGE))
    if not isinstance(change, list) or not change or any(c not in CHANGES for c in change):
        check.fail('feedback.change', f'lists what the loop may change, some of '
                                      f'{", ".join(CHANGES)}; got {change!r}')
    datasets = _datasets(check, path, root.get('datasets'), robot, task)
    if datasets is not None and policy is not None:
        check.fail('datasets', 'train a policy, and the file gives a trained one to gate '
                               '(policy); choose one')
    _check_trainings(check, task, counts, change, datasets is not None, in_flight)
    return Pipeline(
        path, robot, task, bags, holdout, sim_params, counts, tuple(grid),
        _count(check, gate, 'episodes', 'gate.episodes') if 'episodes' in gate else 30,
        _count(check, gate, 'seed', 'gate.seed', 0) if 'seed' in gate else 0, levels,
        _count(check, gate, 'workers', 'gate.workers') if 'workers' in gate else 2, promote,
        training_sim, validation_sim, sim_gap, actuator_model,
        _ranges(check, path, task, root.get('randomization')),
        _count(check, feedback, 'max_rounds', 'feedback.max_rounds', 0)
        if 'max_rounds' in feedback else 0, tuple(change), sensors, policy, fit, scenarios,
        datasets, in_flight)


def _datasets(check: Fields, path: Path, value: Any, robot: str, task: str
              ) -> Datasets | None:
    """``datasets``: LeRobot dataset folders and how the training mixes them (none: none)."""
    if value is None:
        return None
    table = check.mapping(value, 'datasets')
    check.known(table, DATASETS_FIELDS, 'datasets')
    if task != FINE_TUNED_TASK:
        check.fail('datasets', f'train the pick_place decision network (simops-train '
                               f'--dataset); this pipeline is {robot} {task}')
    folders = _folders(check, path, table, 'paths', 'LeRobot dataset folders')
    bags = _folders(check, path, table, 'bags', 'rosbag2 episodes or folders of them')
    if not folders and not bags:
        check.fail('datasets', 'names no data: give paths (LeRobot datasets) or bags')
    episodes = tuple(bag for folder in bags for bag in _episodes(check, folder))
    rounds = (_count(check, table, 'expert_rounds', 'datasets.expert_rounds', 0)
              if 'expert_rounds' in table else Datasets.expert_rounds)
    share = Datasets.share
    if 'share' in table:
        if not rounds:
            check.fail('datasets.share', 'splits the batches with the expert rounds; '
                                         'datasets.expert_rounds is 0')
        share = table['share']
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not (
                0.0 < share < 1.0):
            check.fail('datasets.share', f'must be a fraction between 0 and 1, got {share!r}')
    # imported here: the module imports torch, which only a datasets section needs
    from simops_learning.dataset_train import TWIST_AT_CAP

    twist = (check.choice(table, 'twist_at_cap', TWIST_AT_CAP, 'datasets.twist_at_cap')
             if 'twist_at_cap' in table else Datasets.twist_at_cap)
    init = _policy(check, path, table.get('init_policy'), robot, task, 'datasets.init_policy')
    card = None
    if bags:
        card = (init.with_suffix('.yaml') if init is not None
                else resolve_resource(f'models/policy/{robot}_{task}.yaml'))
        if not card.is_file():
            check.fail('datasets.bags', f'are exported in a policy card\'s schema, and there is '
                                        f'no shipped {robot} {task} card: give '
                                        f'datasets.init_policy')
    return Datasets(folders, bags, episodes, card, rounds, float(share), twist, init)


def _folders(check: Fields, path: Path, table: dict[str, Any], key: str, what: str
             ) -> tuple[Path, ...]:
    """``datasets.<key>``: a list of existing folders (absent: none)."""
    values = table.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        check.fail(f'datasets.{key}', f'must be a list of {what}, got {values!r}')
    return tuple(_existing(check, path.parent / v, f'datasets.{key}') for v in values)


def _episodes(check: Fields, folder: Path) -> tuple[Path, ...]:
    """The rosbag2 recordings ``folder`` is (itself) or holds (its bag subfolders, sorted)."""
    if (folder / METADATA_FILE).is_file():
        return (folder,)
    held = tuple(sorted(p for p in folder.iterdir() if (p / METADATA_FILE).is_file())
                 ) if folder.is_dir() else ()
    if not held:
        check.fail('datasets.bags', f'names {folder}, which neither is a rosbag2 recording nor '
                                    f'holds one ({METADATA_FILE})')
    return held


def _check_trainings(check: Fields, task: str, train: dict[str, int], change: list[str],
                     datasets: bool, in_flight: bool) -> None:
    """The loop's trainings as simops-train judges them (:mod:`~simops_learning.training_options`).

    The train stage's (``train``'s options, the datasets), and the improve stage's with each
    change ``change`` lets it make: ``scenarios`` plays the failing ones (``--scenarios``),
    ``reward`` adds PPO's penalties (``--reward-terms``).
    """
    asked = TrainingAsked(task, dataset=datasets, rounds='rounds' in train,
                          ppo_iterations=train.get('ppo_iterations', 0), in_flight=in_flight)
    problem = refusal(asked)
    if problem:
        check.fail('train', f'asks simops-train for what it refuses: {problem}')
    for name in change:
        problem = refusal(replace(asked, scenarios=name == 'scenarios',
                                  reward_terms=name == 'reward'))
        if problem:
            check.fail('feedback.change', f'lists {name}, and simops-train refuses the '
                                          f'improve stage\'s training with it: {problem}')


def _scenarios(check: Fields, value: Any, task: str) -> tuple[str, ...]:
    """``gate.scenarios``: names of config/scenarios.yaml that apply to ``task``."""
    from simops_sim.scenarios import ScenarioError, scenario

    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        check.fail('gate.scenarios', f'lists scenario names, got {value!r}')
    for name in value:
        try:
            scenario(name, task)
        except ScenarioError as exc:
            check.fail('gate.scenarios', str(exc))
    if len(set(value)) != len(value):
        check.fail('gate.scenarios', f'names a scenario twice: {value!r}')
    return tuple(value)


def _fit_options(check: Fields, value: Any) -> dict[str, Any]:
    """``calibration.fit``: fit's ``--weights``, ``--grouped-iters`` and ``--full-iters``."""
    table = check.mapping(value or {}, 'calibration.fit')
    check.known(table, FIT_FIELDS, 'calibration.fit')
    options: dict[str, Any] = {}
    if 'weights' in table:
        options['weights'] = check.choice(table, 'weights', WEIGHTS, 'calibration.fit.weights')
    for key, minimum in (('grouped_iters', 0), ('full_iters', 1)):
        if key in table:
            options[key] = _count(check, table, key, f'calibration.fit.{key}', minimum)
    return options


def _policy(check: Fields, path: Path, value: Any, robot: str, task: str, where: str
            ) -> Path | None:
    """A trained policy's model file, its card (``.yaml``) beside it, or None.

    The card must name the pipeline's robot and task; ``where``: the field.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.endswith('.pt'):
        check.fail(where, f'must be a TorchScript policy file (.pt), got {value!r}')
    model = _existing(check, path.parent / value, where)
    card_path = model.with_suffix('.yaml')
    if not card_path.is_file():
        check.fail(where, f'names {model}, whose card {card_path.name} is not beside it')
    try:
        raw = yaml.safe_load(card_path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raw = None
    named = raw.get('robot') if isinstance(raw, dict) else None
    if named is not None and named != robot:   # before its joints are checked against ours
        check.fail(where, f'names a {named} policy; this pipeline is {robot} {task}')
    spec = load_robot_spec(robot)
    try:
        card = load_policy_card(card_path, spec.joint_names, spec.arm_joints)
    except CardError as exc:
        check.fail(where, f'names {model}, whose card is not usable: {exc}')
    if (card.task or DEFAULT_TASK) != task:
        check.fail(where, f'names a {card.robot} {card.task or DEFAULT_TASK} policy; this '
                          f'pipeline is {robot} {task}')
    return model


def _ranges(check: Fields, path: Path, task: str, overrides: Any) -> dict[str, Any]:
    """The task's training ranges (config/randomization.yaml) with the file's overrides."""
    table = check.mapping(overrides or {}, 'randomization')
    ranges = {name: list(value) if isinstance(value, tuple) else value for name, value in
              asdict(default_randomization(TASKS[task].randomization)).items()}
    try:
        parse_randomization({**ranges, **table}, str(path), complete=True)
    except RandomizationError as exc:
        raise PipelineError(str(exc)) from None
    return {**ranges, **table}


def _paths(check: Fields, path: Path, table: dict[str, Any], key: str) -> tuple[Path, ...]:
    values = table.get(key) or []
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        check.fail(f'calibration.{key}', f'must be a list of bag folders, got {values!r}')
    return tuple(_existing(check, path.parent / v, f'calibration.{key}') for v in values)


def _existing(check: Fields, path: Path, where: str) -> Path:
    if not path.exists():
        check.fail(where, f'names {path}, which does not exist')
    return path.resolve()


def _count(check: Fields, table: dict[str, Any], key: str, where: str, minimum: int = 1
           ) -> int:
    value = table[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        check.fail(where, f'must be a whole number >= {minimum}, got {value!r}')
    return value


def _check_grid(check: Fields, grid: list[str]) -> None:
    """The gate's grid as simops-validate reads it (its own parser, one line per error)."""
    from simops_learning.validate import parse_grid

    try:
        parse_grid(grid)
    except UsageError as exc:
        check.fail('gate.grid', str(exc))
