"""The safety pipeline between a policy's action and the arm: pure functions over numpy.

Every control step maps (state, raw action, measured position) to the next joint target:

1. a non-finite action or measured position holds the last target and reports a fault;
2. the action is clipped to ``±clip``;
3. scaled to a joint delta (rad per step) and added to the reference (the measured position
   or the last target), then blended from the ramp anchor while ramping in;
4. low-pass filtered (first order);
5. rate limited: the step is bounded by the velocity limit and, when set, by the
   acceleration limit, including the braking distance to each position limit, and by the
   arm's position-based velocity limits at the new target (:class:`PositionBased`);
6. clamped into the position limits minus the margin, after a final clip to one velocity
   step around the previous target.

Invariants, for every target this module ever returns (steps, holds and ramps), with joint
arrays in the robot spec's arm order, shape (7,), rad:

- I1 ``lower <= target <= upper`` (the spec's limits minus the margin);
- I2 ``|target - previous target| <= max_step`` (velocity limit × scale × period).

Stage 6 guarantees both: the previous target lies in the box, the clip to its ``max_step``
neighbourhood keeps I2, and projecting onto the box moves no point further from a point
inside the box, so I2 survives the clamp. Holds repeat the previous target. The first
target (:func:`start`) is the measured position projected into the box; :func:`start`
refuses a measured position more than one step outside it. With an acceleration limit, the
step also changes by at most ``max_step_change`` between consecutive non-hold targets: the
braking bound keeps every target able to stop before the box edge, so the clamp never cuts
a step (holds stop at once, by design).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from simops_core.command_line import ConfigError
from simops_core.robot_spec import RobotSpec


class SafetyConfigError(ConfigError):
    """Safety limits or settings that cannot be met (e.g. a margin wider than the range)."""

    hint = 'change the parameter'


class OutsideLimitsError(ValueError):
    """The measured position is too far outside the limits to start from it in one step."""


@dataclass(frozen=True)
class PositionBased:
    """The arm's position-based velocity limits as a bound on each step (arrays (7,)).

    The arm refuses a velocity towards a position limit above ``-offset + sqrt(2 a d)`` at a
    distance ``d`` from it (:func:`simops_core.robot_spec.velocity_bounds`, with its
    deceleration). The pipeline bounds each step ``s`` (one ``period`` s) so that its
    velocity ``s / period`` stays under that at the new target, with ``deceleration`` ``a``
    no higher than the arm's nor than the (scaled) acceleration limit, so a target riding
    the bound slows within the acceleration limit. ``lower``/``upper`` rad are the spec's
    own position limits (no margin), ``offset`` rad/s, ``deceleration`` rad/s².
    """

    lower: np.ndarray
    upper: np.ndarray
    offset: np.ndarray
    deceleration: np.ndarray
    period: float
    # what steps() computes from the fields alone, once (the same arithmetic): offset + a T,
    # (offset + a T)^2 - offset^2 and 2 a
    _head: np.ndarray = field(init=False, repr=False, compare=False)
    _base: np.ndarray = field(init=False, repr=False, compare=False)
    _twice: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head = self.offset + self.deceleration * self.period
        object.__setattr__(self, '_head', head)
        object.__setattr__(self, '_base', head**2 - self.offset**2)
        object.__setattr__(self, '_twice', 2.0 * self.deceleration)

    def steps(self, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The largest steps (rad) up and down (both >= 0) from ``target`` (7,) rad.

        The largest ``u = s / T`` with ``u + offset <= sqrt(2 a (d - u T))``:
        ``u = -(offset + a T) + sqrt((offset + a T)^2 - offset^2 + 2 a d)``, 0 when negative.
        """
        return self._largest(self.upper - target), self._largest(target - self.lower)

    def _largest(self, distance: np.ndarray) -> np.ndarray:
        """The largest step (rad, >= 0) towards a limit ``distance`` (7,) rad away."""
        root = np.sqrt(self._base + self._twice * np.maximum(distance, 0.0))
        return np.maximum(root - self._head, 0.0) * self.period


@dataclass(frozen=True)
class SafetyLimits:
    """Per-step limits in spec arm order; arrays have shape (7,).

    ``lower``/``upper`` rad (spec limits minus margin), ``max_step`` rad per step,
    ``max_step_change`` rad per step² (None: no acceleration limit); gripper widths in m and
    ``gripper_max_step`` m per step; ``position_based`` the arm's position-based velocity
    limits, or None where the spec has none.
    """

    lower: np.ndarray
    upper: np.ndarray
    max_step: np.ndarray
    max_step_change: np.ndarray | None
    gripper_min: float
    gripper_max: float
    gripper_max_step: float
    position_based: PositionBased | None = None

    @classmethod
    def from_spec(cls, spec: RobotSpec, period: float, velocity_scale: float, margin: float,
                  limit_acceleration: bool = True) -> SafetyLimits:
        """Limits for a control ``period`` (s), a fraction of the velocity limit, a margin (rad).

        The acceleration limit is scaled like the velocity limit.
        """
        if not period > 0:
            raise SafetyConfigError(f'control period must be > 0 s, got {period}')
        if not 0 < velocity_scale <= 1:
            raise SafetyConfigError(f'velocity_scale must be in (0, 1], got {velocity_scale}')
        lower = spec.position_lower + margin
        upper = spec.position_upper - margin
        if margin < 0 or np.any(lower >= upper):
            raise SafetyConfigError(f'joint_limit_margin {margin} rad must be >= 0 and leave '
                                    'room between every pair of position limits')
        change = spec.acceleration * velocity_scale * period**2 if limit_acceleration else None
        position_based = None
        if spec.velocity_offset is not None and spec.deceleration is not None:
            decel = (np.minimum(spec.deceleration, spec.acceleration * velocity_scale)
                     if limit_acceleration else spec.deceleration)
            position_based = PositionBased(spec.position_lower, spec.position_upper,
                                           spec.velocity_offset, decel, period)
        return cls(lower=lower, upper=upper, max_step=spec.velocity * velocity_scale * period,
                   max_step_change=change, gripper_min=spec.gripper.width_min,
                   gripper_max=spec.gripper.width_max,
                   gripper_max_step=spec.gripper.speed_max * period,
                   position_based=position_based)


@dataclass(frozen=True)
class ActionMapping:
    """How an action vector becomes targets.

    ``arm_index`` (7,): action index of each spec arm joint; ``gripper_index`` the action
    index of the gripper command (-1 closed … +1 open) or None; ``clip`` bound on |action|;
    ``scale`` rad per step per unit action; ``reference`` ``measured`` or ``last_command``;
    ``lpf_alpha`` in (0, 1], 1 = no filtering (see :func:`lowpass_alpha`).
    """

    arm_index: np.ndarray
    gripper_index: int | None
    clip: float
    scale: float
    reference: str
    lpf_alpha: float

    @classmethod
    def target_steps(cls, joints: int, gripper: bool = False) -> ActionMapping:
        """Actions that are the target's own change (rad per step, ``joints`` arm joints).

        Unscaled, unfiltered, from the last target: how ``excite`` and ``teleop`` hand the
        pipeline the step they want; with ``gripper``, then the gripper command (entry
        ``joints``, see :func:`width_command`).
        """
        return cls(arm_index=np.arange(joints), gripper_index=joints if gripper else None,
                   clip=float(2 * np.pi), scale=1.0, reference='last_command', lpf_alpha=1.0)


@dataclass(frozen=True)
class SafetyState:
    """What the pipeline remembers between steps (arrays (7,), rad; widths m).

    ``target`` is the last returned target (inside the limits), ``step`` its change from the
    one before (rad per step), ``filtered`` the low-pass filter's state, ``anchor`` and
    ``gripper_anchor`` where a ramp blends in from.
    """

    target: np.ndarray
    step: np.ndarray
    filtered: np.ndarray
    anchor: np.ndarray
    gripper: float
    gripper_anchor: float


@dataclass(frozen=True)
class SafetyOutput:
    """One step's result.

    ``state.target`` is the command, ``action`` the clipped action (zeros on a fault; the
    observation's ``last_action``), ``fault`` whether the step held on non-finite input.
    """

    state: SafetyState
    action: np.ndarray
    fault: bool


def lowpass_alpha(cutoff_hz: float, rate_hz: float) -> float:
    """Smoothing factor of a first-order low-pass filter sampled at ``rate_hz``."""
    if not cutoff_hz > 0 or not rate_hz > 0:
        raise SafetyConfigError(f'low-pass cutoff {cutoff_hz} Hz and rate {rate_hz} Hz must be '
                                '> 0')
    return float(1.0 - np.exp(-2.0 * np.pi * cutoff_hz / rate_hz))


def start(measured: np.ndarray, measured_width: float, limits: SafetyLimits) -> SafetyState:
    """The state whose target is ``measured`` (7,) projected into the limits.

    Raises :class:`OutsideLimitsError` if that moves a joint more than one ``max_step``
    (the message names the joint index) and ValueError for a non-finite position.
    """
    if not np.all(np.isfinite(measured)) or not np.isfinite(measured_width):
        raise ValueError('measured position is not finite')
    target = np.clip(measured, limits.lower, limits.upper)
    jump = np.abs(target - measured) - limits.max_step
    if np.any(jump > 0):
        joint = int(np.argmax(jump))
        raise OutsideLimitsError(
            f'joint {joint} is {abs(target[joint] - measured[joint]):.3f} rad outside its '
            f'limits minus margin, more than one step ({limits.max_step[joint]:.3f} rad)')
    width = float(np.clip(measured_width, limits.gripper_min, limits.gripper_max))
    return SafetyState(target=target, step=np.zeros_like(target), filtered=target.copy(),
                       anchor=target.copy(), gripper=width, gripper_anchor=width)


def hold(state: SafetyState) -> SafetyState:
    """Stay at the last target: zero step, filter and ramp anchor reset to the target."""
    return replace(state, step=np.zeros_like(state.step), filtered=state.target.copy(),
                   anchor=state.target.copy(), gripper_anchor=state.gripper)


def brake(state: SafetyState, limits: SafetyLimits) -> tuple[SafetyState, bool]:
    """One target of a braking stop, and whether the arm is now at rest.

    Each joint's step shrinks towards zero by at most ``max_step_change`` per step (at once
    without an acceleration limit), so the target comes to rest within the acceleration
    limit; the step's braking bound keeps it inside the position limits (I1, I2 hold).
    """
    if limits.max_step_change is None:
        return hold(state), True
    speed = np.maximum(np.abs(state.step) - limits.max_step_change, 0.0)
    moved = state.target + np.sign(state.step) * speed
    target = _guard(moved, state.target, limits.max_step, limits.lower, limits.upper)
    rest = not np.any(speed > 0)
    new_state = replace(state, target=target, step=target - state.target,
                        filtered=target.copy(), anchor=target.copy(),
                        gripper_anchor=state.gripper)
    return new_state, rest


def step(state: SafetyState, action: np.ndarray, measured: np.ndarray, blend: float,
         limits: SafetyLimits, mapping: ActionMapping) -> SafetyOutput:
    """Run the pipeline once; see the module docstring. ``blend`` in [0, 1] ramps in."""
    if not (np.isfinite(action).all() and np.isfinite(measured).all()):
        return SafetyOutput(hold(state), np.zeros_like(action, dtype=float), fault=True)
    clipped = np.minimum(np.maximum(action.astype(float), -mapping.clip), mapping.clip)
    reference = measured if mapping.reference == 'measured' else state.target
    candidate = reference + clipped[mapping.arm_index] * mapping.scale
    blend = min(max(blend, 0.0), 1.0)
    candidate = state.anchor + blend * (candidate - state.anchor)
    filtered = state.filtered + mapping.lpf_alpha * (candidate - state.filtered)
    if not np.isfinite(filtered).all():
        filtered = np.where(np.isfinite(filtered), filtered, state.target)  # overflow: stay

    wanted = filtered - state.target
    low, high = -limits.max_step, limits.max_step
    if limits.max_step_change is not None:
        change = limits.max_step_change
        low = np.maximum(low, state.step - change)
        high = np.minimum(high, state.step + change)
        # Largest step s that can still stop before the edge: s + s²/(2·change) <= distance.
        room_up = np.maximum(limits.upper - state.target, 0.0)
        room_down = np.maximum(state.target - limits.lower, 0.0)
        high = np.minimum(high, change * (np.sqrt(1.0 + 2.0 * room_up / change) - 1.0))
        low = np.maximum(low, -change * (np.sqrt(1.0 + 2.0 * room_down / change) - 1.0))
    if limits.position_based is not None:
        up, down = limits.position_based.steps(state.target)
        high, low = np.minimum(high, up), np.maximum(low, -down)
    moved = state.target + np.minimum(np.maximum(wanted, low), high)
    target = _guard(moved, state.target, limits.max_step, limits.lower, limits.upper)

    gripper = state.gripper
    if mapping.gripper_index is not None:
        command = min(max(float(clipped[mapping.gripper_index]), -1.0), 1.0)
        wanted_width = limits.gripper_min + (command + 1.0) / 2.0 * (
            limits.gripper_max - limits.gripper_min)
        wanted_width = state.gripper_anchor + blend * (wanted_width - state.gripper_anchor)
        gripper = _guard_width(wanted_width, state.gripper, limits)
    new_state = SafetyState(target=target, step=target - state.target, filtered=filtered,
                            anchor=state.anchor, gripper=gripper,
                            gripper_anchor=state.gripper_anchor)
    return SafetyOutput(new_state, clipped, fault=False)


def width_command(width: float, limits: SafetyLimits) -> float:
    """The gripper command (-1 closed … +1 open) that asks :func:`step` for ``width`` (m)."""
    span = limits.gripper_max - limits.gripper_min
    return 2.0 * (width - limits.gripper_min) / span - 1.0


def _guard(wanted: np.ndarray, previous: np.ndarray, max_step: np.ndarray, lower: np.ndarray,
           upper: np.ndarray) -> np.ndarray:
    """Stage 6: within ``max_step`` of ``previous`` (inside the box), then inside the box."""
    wanted = np.where(np.isnan(wanted), previous, wanted)
    near = np.minimum(np.maximum(wanted, previous - max_step), previous + max_step)
    return np.minimum(np.maximum(near, lower), upper)


def _guard_width(wanted: float, previous: float, limits: SafetyLimits) -> float:
    """:func:`_guard` of a gripper width (m): one ``gripper_max_step`` from ``previous``."""
    if wanted != wanted:   # NaN
        wanted = previous
    near = min(max(wanted, previous - limits.gripper_max_step),
               previous + limits.gripper_max_step)
    return min(max(near, limits.gripper_min), limits.gripper_max)
