"""The learned sensor model in the actuator law: what the arm's torque sensors read (no rclpy).

``fit --mode torque --actuator-model`` exports a TorchScript model with a card
(:mod:`simops_sysid.actuator_export`), and the fitted SimParams names it (``actuator_model:``
path and sha256, checked by :func:`simops_core.sim_params.load_sim_params`). Its role is
*sensor*: from the history of the parametric effort (what
:meth:`~simops_sim.physics.Physics.read_joints` reports without a model: ``qfrc_actuator``
plus the torque-sensor bias, N*m), the joint velocities (rad/s) and accelerations (rad/s^2),
it says what the arm's torque sensors read (N*m). The motion stays the rigid body's and the
controller's: with a model or without, every state is the same bit for bit; only the arm's
reported effort differs.

The actuator law (:mod:`simops_sim.actuator_law`) runs it, the one place it runs: each row
of :class:`~simops_sim.actuator_law.ArmLaws` keeps its input history (3, W, a), newest
sample first, at its model's rate. After every physics step the inputs at each sample time
the step passed are interpolated linearly between the step's start and end (exact when the
step divides the model's period, as at 1 kHz with a 1 kHz model), and pushed; once the
steps of a call are done (nothing reads the effort in between), :func:`sense` evaluates
every row that pushed, one forward pass per model for all of its rows (the batched envs of
the gate share one pass). A sample outside the range the model was trained on is counted per
row: there the model extrapolates.

Shapes: ``n`` rows, ``a`` arm joints, ``W`` the model's window in samples.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from simops_core.command_line import ConfigError
from simops_core.sim_params import ActuatorModelRef
from simops_core.torch_threads import run_torch_ops_on_this_thread

INPUTS = ('model_torque', 'velocity', 'acceleration')   # the card's inputs, in history order
ROLE = 'sensor'


class SensorModelError(ConfigError):
    """A named model cannot be used: its card is missing or does not match it (one line)."""


@dataclass(frozen=True, eq=False)
class SensorModel:
    """A loaded model: the TorchScript module and what its card says.

    ``window`` W samples at ``period`` s; ``low`` and ``high`` (3, a): the range of each
    input per joint in training; ``sha256`` of the ``.pt``. A linear model (card ``kind:
    linear``) is applied from its own parameters, ``taps`` (3, W, a) and ``bias`` (a,), the
    module's buffers: the same computation as its ``forward`` (``tests/sim/
    test_sensor_model.py`` holds them within 1e-12 N*m), at a quarter of TorchScript's call time,
    which the simulator pays every 1 ms. Rows that share one :class:`SensorModel` share
    its evaluations.
    """

    path: Path
    sha256: str
    window: int
    period: float
    low: np.ndarray
    high: np.ndarray
    module: object   # torch.jit.ScriptModule: (B, 3, W, a) float64 -> (B, a) N*m
    taps: np.ndarray | None = None
    bias: np.ndarray | None = None

    def __call__(self, history: np.ndarray) -> np.ndarray:
        """Sensor torque (B, a) N*m for input histories (B, 3, W, a), newest lag first."""
        if self.taps is not None:
            out = np.einsum('bkwa,kwa->ba', history, self.taps)
            out += self.bias
            return out
        return self.forward(history)

    def forward(self, history: np.ndarray) -> np.ndarray:
        """The TorchScript module's own forward pass over ``history`` (B, 3, W, a).

        On the calling thread alone (the simulator's physics thread runs it SCHED_FIFO:
        :mod:`simops_core.torch_threads`).
        """
        import torch

        run_torch_ops_on_this_thread()
        with torch.inference_mode():
            return self.module(torch.from_numpy(np.ascontiguousarray(history))).numpy()


def load_sensor_model(ref: ActuatorModelRef, joints: int) -> SensorModel:
    """The model ``ref`` names (its path resolved and its bytes checked by the SimParams).

    Loaded once per path and sha256, so every arm and env of a process shares it. Raises
    :class:`SensorModelError` (one line) when the card is missing, is not a sensor model's,
    names another file's sha256 or another number of joints than ``joints``.
    """
    model = _load(str(ref.path), ref.sha256)
    if model.low.shape[1] != joints:
        raise SensorModelError(f'{model.path}: the actuator model is for '
                               f'{model.low.shape[1]} joints, this arm has {joints}')
    return model


@functools.lru_cache(maxsize=8)
def _load(path: str, sha256: str) -> SensorModel:
    script = Path(path)
    card_file = script.with_suffix('.yaml')
    try:
        card = yaml.safe_load(card_file.read_text())
        window, period = int(card['window']), float(card['period_s'])
        seen = card['training_range']
        low = np.array([seen[name]['min'] for name in INPUTS], float)
        high = np.array([seen[name]['max'] for name in INPUTS], float)
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise SensorModelError(f'{card_file}: cannot read the actuator model\'s card '
                               f'({type(exc).__name__}: {exc}); refit the model') from None
    if card.get('role') != ROLE or card.get('sha256') != sha256:
        raise SensorModelError(f'{card_file}: the card is not that of a sensor model with '
                               f'sha256 {sha256[:12]}...: refit the model')
    if window < 1 or not period > 0 or low.shape != high.shape or low.ndim != 2:
        raise SensorModelError(f'{card_file}: window {window}, period {period} s and the '
                               'training range do not describe a model: refit it')
    import torch

    with warnings.catch_warnings():   # TorchScript is deprecated upstream; as the policies
        warnings.simplefilter('ignore', DeprecationWarning)
        module = torch.jit.load(str(script), map_location='cpu').eval()
    taps = bias = None
    if card.get('kind') == 'linear':
        taps = module.taps.numpy().copy()
        bias = module.bias.numpy().copy()
        if taps.shape != (len(INPUTS), window, low.shape[1]):
            raise SensorModelError(f'{card_file}: the model\'s taps {tuple(taps.shape)} do not '
                                   f'match its card\'s window {window}: refit it')
    return SensorModel(script, sha256, window, period, low, high, module, taps, bias)


def groups(models: list[SensorModel | None], rows: np.ndarray
           ) -> list[tuple[SensorModel, np.ndarray]]:
    """``rows`` (indices) grouped by their model, in first-seen order: (model, its rows)."""
    by_model: dict[int, tuple[SensorModel, list[int]]] = {}
    for i in rows:
        model = models[int(i)]
        by_model.setdefault(id(model), (model, []))[1].append(int(i))
    return [(model, np.array(members)) for model, members in by_model.values()]


def sense(grouped: list[tuple[SensorModel, np.ndarray]], history: np.ndarray,
          out: np.ndarray) -> None:
    """Evaluate the rows of ``grouped`` (:func:`groups`) into ``out`` (n, a).

    One evaluation per model. ``history`` (n, 3, W_max, a): each row's inputs, newest
    first; a row reads its model's first W lags.
    """
    for model, members in grouped:
        if len(members) == len(out) and model.window == history.shape[2]:
            out[:] = model(history)   # every row: no gather
        else:
            out[members] = model(history[members, :, :model.window])
