"""Acceptance: every recorded .NET AG-UI response stream imports, its deltas folded exactly.

For each ``baselines/*Response.Server*`` stream (real gpt-5-mini traffic, read from
``../shared/realdata`` and never copied here), imported with its request on memory, SQLite
and PostgreSQL (when ``THREADKEEP_TEST_POSTGRES_URL`` is set):

- each assistant message's stored text equals the concatenation of the stream's content
  deltas for its message id;
- tool calls keep their ids, names and argument strings;
- Step07's reasoning stream is one reasoning record with all 107 deltas folded;
- every run ends as the stream ended (complete), and a second import changes nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from threadkeep import MessageStatus, Role, RunStatus
from threadkeep._importers.agui import import_agui

BASELINES = "ag-ui-dotnet-recordings/baselines"
USER = "dotnet-user"


def expected_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    texts: dict[str, str] = defaultdict(str)
    reasoning: dict[str, list[str]] = defaultdict(list)
    calls: dict[str, dict[str, str]] = {}
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_CONTENT":
            texts[event["messageId"]] += event["delta"]
        elif kind == "REASONING_MESSAGE_CONTENT":
            reasoning[event["messageId"]].append(event["delta"])
        elif kind == "TOOL_CALL_START":
            calls[event["toolCallId"]] = {"name": event["toolCallName"], "arguments": ""}
        elif kind == "TOOL_CALL_ARGS":
            calls[event["toolCallId"]]["arguments"] += event["delta"]
    started = next(e for e in events if e["type"] == "RUN_STARTED")
    return {
        "texts": dict(texts),
        "reasoning": dict(reasoning),
        "calls": calls,
        "thread": started["threadId"],
        "run": started["runId"],
    }


def streams(realdata: Path) -> list[Path]:
    found = sorted((realdata / BASELINES).glob("*/*Response.Server*"))
    assert len(found) == 20
    return found


async def test_every_recorded_stream_imports_with_deltas_folded(any_store, kit, realdata):
    store = any_store
    checked = {"streams": 0, "texts": 0, "calls": 0, "reasoning_deltas": 0}
    for path in streams(realdata):
        events = json.loads(path.read_text(encoding="utf-8-sig"))
        expected = expected_of(events)
        report = await import_agui(store, path, user_id=USER)
        assert report.messages_created >= len(expected["texts"]), path.name

        thread = f"agui:{path.name.split('#', 1)[0]}:{expected['thread']}"
        chat = await store.find_chat(USER, thread)
        assert chat is not None, path.name
        run = await store.get_run(chat.chat_id, expected["run"])
        assert run.status is RunStatus.COMPLETE, path.name
        messages = await kit.history(store, USER, thread, run_id=expected["run"])

        for agui_id, text in expected["texts"].items():
            (message,) = [m for m in messages if m.agui_id == agui_id]
            assert message.role is Role.ASSISTANT
            assert message.content == text, (path.name, agui_id)
            assert message.status is MessageStatus.COMPLETE
            checked["texts"] += 1
        stored_calls = {c.agui_id: c for m in messages for c in m.tool_calls}
        for call_id, call in expected["calls"].items():
            stored = stored_calls[call_id]
            assert (stored.name, stored.arguments) == (call["name"], call["arguments"]), path.name
            checked["calls"] += 1
        for agui_id, pieces in expected["reasoning"].items():
            hosts = [m for m in messages if m.role is Role.REASONING]
            records = [r for m in hosts for r in m.reasonings]
            assert len(records) == 1, path.name
            assert (records[0].agui_id, records[0].content) == (agui_id, "".join(pieces))
            checked["reasoning_deltas"] += len(pieces)
        checked["streams"] += 1

    assert checked == {"streams": 20, "texts": 15, "calls": 10, "reasoning_deltas": 107}


async def test_step07_reasoning_is_one_record_of_107_deltas(store, kit, realdata):
    (path,) = (realdata / BASELINES / "Step07_ThinkingEvents").glob("*Response.Server*")
    events = json.loads(path.read_text(encoding="utf-8-sig"))
    pieces = [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"]
    assert len(pieces) == 107
    await import_agui(store, path, user_id=USER)
    chat = await store.find_chat(USER, f"agui:{path.name.split('#', 1)[0]}:thread_Id_1")
    messages = await kit.history(store, USER, chat.thread_id)
    reasoning = [r for m in messages for r in m.reasonings]
    assert len(reasoning) == 1
    assert reasoning[0].content == "".join(pieces)
    assert reasoning[0].status is MessageStatus.COMPLETE
    # the request's user message, the reasoning message, the answer: in stream order
    assert [m.role for m in messages] == [Role.USER, Role.REASONING, Role.ASSISTANT]


async def test_a_second_import_changes_nothing(store, realdata):
    directory = realdata / BASELINES
    first = await import_agui(store, directory, user_id=USER)
    again = await import_agui(store, directory, user_id=USER)
    assert first.messages_created > 0
    assert (again.chats_created, again.messages_created, again.tool_calls_created) == (0, 0, 0)
    # What a later turn's request echoes of the history counts present in the first import.
    assert (again.chats_present, again.messages_present, again.tool_calls_present) == (
        first.chats_created,
        first.messages,
        first.tool_calls,
    )


async def test_requests_pair_with_their_streams(store, kit, realdata):
    """Turn 2 of a multi-turn scenario: the echoed history is found, not stored twice."""
    scenario = realdata / BASELINES / "MixedToolInvocationIntegration"
    for path in sorted(scenario.glob("*Response.Server*")):
        await import_agui(store, path, user_id=USER)
    (request_path,) = scenario.glob("*Turn_02*Request*")
    request = json.loads(request_path.read_text(encoding="utf-8-sig"))
    thread = f"agui:{request_path.name.split('#', 1)[0]}:{request['threadId']}"
    messages = await kit.history(store, USER, thread)
    users = [m for m in messages if m.role is Role.USER]
    assert len(users) == 1  # turn 2 echoes turn 1's user message; it is stored once
    frontend = [m for m in messages if m.role is Role.TOOL and m.run_id == request["runId"]]
    echoed = request["messages"][2]
    assert any(
        (m.agui_id, m.tool_call_ref, m.content)
        == (echoed["id"], echoed["toolCallId"], echoed["content"])
        for m in frontend
    )
