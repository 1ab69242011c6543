"""``threadkeep import PATH --format agui``: file shapes, request pairing, idempotency, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadkeep import ImagePart, InvalidArgument, MessageStatus, Role, RunStatus
from threadkeep._importers import resolve_importer
from threadkeep._importers.agui import import_agui, normalize_request

USER = "importer-test"

STREAM = [
    {"type": "RUN_STARTED", "threadId": "th", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Bonjour "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "à tous \u0000 🌍"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f", "parentMessageId": "m1"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a":'},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": " 1}"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "RUN_FINISHED", "threadId": "th", "runId": "r1"},
]


def write(path: Path, shape: str, events: list[dict]) -> Path:
    if shape == "array":
        text = "\ufeff" + json.dumps(events, indent=2)
    elif shape == "jsonl":
        text = "".join(json.dumps(e) + "\n" for e in events)
    else:
        text = ": keepalive\n\n" + "".join(
            f"id: {i}\ndata: {json.dumps(e)}\n\n" for i, e in enumerate(events)
        )
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("shape", ["array", "jsonl", "sse"])
async def test_every_file_shape_imports_the_same_records(store, kit, tmp_path, shape):
    path = write(tmp_path / f"stream.{shape}", shape, STREAM)
    progress: list[tuple[int, int]] = []
    report = await import_agui(
        store, path, user_id=USER, progress=lambda d, t: progress.append((d, t))
    )
    assert (report.chats_created, report.messages_created, report.tool_calls_created) == (1, 1, 1)
    assert progress == [(0, 1), (1, 1)]
    (message,) = await kit.history(store, USER, f"agui:{path.name}:th")
    assert message.content == "Bonjour à tous \u0000 🌍"
    (call,) = message.tool_calls
    assert (call.agui_id, call.name, call.arguments) == ("c1", "f", '{"a": 1}')

    again = await import_agui(store, path, user_id=USER)
    assert (again.chats_present, again.messages_present, again.tool_calls_present) == (1, 1, 1)
    assert again.messages_created == 0


async def test_a_request_beside_its_response_becomes_the_runs_history(store, kit, tmp_path):
    request = {
        "threadId": "th",
        "runId": "r1",
        "messages": [
            {"role": "user", "content": "Describe"},  # no id: a deterministic one is derived
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "this image"},
                    {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                ],
            },
        ],
    }
    (tmp_path / "Scenario#Turn_01.02.Request.Client.AGUI.verified.json").write_text(
        "\ufeff" + json.dumps(request), encoding="utf-8"
    )
    response = write(
        tmp_path / "Scenario#Turn_01.06.Response.Server.AGUI.verified.json", "array", STREAM
    )
    report = await import_agui(store, response, user_id=USER)
    assert report.messages_created == 3
    history = await kit.history(store, USER, "agui:Scenario:th")
    assert [m.role for m in history] == [Role.USER, Role.USER, Role.ASSISTANT]
    assert history[0].agui_id.startswith("import:0:")
    assert history[1].content == "this image"
    (image,) = history[1].parts
    assert isinstance(image, ImagePart)
    assert (image.mime_type, image.data) == ("image/png", "iVBORw0KGgo=")
    assert all(m.run_id == "r1" for m in history)


async def test_a_directory_pairs_turns_and_streams_without_run_started(store, kit, tmp_path):
    loose = [e for e in STREAM if not e["type"].startswith("RUN_")]
    write(tmp_path / "loose.jsonl", "jsonl", loose)
    (tmp_path / "notes.md").write_text("not an event file")
    report = await import_agui(store, tmp_path, user_id=USER)
    assert report.messages_created == 1
    (chat,) = (await store.list_chats(limit=10)).items
    assert chat.thread_id == "agui:loose.jsonl:thread"
    (run_message,) = await kit.history(store, USER, chat.thread_id)
    run = await store.get_run(chat.chat_id, run_message.run_id)
    assert run.status is RunStatus.COMPLETE
    assert run_message.status is MessageStatus.COMPLETE


async def test_bad_inputs_are_clear_errors(store, tmp_path):
    with pytest.raises(InvalidArgument, match="no such file"):
        await import_agui(store, tmp_path / "missing.json", user_id=USER)
    empty = tmp_path / "empty.json"
    empty.write_text("   ")
    with pytest.raises(InvalidArgument, match="holds no AG-UI events"):
        await import_agui(store, empty, user_id=USER)
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\nstill not\n")
    with pytest.raises(InvalidArgument, match="holds no AG-UI events"):
        await import_agui(store, junk, user_id=USER)
    assert (await store.list_chats(limit=10)).items == []
    with pytest.raises(InvalidArgument, match="not a RunAgentInput"):
        normalize_request({"threadId": "t", "runId": "r", "messages": [{"role": "wizard"}]})


def test_the_registry_names_this_importer():
    assert resolve_importer("agui") is import_agui


def test_the_cli_imports_a_stream(cli, tmp_path, memory_url):
    path = write(tmp_path / "cli-stream.sse", "sse", STREAM)
    first = cli.json("import", str(path), "--format", "agui", "--json", "--url", memory_url)
    assert (first["chats"], first["messages"], first["tool_calls"]) == (1, 1, 1)
    again = cli.json("import", str(path), "--format", "agui", "--json", "--url", memory_url)
    assert (again["messages_created"], again["messages_present"]) == (0, 1)
