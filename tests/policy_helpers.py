"""Small policies and their cards, made inside the tests (no checked-in weights), and probe
helpers for watching a running policy node.

:func:`write_policy` saves a constant policy: a linear layer with zero weights whose bias is
the action. Its input size is still enforced, so a card that disagrees with the model fails
the node's dry inference.
"""

from __future__ import annotations

import copy
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from rclpy.qos import DurabilityPolicy, QoSProfile
from ros_helpers import NodeProcess, RosProbe, wait_until
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from simops_core.policy_card import file_sha256
from simops_core.robot_spec import load_robot_spec
from simops_core.topics import load_topics

SPEC = load_robot_spec('fr3')
ARM = list(SPEC.arm_joints)
TOPICS = load_topics()
COMMANDS = TOPICS['joint_commands'].name
STATE = TOPICS['policy_state'].name
# tests/procs/policy_fake_arm.py's /fake_arm/mute: latched, so a subscription matched after
# the publication still gets it (a lost mute left the fake arm publishing good states).
MUTE_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def card_dict(sha256: str = '0' * 64, history: int = 2, gripper: bool = True,
              reference: str = 'last_command', control_rate: float = 20.0,
              with_object: bool = True) -> dict[str, Any]:
    """A card that uses every observation source (the object terms only if ``with_object``)."""
    terms: list[dict[str, Any]] = [
        {'source': 'joint_position', 'fields': ARM, 'offset': [float(v) for v in SPEC.home]},
        {'source': 'joint_velocity', 'fields': ARM, 'scale': 0.1, 'clip': [-5.0, 5.0]},
        {'source': 'gripper_width', 'fields': ['width'], 'scale': 10.0},
        {'source': 'goal_position', 'fields': ['x', 'y', 'z']},
        {'source': 'last_action', 'fields': ARM + (['gripper'] if gripper else [])},
    ]
    if with_object:
        terms[3:3] = [{'source': 'object_position', 'fields': ['x', 'y', 'z']},
                      {'source': 'object_quaternion', 'fields': ['x', 'y', 'z', 'w']}]
    return {
        'version': 1, 'sha256': sha256, 'robot': 'fr3', 'control_rate': control_rate,
        'observation': {'history': history, 'history_order': 'oldest_first', 'terms': terms},
        'action': {'joints': ARM, 'gripper': gripper, 'clip': 1.0, 'scale': 0.05,
                   'reference': reference},
        'training': {'framework': 'torch', 'algorithm': 'test', 'seed': 0},
    }


def observation_size(card: dict[str, Any]) -> int:
    """Observation vector length a card dict describes."""
    obs = card['observation']
    return obs['history'] * sum(len(term['fields']) for term in obs['terms'])


def write_policy(directory: Path, action: list[float], fmt: str = 'pt',
                 model_inputs: int | None = None, **card_kwargs: Any) -> tuple[Path, Path]:
    """Save a constant policy and its card (with the model's sha256); return both paths.

    ``model_inputs`` makes the model expect a different input size than the card describes.
    """
    import torch

    card = card_dict(**card_kwargs)
    size = observation_size(card) if model_inputs is None else model_inputs
    layer = torch.nn.Linear(size, len(action))
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.copy_(torch.tensor(action))
    model = directory / f'policy.{fmt}'
    if fmt == 'pt':
        with warnings.catch_warnings():  # TorchScript is deprecated; the node still loads it
            warnings.simplefilter('ignore', DeprecationWarning)
            torch.jit.script(layer).save(str(model))
    else:
        program = torch.export.export(layer, (torch.zeros(1, size),))
        torch.export.save(program, str(model))
    card_path = model.with_suffix('.yaml')
    write_card(card_path, card | {'sha256': file_sha256(model)})
    return model, card_path


def write_card(path: Path, card: dict[str, Any]) -> Path:
    """Write a card dict as YAML."""
    path.write_text(yaml.safe_dump(copy.deepcopy(card), sort_keys=False))
    return path


def qos(key: str) -> QoSProfile:
    """The QoS of a topic in config/topics.yaml."""
    return QoSProfile(**TOPICS[key].qos.as_profile_kwargs())


def watch(probe: RosProbe) -> None:
    """Subscribe to everything the node publishes and publish a goal (latched)."""
    probe.subscribe(COMMANDS, Float64MultiArray, 200)   # deep queue: count every command
    probe.subscribe(STATE, String, qos('policy_state'))
    probe.subscribe(TOPICS['policy_action'].name, Float64MultiArray, 200)
    probe.subscribe(TOPICS['diagnostics'].name, DiagnosticArray, 50)
    goal = PoseStamped()
    goal.header.frame_id = SPEC.base_frame
    goal.pose.position.x, goal.pose.position.z = 0.4, 0.3
    goal.pose.orientation.w = 1.0
    # The probe's node keeps the publisher, so the latched goal reaches late joiners too.
    probe.publisher(TOPICS['goal_pose'].name, PoseStamped, qos('goal_pose')).publish(goal)


def states(probe: RosProbe) -> list[str]:
    """Every /policy/state received so far."""
    return [m.data for m in probe.messages(STATE)]


def wait_state(probe: RosProbe, node: NodeProcess, state: str, timeout: float = 20.0) -> None:
    """Wait until the node's latest state is ``state``; fail with its output if not."""
    assert wait_until(lambda: states(probe)[-1:] == [state], timeout), (states(probe),
                                                                         node.output)


def targets(probe: RosProbe) -> np.ndarray:
    """Every /joint_commands received so far, shape (count, 7 or 8)."""
    return np.array([list(m.data) for m in probe.messages(COMMANDS)])


def diagnostics(probe: RosProbe) -> dict[str, str]:
    """The policy node's latest diagnostics values by key ({} before the first)."""
    for array in reversed(probe.messages(TOPICS['diagnostics'].name)):
        for status in array.status:
            if status.name.startswith('policy'):
                return {kv.key: kv.value for kv in status.values}
    return {}


RESEND = 5.0   # s without a response before call_enable looks at the node's state


def call_enable(probe: RosProbe, on: bool, node: str = '/policy',
                timeout: float = 10.0) -> SetBool.Response:
    """Call ``node``'s ~/enable service and return the response.

    A response can be lost: the server sends it before its writer has matched this
    client's response reader (DDS discovery is not symmetric; a CI run lost excite's). After
    :data:`RESEND` s without one, the node's latched ``~/state`` decides: the mode asked for
    already reached (the request took effect) answers success; else the request goes again.
    """
    client = probe.node.create_client(SetBool, f'{node}/enable')
    assert client.wait_for_service(timeout_sec=timeout), f'{node}/enable not available'
    state = f'{node}/state'
    if state not in probe.topics():
        probe.subscribe(state, String, QoSProfile(**TOPICS['policy_state'].qos.as_profile_kwargs()))
    deadline = time.monotonic() + timeout
    future = client.call_async(SetBool.Request(data=on))
    while not wait_until(future.done, max(0.1, min(RESEND, deadline - time.monotonic()))):
        modes = [m.data for m in probe.messages(state)]
        if modes and (modes[-1] != 'DISABLED') == on:
            return SetBool.Response(success=True, message=f'{node} is {modes[-1]} (the '
                                    'response was lost)')
        assert time.monotonic() < deadline, f'{node}/enable did not answer in {timeout} s'
        client.remove_pending_request(future)
        future = client.call_async(SetBool.Request(data=on))
    return future.result()


def call_reset(probe: RosProbe) -> None:
    """Call the simulator's /sim/reset and require success."""
    client = probe.node.create_client(Trigger, '/sim/reset')
    assert client.wait_for_service(timeout_sec=10)
    future = client.call_async(Trigger.Request())
    assert wait_until(future.done, 10) and future.result().success


def publish_goal(publisher: Any, goal: np.ndarray) -> None:
    """Publish ``goal`` (3,) m in the arm's base frame on ``publisher`` (a PoseStamped one)."""
    msg = PoseStamped()
    msg.header.frame_id = SPEC.base_frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in goal)
    msg.pose.orientation.w = 1.0
    publisher.publish(msg)


def first_contact(probe: RosProbe, tries: int = 5) -> None:
    """Enable the policy until it runs on a reset state, then disable it and wait until DISABLED.

    A lockstep simulator publishes a state only on a reset and on a step, so a reset state sent
    before its writer matched the policy's reader never reaches the policy: this resets again
    every 2 s until the policy runs. Call it once before a run's episodes (with a goal
    published), so that no episode resets on a deadline: a reset landing after the policy
    started would restart the arm mid-episode.
    """
    assert call_enable(probe, True).success
    running = wait_until(lambda: states(probe)[-1:] == ['RUNNING'], 2.0)
    for _ in range(tries):
        if running:
            break
        call_reset(probe)
        running = wait_until(lambda: states(probe)[-1:] == ['RUNNING'], 2.0)
    assert running, f'the policy never ran: {states(probe)}'
    assert call_enable(probe, False).success
    assert wait_until(lambda: states(probe)[-1:] == ['DISABLED'], 10), states(probe)
