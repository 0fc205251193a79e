"""franka_hardware's error recovery, step by step, as a franka_ros2 release documents it.

After a reflex the arm holds and refuses commands. The steps and their order are the
release's (:attr:`simops_core.franka_ros2.FrankaRelease.recovery`, from
franka_hardware/doc/index.rst): on Humble (v2) deactivate the controllers, then call
``/action_server/error_recovery``, then ``set_hardware_component_state
FrankaHardwareInterface active``, then activate the controllers again; on Jazzy (v3) from
the second step; before v2 the action alone. :class:`FrankaRecovery` runs them over the
services a real arm's ``ros2_control_node`` and franka_hardware serve, and the simulator
serves the same, so one procedure works on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from action_msgs.msg import GoalStatus
from controller_manager_msgs.srv import SetHardwareComponentState, SwitchController
from franka_msgs.action import ErrorRecovery
from lifecycle_msgs.msg import State

from simops_core.franka_ros2 import (
    ACTION_SERVER,
    ARM_CONTROLLER,
    CONTROLLER_MANAGER,
    HARDWARE_COMPONENT,
    FrankaRelease,
)
from simops_ros.background import BackgroundNode

POLL = 0.01   # s between looks at a pending answer
# s without an answer to the recovery goal before it goes again: a server can answer before
# its writer has matched this client's reader (DDS discovery is not symmetric), and that
# answer is lost for good; the recovery is idempotent, so a second goal is safe
RESEND = 2.0


class RecoveryError(Exception):
    """A step was refused; the message names the step and why."""


class NoAnswerError(RecoveryError):
    """A server did not answer a step in time."""


class FrankaRecovery:
    """The recovery of ``release`` for the arm in ``namespace``, from ``probe``'s node.

    ``controllers`` are the ones to deactivate and re-activate (the arm's JTC by default).
    """

    def __init__(self, probe: BackgroundNode, release: FrankaRelease, namespace: str = '',
                 controllers: Sequence[str] = (ARM_CONTROLLER,)) -> None:
        prefix = '/' + namespace.strip('/') if namespace.strip('/') else ''
        self.release, self.controllers = release, list(controllers)
        self._action_name = f'{prefix}/{ACTION_SERVER}/error_recovery'
        self._action = probe.action_client(ErrorRecovery, self._action_name)
        manager = f'{prefix}/{CONTROLLER_MANAGER}'
        with probe.paused():
            self._switch = probe.node.create_client(SwitchController,
                                                    f'{manager}/switch_controller')
            self._hardware = probe.node.create_client(
                SetHardwareComponentState, f'{manager}/set_hardware_component_state')

    def __call__(self, timeout: float = 10.0,
                 progress: Callable[[str], None] = lambda step: None) -> None:
        """Run every step in order, each within ``timeout`` s; raise :class:`RecoveryError`."""
        for step in self.release.recovery:
            progress(step)
            {'deactivate_controllers': lambda t: self._switch_to(False, t),
             'error_recovery': self._clear_error,
             'activate_hardware': self._activate_hardware,
             'activate_controllers': lambda t: self._switch_to(True, t)}[step](timeout)

    def _clear_error(self, timeout: float) -> None:
        if not self._action.wait_for_server(timeout_sec=timeout):
            raise NoAnswerError(f'error_recovery: no action server {self._action_name} '
                                f'within {timeout:g} s')
        deadline = time.monotonic() + timeout
        while True:
            goal = self._action.send_goal_async(ErrorRecovery.Goal())
            resend = min(deadline, time.monotonic() + RESEND)
            while not goal.done() and time.monotonic() < resend:
                time.sleep(POLL)
            if goal.done():
                break
            if time.monotonic() >= deadline:
                raise NoAnswerError(f'error_recovery: no answer within {timeout:g} s')
        result = _answer(goal.result().get_result_async(), timeout, 'error_recovery')
        if result.status == GoalStatus.STATUS_ABORTED:   # libfranka's recovery threw
            raise RecoveryError('error_recovery: the arm refused it (is its user stop still '
                                'pressed? release it and try again)')
        if result.status != GoalStatus.STATUS_SUCCEEDED:
            raise RecoveryError(f'error_recovery: the action ended with status {result.status}')

    def _activate_hardware(self, timeout: float) -> None:
        request = SetHardwareComponentState.Request(
            name=HARDWARE_COMPONENT,
            target_state=State(id=State.PRIMARY_STATE_ACTIVE, label='active'))
        response = _call(self._hardware, request, timeout, 'activate_hardware')
        if not response.ok:
            raise RecoveryError(f'activate_hardware: {HARDWARE_COMPONENT} stayed '
                                f'{response.state.label} (see the controller manager\'s log)')

    def _switch_to(self, active: bool, timeout: float) -> None:
        step = 'activate_controllers' if active else 'deactivate_controllers'
        request = SwitchController.Request(strictness=SwitchController.Request.STRICT)
        if active:
            request.activate_controllers = self.controllers
        else:
            request.deactivate_controllers = self.controllers
        response = _call(self._switch, request, timeout, step)
        if not response.ok:
            raise RecoveryError(f'{step}: {response.message}')


def _call(client: Any, request: Any, timeout: float, step: str) -> Any:
    if not client.wait_for_service(timeout_sec=timeout):
        raise NoAnswerError(f'{step}: no service {client.srv_name} within {timeout:g} s')
    return _answer(client.call_async(request), timeout, step)


def _answer(future: Any, timeout: float, step: str) -> Any:
    deadline = time.monotonic() + timeout
    while not future.done():
        if time.monotonic() > deadline:
            raise NoAnswerError(f'{step}: no answer within {timeout:g} s')
        time.sleep(POLL)
    return future.result()
