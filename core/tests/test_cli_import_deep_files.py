"""``threadkeep import`` of files nested deeper than Python's JSON parser can recurse.

A hostile or broken file of 100,000 nested arrays made ``json.loads`` raise
``RecursionError``, which the CLI reported as an unexpected error ("this is a bug", exit
status 1) for ``--format openai`` and ``--format agui``. It is a malformed input file: one
``threadkeep: error:`` line naming the file, exit status 2, nothing written. In a ``data:``
SSE stream an undecodable block is skipped with a warning, as any other block that does not
parse (docs/cli.md), and the rest of the stream is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH
GOOD_LINE = '{"messages": [{"role": "user", "content": "hi"}]}'
EVENT_LINE = '{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}'

SHAPES = {
    "document.json": DEEP,
    "lines.jsonl": f"{GOOD_LINE}\n{DEEP}\n",
    "events.jsonl": f"{EVENT_LINE}\n{DEEP}\n",
}


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("fmt", ["openai", "agui", "auto"])
def test_a_too_deep_file_is_a_one_line_usage_error(cli, tmp_path: Path, sqlite_url, name, fmt):
    path = tmp_path / name
    path.write_text(SHAPES[name], encoding="utf-8")
    result = cli("import", str(path), "--format", fmt, "--url", sqlite_url)
    line = cli.one_line_error(result, name)
    assert result.exit_code == 2, line
    assert "unexpected" not in line, line
    assert "RecursionError" not in line, line
    counts = cli.json("stats", "--json", "--url", sqlite_url)
    assert (counts["chats"], counts["messages"]) == (0, 0)


@pytest.mark.parametrize("fmt", ["agui", "auto"])
def test_a_too_deep_sse_block_is_skipped_with_a_warning(cli, tmp_path: Path, sqlite_url, fmt):
    path = tmp_path / "events.sse"
    text_event = '{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant"'
    events = [EVENT_LINE, text_event + ', "delta": "kept"}', DEEP]
    path.write_text("".join(f"data: {event}\n\n" for event in events), encoding="utf-8")
    result = cli("import", str(path), "--format", fmt, "--url", sqlite_url)
    assert result.exit_code == 0, result.output
    assert "nested too deep" in result.stderr
    assert "RecursionError" not in result.output
    counts = cli.json("stats", "--json", "--url", sqlite_url)
    assert (counts["chats"], counts["messages"]) == (1, 1)


def test_an_sse_block_that_does_not_parse_is_counted_in_a_warning(cli, tmp_path, sqlite_url):
    # Before, an SSE stream's undecodable data block was dropped without a word.
    path = tmp_path / "cut.sse"
    chunk = '{"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "delta": '
    events = [EVENT_LINE, chunk + '"lost', chunk + '"kept"}']
    path.write_text("".join(f"data: {event}\n\n" for event in events), encoding="utf-8")
    result = cli("import", str(path), "--format", "agui", "--url", sqlite_url)
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1, result.stderr
    assert "1 item skipped" in warning[0], warning
    assert "line 3: data is not JSON" in warning[0], warning
