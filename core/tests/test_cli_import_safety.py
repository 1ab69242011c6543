"""``threadkeep import``: nothing written from a bad file, Ctrl-C says what is committed,
AG-UI directories and a truthful warning when a recording reuses an id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import threadkeep._importers._bulk as bulk_step
import threadkeep._importers._write as write_step

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}


def stats(cli, url: str) -> dict[str, int]:
    counts: dict[str, int] = cli.json("stats", "--json", "--url", url)
    return counts


def test_a_bad_record_in_the_middle_writes_nothing(cli, transcripts, sqlite_url):
    bad = {"messages": [{"role": "wizard", "content": "x"}]}
    path = transcripts.write("mid.json", [GOOD, GOOD, bad, GOOD])
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli.one_line_error(result, "mid.json: record 2, message 0", "'wizard'")
    assert result.exit_code == 2
    assert stats(cli, sqlite_url)["chats"] == 0


def test_a_bad_json_lines_record_is_named_by_its_line(cli, transcripts, sqlite_url):
    path = transcripts.write("mid.jsonl", [GOOD, GOOD, {"no": "messages"}], jsonl=True)
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli.one_line_error(result, "mid.jsonl: record 2 (line 3)", "no 'messages'")
    assert stats(cli, sqlite_url)["chats"] == 0


def test_content_the_store_would_refuse_writes_nothing(cli, tmp_path, sqlite_url):
    # A lone surrogate (legal in JSON text, refused by every store) in the last record.
    path = tmp_path / "surrogate.json"
    bad = '{"messages": [{"role": "user", "content": "a \\ud800 b"}]}'
    path.write_text(f"[{json.dumps(GOOD)}, {json.dumps(GOOD)}, {bad}]", encoding="utf-8")
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli.one_line_error(result, "surrogate.json: record 2: record.messages[0].content", "surrogate")
    assert result.exit_code == 2
    assert stats(cli, sqlite_url)["chats"] == 0


def test_ctrl_c_says_what_was_committed(cli, transcripts, sqlite_url, monkeypatch):
    path = transcripts.write("five.json", [GOOD] * 5)
    monkeypatch.setattr(bulk_step, "WRITE_CHATS", 1)  # a batch per record
    real = bulk_step.ChatBatch.flush
    calls = 0

    async def interrupted_on_the_third(self: Any) -> Any:
        nonlocal calls
        if self.pending:
            calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return await real(self)

    monkeypatch.setattr(bulk_step.ChatBatch, "flush", interrupted_on_the_third)
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    assert result.exit_code == 130
    line = cli.one_line_error(result, "interrupted: 2 of 5 records of five.json are imported")
    assert "run the same command again" in line
    assert stats(cli, sqlite_url)["chats"] == 2
    monkeypatch.setattr(bulk_step.ChatBatch, "flush", real)
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    assert stats(cli, sqlite_url)["chats"] == 5  # the re-run finished the import


def test_ctrl_c_on_the_one_record_path_says_what_was_committed(
    cli, transcripts, sqlite_url, monkeypatch
):
    # Records with more messages than a batch (here: any) take the one-record path.
    path = transcripts.write("five.json", [GOOD] * 5)
    real = write_step.store_conversation
    calls = 0

    async def interrupted_on_the_third(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return await real(*args, **kwargs)

    monkeypatch.setattr(write_step, "WRITE_MESSAGES", 0)  # every record on its own
    monkeypatch.setattr(write_step, "store_conversation", interrupted_on_the_third)
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    assert result.exit_code == 130
    cli.one_line_error(result, "interrupted: 2 of 5 records of five.json are imported")
    assert stats(cli, sqlite_url)["chats"] == 2
    monkeypatch.setattr(write_step, "store_conversation", real)
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    assert stats(cli, sqlite_url)["chats"] == 5


# -- AG-UI ------------------------------------------------------------------------------

REQUEST = {
    "threadId": "t1",
    "runId": "r2",
    "messages": [
        {"role": "user", "content": "approve EXP-1"},
        {
            "role": "assistant",
            "toolCalls": [
                {"id": "call_1", "type": "function", "function": {"name": "ask", "arguments": "{}"}}
            ],
        },
        # The recorder reuses the tool call's id as the result message's id...
        {"role": "tool", "content": "yes", "toolCallId": "call_1", "id": "call_1"},
    ],
}
RESPONSE = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r2"},
    {"type": "TOOL_CALL_START", "toolCallId": "call_1", "toolCallName": "approve"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": '{"id": "EXP-1"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
    # ...and again for this result, so the run's one batch is refused.
    {"type": "TOOL_CALL_RESULT", "messageId": "call_1", "toolCallId": "call_1", "content": "ok"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m9", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m9", "delta": "Approved."},
    {"type": "TEXT_MESSAGE_END", "messageId": "m9"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r2"},
]


@pytest.fixture
def agui_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "streams"
    (folder / "nested").mkdir(parents=True)
    (folder / "Approve#Turn_02.02.Request.Client.json").write_text(json.dumps(REQUEST))
    (folder / "Approve#Turn_02.06.Response.Server.json").write_text(json.dumps(RESPONSE))
    other = [{**e, "threadId": "t7"} if "threadId" in e else e for e in RESPONSE[5:]]
    start = {"type": "RUN_STARTED", "threadId": "t7", "runId": "r7"}
    (folder / "nested" / "plain.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in [start, *other])
    )
    return folder


def test_agui_imports_a_directory_with_a_truthful_warning(cli, agui_dir, sqlite_url):
    result = cli("import", str(agui_dir), "--format", "agui", "--url", sqlite_url)
    assert result.exit_code == 0, result.stderr
    assert "imported streams: 2 chats (2 new" in result.stdout
    warnings = result.stderr.strip().splitlines()
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("threadkeep: warning: Approve: run 'r2' reuses the message id")
    assert "'call_1'" in warnings[0]
    assert "nothing was written" not in warnings[0]
    # ...and what it says is true: every message is stored, the repeated id kept aside.
    assert "all 6 of its messages are stored" in warnings[0]
    chats = cli.json("chats", "--json", "--url", sqlite_url)["items"]
    chat_id = next(c["chat_id"] for c in chats if c["thread_id"].endswith(":t1"))
    messages = cli.json("history", chat_id, "--json", "--url", sqlite_url)["items"]
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m["role"] for m in messages] == roles
    moved = [m for m in messages if m["agui_id"] is None and "agui_id" in m["metadata"]]
    assert [m["metadata"]["agui_id"] for m in moved] == ["call_1"]
    assert moved[0]["content"] == "ok"
    again = cli("import", str(agui_dir), "--format", "agui", "--url", sqlite_url)
    assert "2 chats (0 new, 2 already present)" in again.stdout


def test_a_directory_is_refused_for_one_file_formats(cli, agui_dir, memory_url):
    result = cli("import", str(agui_dir), "--format", "openai", "--url", memory_url)
    cli.one_line_error(result, "is a directory", "--format openai")
    assert result.exit_code == 2


def test_a_directory_without_streams_is_an_error(cli, tmp_path, memory_url):
    folder = tmp_path / "nothing"
    folder.mkdir()
    empty = cli("import", str(folder), "--format", "agui", "--url", memory_url)
    cli.one_line_error(empty, "holds no stream files", ".jsonl")
    (folder / "notes.txt").write_text("no events here\n")
    junk = cli("import", str(folder), "--format", "agui", "--url", memory_url)
    assert junk.exit_code == 2
    assert junk.stderr.strip().splitlines()[-1].endswith("holds AG-UI events or a request (1 read)")
