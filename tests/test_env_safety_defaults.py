"""The env's StepSettings defaults are the policy node's documented parameter defaults."""

from __future__ import annotations

import re
from dataclasses import fields

from ros_helpers import REPO

from simops_core.policy_step import StepSettings


def test_safety_config_defaults_match_docs_interfaces() -> None:
    text = (REPO / 'docs' / 'interfaces.md').read_text()
    policy_table = text.split('## simops_policy')[1].split('\n## ')[0]
    documented = dict(re.findall(r'^\| `(\w+)` \| double \| ([0-9.]+) \|', policy_table,
                                 flags=re.MULTILINE))
    config = StepSettings()
    for field in fields(StepSettings):
        assert float(documented[field.name]) == getattr(config, field.name), field.name
