"""``import --format agui`` on the wrong file prints one line, not one per record."""

from __future__ import annotations

import json
from pathlib import Path

GOOD = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]


def test_a_file_of_another_format_fails_with_one_line(cli, tmp_path: Path, memory_url) -> None:
    path = tmp_path / "tau.json"
    records = [{"traj": [{"role": "user", "content": str(i)}]} for i in range(200)]
    path.write_text(json.dumps(records), encoding="utf-8")
    result = cli("import", str(path), "--format", "agui", "--url", memory_url)
    line = cli.one_line_error(
        result, "holds no AG-UI events", "200 items skipped", "first: event 0", "--format"
    )
    assert "event 1:" not in line
    assert result.exit_code == 2


def test_stray_items_among_events_are_one_warning(cli, tmp_path: Path, memory_url) -> None:
    path = tmp_path / "mixed.jsonl"
    items = [*GOOD[:2], {"no": "type"}, 5, *GOOD[2:], "junk"]
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    result = cli("import", str(path), "--format", "agui", "--url", memory_url)
    assert result.exit_code == 0, result.output
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("threadkeep: warning: ")
    assert "3 items skipped" in warnings[0]
    assert "first: event 2" in warnings[0]
    assert "1 chats (1 new" in result.stdout
