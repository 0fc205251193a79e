"""One parameter schema per node: the docs table, the env defaults and ``ros2 param set``."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from ros_helpers import REPO, RosProbe, wait_until
from sim_helpers import start_sim, topic

from simops_core import parameter_schema
from simops_core.parameter_schema import (
    NODES,
    SchemaError,
    defaults,
    load_parameter_schema,
    with_tables,
)
from simops_core.policy_step import StepSettings


def test_docs_tables_are_the_schemas() -> None:
    text = (REPO / 'docs' / 'interfaces.md').read_text()
    assert with_tables(text) == text, 'run `make docs` to regenerate docs/interfaces.md'


def test_a_changed_schema_changes_the_table(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO / 'docs' / 'interfaces.md').read_text()
    (tmp_path / 'config' / 'parameters').mkdir(parents=True)
    for node in NODES:
        source = (REPO / 'config' / 'parameters' / f'{node}.yaml').read_text()
        if node == 'policy':
            source = source.replace('default_value: 0.5\n', 'default_value: 0.4\n', 1)
        (tmp_path / 'config' / 'parameters' / f'{node}.yaml').write_text(source)
    monkeypatch.chdir(tmp_path)
    regenerated = with_tables(text)
    assert regenerated != text
    assert '| `velocity_scale` | double | `0.4` |' in regenerated


def test_env_step_settings_default_to_the_policy_schema() -> None:
    schema = defaults(load_parameter_schema('policy'))
    assert asdict(StepSettings()) == {name: schema[name] for name in asdict(StepSettings())}


@pytest.mark.parametrize(('entry', 'field'), [
    ('x: {type: float, default_value: 1.0, description: d}', "'x.type'"),
    ('x: {type: double, description: d}', "'x.default_value'"),
    ('x: {type: double, default_value: yes, description: d}', "'x.default_value'"),
    ('x: {type: double, default_value: 5.0, range: [0.0, 1.0], description: d}',
     "'x.default_value'"),
    ('x: {type: string, default_value: a, choices: [b, c], description: d}',
     "'x.default_value'"),
    ('x: {type: int, default_value: 1, range: [2], description: d}', "'x.range'"),
    ('x: {type: int, default_value: 1}', "'x.description'"),
    ('x: {type: int, default_value: 1, description: d, live: true}', "'x.live'"),
])
def test_a_malformed_schema_names_the_field(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            entry: str, field: str) -> None:
    (tmp_path / 'config' / 'parameters').mkdir(parents=True)
    (tmp_path / 'config' / 'parameters' / 'bad.yaml').write_text(entry + '\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SchemaError, match=field):
        parameter_schema.load_parameter_schema('bad')


def set_parameter(probe: RosProbe, node: str, name: str, value: ParameterValue
                  ) -> tuple[bool, str]:
    """What ``ros2 param set`` does: one SetParameters call; (successful, reason)."""
    client = probe.node.create_client(SetParameters, f'/{node}/set_parameters')
    assert client.wait_for_service(timeout_sec=10.0)
    request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=value)])
    future = client.call_async(request)
    assert wait_until(future.done, 10.0)
    result = future.result().results[0]
    probe.node.destroy_client(client)
    return result.successful, result.reason


def double(value: float) -> ParameterValue:
    return ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)


def test_param_set_refuses_read_only_and_applies_live_parameters(tmp_path: Path,
                                                                  ros_probe: RosProbe) -> None:
    diagnostics = topic('diagnostics').name
    ros_probe.subscribe(diagnostics, DiagnosticArray)

    def latest() -> dict[str, str]:
        msgs = ros_probe.messages(diagnostics)
        return {kv.key: kv.value for kv in msgs[-1].status[0].values} if msgs else {}

    with start_sim(tmp_path, 'realtime_factor:=1.0') as node:
        assert wait_until(lambda: latest().get('target_realtime_factor') == '1', 20), node.output
        ok, reason = set_parameter(ros_probe, 'sim', 'model', ParameterValue(
            type=ParameterType.PARAMETER_STRING, string_value='models/other.xml'))
        assert not ok and 'read-only' in reason.lower(), reason
        ok, reason = set_parameter(ros_probe, 'sim', 'realtime_factor', double(5000.0))
        assert not ok, 'a value outside the range was accepted'
        ok, reason = set_parameter(ros_probe, 'sim', 'realtime_factor', double(2.0))
        assert ok, reason
        assert wait_until(lambda: latest().get('target_realtime_factor') == '2', 5)
        time.sleep(2.2)   # two whole diagnostics windows at the new pace
        achieved = float(latest()['realtime_factor'])
        assert 1.8 < achieved < 2.2, achieved
        assert 'realtime_factor set to 2.0' in node.output
        assert node.stop() == 0, node.output


SCHEMA_OF = {'sim': 'sim', 'policy': 'policy', 'record': 'recorder', 'excite': 'excite',
             'arm_setup': 'arm_setup'}


@pytest.mark.parametrize(('profile', 'values'), [
    ('sim', {'record': 'true'}), ('real_robot', {'standin': 'true', 'excite': 'true'})])
def test_the_graph_sets_only_schema_parameters(profile: str, values: dict[str, str]) -> None:
    from simops_bringup.graph import build_graph

    for node in build_graph(profile, values):
        names = {p.name for p in load_parameter_schema(SCHEMA_OF[node.executable])}
        unknown = {key for key, _ in node.parameters} - names - {'use_sim_time'}
        assert not unknown, f'{node.name}: {unknown}'
