"""The README is a guide: short, complete about the modules, free of issue numbers; docs exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / 'README.md').read_text()
ISSUE = re.compile(r'(?<![\w/.-])#\d+\b')   # "#19", not "ros2_control#2318" or "#L12"


def module_map() -> str:
    return README.split('## Module map', 1)[1].split('```', 2)[1]


def test_the_readme_is_at_most_400_lines() -> None:
    assert len(README.splitlines()) <= 400


def test_no_issue_numbers_in_user_docs() -> None:
    for path in [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]:
        found = ISSUE.findall(path.read_text())
        assert not found, (path.name, found)


def test_the_module_map_names_every_module() -> None:
    text = module_map()
    listed = set(re.findall(r'^ {2,4}(\w+)\s', text, re.MULTILINE))
    missing = []
    for path in sorted(REPO.glob('src/simops_*/simops_*/**/*.py')):
        if path.name == '__init__.py':
            continue
        name = 'demo/' if path.parent.name == 'demo' else path.stem
        if name == 'demo/':
            if 'demo/' not in text:
                missing.append(str(path))
        elif name not in listed:
            missing.append(str(path.relative_to(REPO)))
    assert missing == []


def test_every_document_the_readme_names_exists() -> None:
    for name in set(re.findall(r'`(docs/[\w.]+\.md)`', README)):
        assert (REPO / name).is_file(), name
    assert {p.name for p in (REPO / 'docs').glob('*.md')} <= set(
        re.findall(r'`docs/([\w.]+\.md)`', README))
