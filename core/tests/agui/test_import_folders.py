"""``import DIR --format agui`` of recordings laid out as a folder per run, as harnesses write them.

Each folder holds ``request.json`` (the ``RunAgentInput``), ``response.jsonl`` (the events)
and ``metadata.json`` (not AG-UI). Every recording reuses one thread id and one run id, as
benchmark harnesses do; each is its own chat and run, its prompt and tool result stored once,
and importing again writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from threadkeep import InvalidArgument, Role, open_store
from threadkeep._importers.agui import import_agui

USER = "importer"
FOLDERS = 200


def write_folders(root: Path, count: int) -> None:
    for index in range(count):
        folder = root / f"agent-{index % 4}" / f"run{index}-calc"
        folder.mkdir(parents=True)
        request = {
            "threadId": "test-thread",
            "runId": "test-run",
            "messages": [{"id": "msg-1", "role": "user", "content": f"prompt {index}"}],
        }
        events = [
            {"type": "RUN_STARTED", "threadId": "test-thread", "runId": "test-run"},
            {"type": "TOOL_CALL_START", "toolCallId": f"call-{index}", "toolCallName": "calc"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": f"call-{index}", "delta": '{"n":1}'},
            {"type": "TOOL_CALL_END", "toolCallId": f"call-{index}"},
            {"type": "TOOL_CALL_RESULT", "toolCallId": f"call-{index}", "result": index},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m-{index}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{index}", "delta": f"= {index}"},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m-{index}"},
            {"type": "RUN_FINISHED", "threadId": "test-thread", "runId": "test-run"},
        ]
        (folder / "request.json").write_text(json.dumps(request))
        (folder / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        (folder / "metadata.json").write_text(json.dumps({"run": index, "success": True}))


async def all_messages(store):
    found = []
    for chat in (await store.list_chats(limit=FOLDERS + 10)).items:
        found += (await store.list_messages(chat.chat_id, limit=50)).items
    return found


def test_two_hundred_run_folders_import_with_one_command(cli, tmp_path, caplog):
    root = tmp_path / "runs"
    write_folders(root, FOLDERS)
    url = f"sqlite+aiosqlite:///{tmp_path / 'tk.db'}"
    first = cli("import", str(root), "--format", "agui", "--url", url, "--json")
    assert first.exit_code == 0, first.output
    counts = json.loads(first.stdout)
    assert counts["chats_created"] == FOLDERS
    assert counts["messages_created"] == FOLDERS * 4  # prompt, call, result, answer
    assert counts["tool_calls_created"] == FOLDERS
    notes = [line for line in first.stderr.splitlines() if "metadata.json" in line]
    assert len(notes) == FOLDERS
    assert all("not an AG-UI file" in n for n in notes)

    async def check():
        async with open_store(url) as store:
            messages = await all_messages(store)
            prompts = sorted(m.content for m in messages if m.role is Role.USER)
            results = sorted(m.content for m in messages if m.role is Role.TOOL)
            assert prompts == sorted(f"prompt {i}" for i in range(FOLDERS))
            assert results == sorted(str(i) for i in range(FOLDERS))
            assert {m.tool_call_ref for m in messages if m.role is Role.TOOL} == {
                f"call-{i}" for i in range(FOLDERS)
            }
            return sorted((m.message_id, m.revision) for m in messages)

    before = asyncio.run(check())
    again = cli("import", str(root), "--format", "agui", "--url", url, "--json")
    assert again.exit_code == 0, again.output
    counts = json.loads(again.stdout)
    assert (counts["chats_created"], counts["messages_created"]) == (0, 0)
    assert counts["messages_present"] == FOLDERS * 4
    assert asyncio.run(check()) == before  # nothing written


async def test_a_recording_reusing_a_run_id_with_other_content_is_a_new_run(store, tmp_path):
    write_folders(tmp_path / "a", 1)
    write_folders(tmp_path / "b", 2)  # its run0 has run0's content; run1 reuses the ids
    first = await import_agui(store, tmp_path / "a", user_id=USER, thread_scope="thread")
    second = await import_agui(store, tmp_path / "b", user_id=USER, thread_scope="thread")
    assert first.messages_created == 4
    assert (second.messages_present, second.messages_created) == (4, 4)
    chat = await store.find_chat(USER, "test-thread")
    assert (await store.get_run(chat.chat_id, "test-run#2")).metadata["agui_import"]


async def test_a_malformed_events_file_refuses_the_import_naming_file_and_line(store, tmp_path):
    write_folders(tmp_path, 3)
    broken = tmp_path / "agent-1" / "run1-calc" / "response.jsonl"
    lines = broken.read_text().splitlines()
    lines[3] = lines[3][:20]  # cut mid-event
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(InvalidArgument) as raised:
        await import_agui(store, tmp_path, user_id=USER)
    assert str(broken) in str(raised.value)
    assert "line 4" in str(raised.value)
    assert (await store.list_chats(limit=10)).items == []


async def test_a_malformed_request_names_its_file_without_a_pydantic_dump(store, tmp_path):
    write_folders(tmp_path, 1)
    bad = tmp_path / "agent-0" / "run0-calc" / "request.json"
    bad.write_text(json.dumps({"threadId": "t", "runId": "r", "messages": [{"role": "wizard"}]}))
    with pytest.raises(InvalidArgument) as raised:
        await import_agui(store, tmp_path, user_id=USER)
    text = str(raised.value)
    assert str(bad) in text
    assert "not a RunAgentInput" in text
    assert "errors.pydantic.dev" not in text
    assert "\n" not in text


async def test_a_run_folder_named_directly_finds_its_request(store, tmp_path, caplog):
    write_folders(tmp_path, 1)
    response = tmp_path / "agent-0" / "run0-calc" / "response.jsonl"
    with caplog.at_level(logging.WARNING, "threadkeep"):
        report = await import_agui(store, response, user_id=USER)
    assert report.messages_created == 4
    chat = await store.find_chat(USER, "agui:run0-calc:test-thread")
    assert chat is not None
