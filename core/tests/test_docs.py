"""The user docs stay true to the code: every exported name and command is documented."""

from __future__ import annotations

import re
from pathlib import Path

import threadkeep
from threadkeep.cli import app

DOCS = Path(__file__).resolve().parents[2] / "docs"


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def test_the_public_api_table_names_every_export():
    table = section((DOCS / "index.md").read_text(encoding="utf-8"), "## The public API")
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", table))
    assert set(threadkeep.__all__) <= named, sorted(set(threadkeep.__all__) - named)


def test_every_command_has_a_section_in_cli_md():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    commands = {command.name for command in app.registered_commands}
    for name in commands:
        assert re.search(rf"^## .*`threadkeep {name}\b", text, re.MULTILINE), name
    assert "| 130 |" in text
    assert "THREADKEEP_DEBUG" in text


def test_user_docs_link_nowhere_outside_the_repository():
    for page in [*DOCS.glob("*.md"), DOCS.parent / "README.md"]:
        for target in re.findall(r"\]\(([^)#]+)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (page.parent / target).resolve().exists(), (page.name, target)
