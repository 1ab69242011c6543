"""Native and OpenAI records whose fields have the wrong JSON type are refused, not crashed on.

A field of an unexpected type (a ``type`` that is an object, a ``message`` that is
``true``, an ``input`` list that is a number, an OpenHands ``observation`` that is a list...)
made the converters raise ``TypeError`` or ``AttributeError``, which ``threadkeep import``
reported as an unexpected error ("this is a bug", exit status 1). Such a file is malformed
input: one ``threadkeep: error:`` line naming the file, exit status 2, nothing written, for
the format named and for ``--format auto``. The cases are the fixtures of this folder with
one field replaced, as a mutation fuzzer found them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

CASES = [
    ("claude-code", "claude-code/proj/s1.jsonl", (12, "type"), {}),
    ("claude-code", "claude-code/proj/s1.jsonl", (11, "type"), [None]),
    ("claude-code", "claude-code/proj/s1.jsonl", (3, "message"), True),
    ("openai", "openai/responses.jsonl", (0, "input", 0, "role"), {}),
    ("openai", "openai/responses.jsonl", (1, "input", 0, "type"), [None]),
    ("openai", "openai/responses.jsonl", (0, "input"), True),
    ("openai", "openai/responses.jsonl", (0, "output", 0, "summary"), -1.5),
    ("openhands", "openhands/events.json", (1, "action"), {"x": [1]}),
    ("openhands", "openhands/events.json", (6, "observation"), [None]),
    (
        "openhands",
        "openhands/events.json",
        (3, "tool_call_metadata", "model_response", "choices"),
        True,
    ),
    (
        "swe-agent",
        "swe-agent/run1/inst-1/inst-1.traj",
        ("history", 4, "tool_calls", 0, "type"),
        [None],
    ),
    ("openhands", "openhands/events.json", (7, "args", "image_urls"), 5),
    ("openai", "openai/responses.jsonl", (0, "output", 0, "type"), []),
]


def _mutated(source: Path, path: tuple[Any, ...], value: Any, target: Path) -> None:
    text = source.read_text(encoding="utf-8")
    lines = source.suffix == ".jsonl"
    document: Any = (
        [json.loads(line) for line in text.splitlines() if line.strip()]
        if lines
        else json.loads(text)
    )
    node = document
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = copy.deepcopy(value)
    if lines:
        target.write_text("".join(json.dumps(item) + "\n" for item in document), encoding="utf-8")
    else:
        target.write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.parametrize("fmt_name", ["named", "auto"])
@pytest.mark.parametrize(("fmt", "fixture", "path", "value"), CASES)
def test_a_field_of_the_wrong_type_is_a_one_line_usage_error(
    cli, tmp_path: Path, memory_url: str, fmt, fixture, path, value, fmt_name
):
    source = FIXTURES / fixture
    target = tmp_path / source.name
    _mutated(source, path, value, target)
    chosen = fmt if fmt_name == "named" else "auto"
    result = cli("import", str(target), "--format", chosen, "--url", memory_url)
    line = cli.one_line_error(result, source.name)
    assert result.exit_code == 2, line
    assert "unexpected" not in line, line
    assert cli.json("stats", "--json", "--url", memory_url)["chats"] == 0


def test_two_events_with_one_id_are_refused_before_anything_is_written(
    cli, tmp_path: Path, memory_url: str
):
    # Before, the store's batch check refused the pair as an IdempotencyConflict after the
    # chat was created: "events.json was imported before with different content" on an
    # empty store, exit status 1, and an empty chat left behind.
    source = FIXTURES / "openhands" / "events.json"
    events = json.loads(source.read_text(encoding="utf-8"))
    events[-1]["id"] = events[-4]["id"]
    target = tmp_path / "events.json"
    target.write_text(json.dumps(events), encoding="utf-8")
    result = cli("import", str(target), "--format", "openhands", "--url", memory_url)
    line = cli.one_line_error(result, "events.json", f"'openhands:{events[-4]['id']}'")
    assert result.exit_code == 2, line
    assert "imported before" not in line, line
    assert cli.json("stats", "--json", "--url", memory_url)["chats"] == 0


def test_an_event_repeated_whole_still_imports(cli, tmp_path: Path, memory_url: str):
    source = FIXTURES / "openhands" / "events.json"
    events = json.loads(source.read_text(encoding="utf-8"))
    target = tmp_path / "events.json"
    target.write_text(json.dumps([*events, events[1]]), encoding="utf-8")
    once = tmp_path / "once" / "events.json"
    once.parent.mkdir()
    once.write_text(json.dumps(events), encoding="utf-8")
    assert cli("import", str(once), "--format", "openhands", "--url", memory_url).exit_code == 0
    expected = cli.json("stats", "--json", "--url", memory_url)
    other = f"{memory_url}-repeated"
    result = cli("import", str(target), "--format", "openhands", "--url", other)
    assert result.exit_code == 0, result.output
    assert cli.json("stats", "--json", "--url", other) == expected
