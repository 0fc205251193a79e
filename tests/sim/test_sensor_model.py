"""The learned sensor model in the actuator law (simops_sim.sensor_model).

The model is the artifact ``fit --actuator-model`` exports (TorchScript and its card), named
by a SimParams file. The oracle for what the simulator reports is the fit's own prediction
(``LinearActuator.predict``) over the parametric efforts, velocities and accelerations
recorded from a run without the model: the simulator must run the fitted filter on the same
history, sample for sample. The motion is the same bit for bit with the model or without,
and the batched path (``step_together``, the gate's) equals each arm stepped alone.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from ros_helpers import REPO, RosProbe, wait_until
from sim_helpers import command_publisher, qos, settled, start_sim, subscribe_states, topic
from std_msgs.msg import Float64MultiArray

from simops_core.robot_spec import load_robot_spec
from simops_core.sim_params import PayloadParams, SimParams, SimParamsError, load_sim_params
from simops_sim.physics import Physics
from simops_sim.physics_batch import step_together
from simops_sim.randomization import Conditions
from simops_sim.sensor_model import SensorModelError, load_sensor_model
from simops_sim.trajectory_plan import TrajectoryPlan, point_goal
from simops_sysid.actuator_export import export_actuator_model
from simops_sysid.actuator_fit import ActuatorPart, LinearActuator
from simops_sysid.actuator_mlp import MlpActuator, MlpSensorModel

SPEC = load_robot_spec('fr3')
SCENE = REPO / 'models/fr3/scene.xml'
PERIOD = 0.001     # s: the model's rate, the validation sim's step
WINDOW = 20        # samples
WIDE = {'min': [-1e3] * 7, 'max': [1e3] * 7}


def lag_weights(seed: int = 0) -> np.ndarray:
    """(7, 3 W + 1): a first-order lag of the model torque per joint, a small velocity and
    acceleration term and an offset (different per joint)."""
    rng = np.random.default_rng(seed)
    weights = np.zeros((7, 3 * WINDOW + 1))
    for j in range(7):
        alpha = rng.uniform(0.05, 0.3)
        taps = alpha * (1 - alpha) ** np.arange(WINDOW)
        weights[j, :WINDOW] = taps / taps.sum()
        weights[j, WINDOW:2 * WINDOW] = rng.normal(0.0, 0.01, WINDOW)
        weights[j, 2 * WINDOW:3 * WINDOW] = rng.normal(0.0, 1e-4, WINDOW)
        weights[j, -1] = rng.normal(0.0, 0.1)
    return weights


def identity_weights() -> np.ndarray:
    """(7, 3 W + 1): the newest model torque, as it is."""
    weights = np.zeros((7, 3 * WINDOW + 1))
    weights[:, 0] = 1.0
    return weights


def write_model(folder: Path, weights: np.ndarray, seen: dict | None = None,
                torque_bias: float = 0.0) -> Path:
    """A SimParams file naming an exported model with ``weights``; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    model = LinearActuator(WINDOW, PERIOD, weights)
    ranges = seen or {name: WIDE for name in ('model_torque', 'velocity', 'acceleration')}
    ref = export_actuator_model(model, folder / 'fit', SPEC.arm_joints,
                                {'robot': 'fr3', 'training_range': ranges})
    joints = {name: {'frictionloss': 0.4, 'friction_transition': 0.05,
                     'torque_offset': torque_bias} for name in SPEC.arm_joints}
    path = folder / 'fit.yaml'
    path.write_text(yaml.safe_dump({
        'version': 1, 'command_delay': 0.002, 'joints': joints,
        'actuator_model': {'path': ref.path, 'sha256': ref.sha256}}))
    return path


def arm(params: SimParams, timestep: float = PERIOD) -> Physics:
    model = mujoco.MjModel.from_xml_path(str(SCENE))
    model.opt.timestep = timestep
    physics = Physics(model, SPEC, params=params, reflexes=True)
    physics.reset_keyframe('home')
    return physics


def without_model(params: SimParams) -> SimParams:
    return SimParams(joints=params.joints, command_delay=params.command_delay)


def drive(physics: Physics, period: int) -> None:
    """A different point goal every 50 ms: fast enough to excite the filter."""
    target = physics.arm_target + 0.05 * np.sin(0.7 * period) * np.linspace(0.3, 1.0, 7)
    physics.follow(TrajectoryPlan(point_goal(target, 0.05), physics.time, physics.arm_target))


def run(physics: Physics, periods: int = 30, steps: int = 50) -> dict[str, np.ndarray]:
    """Drive and record, after every physics step: states, reported efforts and the
    parametric inputs as the data holds them."""
    dofs = physics.index.dof_adr[:7]
    out: dict[str, list[np.ndarray]] = {key: [] for key in
                                        ('qpos', 'qvel', 'effort', 'torque', 'acc')}
    joints = np.empty((3, 9))
    for period in range(periods):
        drive(physics, period)
        for _ in range(steps):
            physics.step(1)
            physics.read_joints(joints)
            data = physics.data
            out['qpos'].append(data.qpos.copy())
            out['qvel'].append(data.qvel.copy())
            out['effort'].append(joints[2].copy())
            out['torque'].append(data.qfrc_actuator[dofs] + physics._bias[1, :7])
            out['acc'].append(data.qacc[dofs].copy())
    return {key: np.array(value) for key, value in out.items()}


def recorded_part(params: SimParams, off: dict[str, np.ndarray]) -> ActuatorPart:
    """The model's inputs over a run without it (``off``), preceded by the state it starts
    from: what the fit's prediction reads, sample for sample."""
    start = arm(without_model(params))
    dofs = start.index.dof_adr[:7]
    first = [start.data.qfrc_actuator[dofs] + start._bias[1, :7], start.data.qvel[dofs],
             start.data.qacc[dofs]]
    return ActuatorPart(np.vstack([first[0], off['torque']]),
                        np.vstack([first[1], off['qvel'][:, dofs]]),
                        np.vstack([first[2], off['acc']]), np.zeros((len(off['acc']) + 1, 7)))


def batched_against_alone(params: list[SimParams], periods: int) -> list[np.ndarray]:
    """Arms of ``params`` stepped together (the gate's path) and each alone, driven alike:
    the largest difference of what each pair reports, after every control period."""
    together, alone = [arm(p) for p in params], [arm(p) for p in params]
    joints = np.empty((2, 3, 9))
    out = []
    for period in range(periods):
        for k, (a, b) in enumerate(zip(together, alone, strict=True)):
            drive(a, period + k)
            drive(b, period + k)
        step_together(together, 50)
        for physics in alone:
            physics.step(50)
        for a, b in zip(together, alone, strict=True):
            a.read_joints(joints[0])
            b.read_joints(joints[1])
            assert np.array_equal(a.data.qpos, b.data.qpos)
            out.append(joints[0] - joints[1])
    return out


@pytest.fixture(scope='module')
def lagging(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    folder = tmp_path_factory.mktemp('lag')
    weights = lag_weights()
    return write_model(folder, weights, torque_bias=0.3), weights


def test_the_motion_is_the_same_bit_for_bit_and_the_effort_is_the_fitted_filter(
        lagging: tuple[Path, np.ndarray]) -> None:
    path, weights = lagging
    params = load_sim_params(path)
    on, off = run(arm(params)), run(arm(without_model(params)))
    for key in ('qpos', 'qvel', 'torque', 'acc'):
        assert np.array_equal(on[key], off[key]), key     # a sensor: the motion is untouched
    assert np.array_equal(off['effort'][:, :7], off['torque'])   # without: the parametric
    part = recorded_part(params, off)   # the fit's own prediction over the same inputs
    expected = LinearActuator(WINDOW, PERIOD, weights).predict(part)[1:]
    np.testing.assert_allclose(on['effort'][:, :7], expected, rtol=0, atol=1e-9)
    assert np.array_equal(on['effort'][:, 7:], off['effort'][:, 7:])   # the fingers: as before
    lag = np.sqrt(np.mean((on['effort'][:, :7] - off['effort'][:, :7]) ** 2))
    assert lag > 0.05, lag   # the filter does change what the sensors read


def test_the_identity_model_reports_the_parametric_effort_bit_for_bit(tmp_path: Path) -> None:
    """The model's input is the parametric effort of the step's end, bias included."""
    params = load_sim_params(write_model(tmp_path, identity_weights(), torque_bias=-0.2))
    on, off = run(arm(params), periods=6), run(arm(without_model(params)), periods=6)
    assert np.array_equal(on['effort'], off['effort'])


def test_a_coarser_step_samples_the_model_at_its_own_rate(tmp_path: Path) -> None:
    """At the training sim's 5 ms steps a 1 kHz model takes 5 samples a step, interpolated
    between the step's start and end; its newest is the step's end."""
    params = load_sim_params(write_model(tmp_path, identity_weights()))
    on, off = (run(arm(p, timestep=0.005), periods=6, steps=10)
               for p in (params, without_model(params)))
    assert np.array_equal(on['effort'], off['effort'])
    physics = arm(params, timestep=0.005)
    drive(physics, 0)
    before = physics.law.inputs[0].copy()
    physics.step(1)
    history = physics.law.history[0, :, :6]
    np.testing.assert_array_equal(history[:, 0], physics.law.inputs[0])
    for k in range(1, 5):   # 4/5, 3/5, ... of the way from the step's start
        fraction = (5 - k) / 5
        np.testing.assert_allclose(history[:, k], before + fraction * (history[:, 0] - before),
                                   rtol=0, atol=1e-9)
    np.testing.assert_array_equal(history[:, 5], before)


def test_the_batched_path_equals_each_arm_alone_with_the_model_on(
        lagging: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    """step_together (the gate's batched envs: one forward pass for all of them) against
    Physics.step: states and reported efforts bit for bit, one arm without a model."""
    params = load_sim_params(lagging[0])
    other = load_sim_params(write_model(tmp_path, lag_weights(seed=5)))

    differences = batched_against_alone([params, other, params, without_model(params)], 12)
    assert not np.any(differences)


def test_samples_beyond_the_training_range_are_counted(tmp_path: Path) -> None:
    narrow = {'model_torque': WIDE, 'acceleration': WIDE,
              'velocity': {'min': [-0.01] * 7, 'max': [0.01] * 7}}
    physics = arm(load_sim_params(write_model(tmp_path / 'narrow', lag_weights(), narrow)))
    run(physics, periods=4)
    assert physics.sensor_outside > 0
    wide = arm(load_sim_params(write_model(tmp_path / 'wide', lag_weights())))
    run(wide, periods=4)
    assert wide.sensor_outside == 0


def test_a_model_whose_card_does_not_match_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write_model(tmp_path, lag_weights())
    card = tmp_path / 'fit.actuator.yaml'
    body = yaml.safe_load(card.read_text())
    card.write_text(yaml.safe_dump({**body, 'sha256': '0' * 64}))
    with pytest.raises(SensorModelError, match='not that of a sensor model') as refused:
        arm(load_sim_params(path))
    assert len(str(refused.value).splitlines()) == 1
    (tmp_path / 'fit.actuator.pt').write_bytes(b'tampered')   # the model itself
    with pytest.raises(SimParamsError, match=r"'actuator_model\.sha256'"):
        load_sim_params(path)


@pytest.mark.ros
def test_the_node_reports_extrapolation_on_diagnostics(ros_probe: RosProbe,
                                                       tmp_path: Path) -> None:
    """The simulator node with a model trained on slow motion: a move warns on /diagnostics,
    with the count of samples beyond its range."""
    narrow = {'model_torque': WIDE, 'acceleration': WIDE,
              'velocity': {'min': [-0.05] * 7, 'max': [0.05] * 7}}
    path = write_model(tmp_path, lag_weights(), narrow)
    subscribe_states(ros_probe)
    ros_probe.subscribe(topic('diagnostics').name, DiagnosticArray, qos('diagnostics'))

    def reports() -> list[DiagnosticStatus]:
        return [msg.status[0] for msg in ros_probe.messages(topic('diagnostics').name)]

    def values(report: DiagnosticStatus) -> dict[str, str]:
        return {kv.key: kv.value for kv in report.values}

    with start_sim(tmp_path, f'sim_params_file:={path}'):
        home = settled(ros_probe)
        assert wait_until(lambda: reports(), 10)
        assert values(reports()[-1])['sensor_model_outside'] == '0'
        commands = command_publisher(ros_probe)
        target = home.copy()
        for _ in range(20):   # 0.5 rad/s on joint 1 for a second
            target[0] += 0.025
            commands.publish(Float64MultiArray(data=target.tolist()))
            time.sleep(0.05)

        def warned() -> list[DiagnosticStatus]:
            return [r for r in reports() if 'extrapolates' in r.message]

        assert wait_until(warned, 5), [r.message for r in reports()]
        assert warned()[0].level == DiagnosticStatus.WARN
        assert int(values(warned()[0])['sensor_model_outside']) > 0


def test_the_linear_path_is_the_torchscript_forward(lagging: tuple[Path, np.ndarray]) -> None:
    """The simulator applies a linear model from its buffers: the module's own arithmetic."""
    model = load_sensor_model(load_sim_params(lagging[0]).actuator_model, 7)
    history = np.random.default_rng(3).normal(0.0, 5.0, (16, 3, WINDOW, 7))
    assert model.taps is not None
    np.testing.assert_allclose(model(history), model.forward(history), rtol=0, atol=1e-12)


def test_randomised_physics_keeps_the_model(lagging: tuple[Path, np.ndarray]) -> None:
    """Conditions drawn around a base change its factors, not its sensor model or payload."""
    base = replace(load_sim_params(lagging[0]), payload=PayloadParams(mass=0.5, com_z=0.05))
    drawn = Conditions(friction=1.3, mass=0.8, delay=2).sim_params(
        base, SPEC.arm_joints, (), 0.05)
    assert drawn.actuator_model == base.actuator_model and drawn.payload == base.payload
    assert drawn.command_delay == pytest.approx(0.002 + 2 * 0.05)


def test_an_mlp_model_runs_through_its_torchscript_forward(tmp_path: Path) -> None:
    """``fit --actuator-model mlp``'s kind: the simulator runs the module itself; its efforts
    are the fit's prediction over the same inputs, the batched path each arm's alone."""
    linear = LinearActuator(WINDOW, PERIOD, lag_weights(seed=2))
    module = MlpSensorModel(linear, np.zeros((3, WINDOW, 7)), np.full((3, WINDOW, 7), 20.0))
    with torch.no_grad():
        module.w2.normal_(0.0, 0.3, generator=torch.Generator().manual_seed(1))
    mlp = MlpActuator(WINDOW, PERIOD, module.eval(), 0, 0.0, 0.0)
    ranges = {name: WIDE for name in ('model_torque', 'velocity', 'acceleration')}
    ref = export_actuator_model(mlp, tmp_path / 'fit', SPEC.arm_joints,
                                {'robot': 'fr3', 'training_range': ranges})
    path = tmp_path / 'fit.yaml'
    path.write_text(yaml.safe_dump({'version': 1, 'actuator_model': {
        'path': ref.path, 'sha256': ref.sha256}}))
    params = load_sim_params(path)
    assert load_sensor_model(params.actuator_model, 7).taps is None   # no linear shortcut
    on, off = run(arm(params), periods=8), run(arm(without_model(params)), periods=8)
    assert np.array_equal(on['qpos'], off['qpos'])
    expected = mlp.predict(recorded_part(params, off))[1:]
    np.testing.assert_allclose(on['effort'][:, :7], expected, rtol=0, atol=1e-9)
    linear_only = linear.predict(recorded_part(params, off))[1:]
    assert np.abs(expected - linear_only).max() > 0.01   # the network acts
    differences = batched_against_alone([params] * 3, 6)
    assert np.abs(differences).max() == 0.0, np.abs(differences).max()
