"""Every named sequence of the AG-UI protocol fixtures folds into the records it describes.

The fixtures (``ag-ui-protocol-fixtures/``, read from ``../shared/realdata``) are imported
with ``threadkeep import --format agui``'s importer; expected texts are computed from the
fixture's own events here, never copied into the project. THINKING_* (deprecated) and
REASONING_* sequences fold into one reasoning record per reasoning message; RUN_ERROR
sequences end ``errored``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from threadkeep import (
    CustomPart,
    ImagePart,
    MessageStatus,
    Role,
    RunStatus,
    StepStatus,
)
from threadkeep._importers.agui import import_agui

EVENTS = "ag-ui-protocol-fixtures/sdks/community/dart/test/fixtures/events.json"
SSE = "ag-ui-protocol-fixtures/sdks/community/dart/test/fixtures/sse_streams.txt"
COMPAT = (
    "ag-ui-protocol-fixtures/sdks/dotnet/tests/AGUI.Abstractions.UnitTests/Compatibility/Fixtures"
)
USER = "fixtures-user"


def deltas(events: list[dict[str, Any]], message_id: str | None, *prefixes: str) -> str:
    return "".join(
        e.get("delta") or ""
        for e in events
        if e["type"].startswith(prefixes) and e.get("messageId") == message_id
    )


def first(events: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next(e for e in events if e["type"] == type_)


class Imported:
    """One named sequence after import: its runs, messages and steps."""

    def __init__(self, store, kit, name: str, events: list[dict[str, Any]]) -> None:
        self.store, self.kit, self.name, self.events = store, kit, name, events
        started = [e for e in events if e["type"] == "RUN_STARTED"]
        self.thread = f"agui:events.json#{name}:{started[0]['threadId']}"
        self.run_ids = [e["runId"] for e in started]

    async def load(self) -> Imported:
        self.chat = await self.store.find_chat(USER, self.thread)
        assert self.chat is not None, self.thread
        self.messages = await self.kit.history(self.store, USER, self.thread)
        self.runs = [await self.store.get_run(self.chat.chat_id, r) for r in self.run_ids]
        self.steps = [
            s for r in self.run_ids for s in await self.store.get_steps(self.chat.chat_id, r)
        ]
        return self

    def by_id(self, agui_id: str, role: Role | None = None):
        found = [
            m
            for m in self.messages
            if agui_id in (m.agui_id, m.metadata.get("agui_id")) and role in (None, m.role)
        ]
        assert len(found) == 1, (agui_id, [(m.agui_id, m.role) for m in self.messages])
        return found[0]


@pytest.fixture
def named(realdata: Path) -> dict[str, list[dict[str, Any]]]:
    sequences: dict[str, list[dict[str, Any]]] = json.loads((realdata / EVENTS).read_text())
    return sequences


@pytest.fixture
async def imported(any_store, kit, realdata, named):
    report = await import_agui(any_store, realdata / EVENTS, user_id=USER)
    assert report.chats_created == len(named) == 15
    return {
        name: await Imported(any_store, kit, name, events).load() for name, events in named.items()
    }


def complete_text(imported: Imported, agui_id: str, role: Role = Role.ASSISTANT) -> None:
    message = imported.by_id(agui_id, role)
    assert message.content == deltas(imported.events, agui_id, "TEXT_MESSAGE")
    assert (message.status, message.in_progress) == (MessageStatus.COMPLETE, False)


async def test_every_named_sequence_folds(imported):
    seq = imported

    # simple_text_message: one assistant message, deltas folded.
    s = seq["simple_text_message"]
    assert [m.role for m in s.messages] == [Role.ASSISTANT]
    complete_text(s, "msg_01")

    # tool_call_sequence: text, a nested tool call with its exact arguments, a tool result.
    s = seq["tool_call_sequence"]
    complete_text(s, "msg_02")
    complete_text(s, "msg_04")
    start = first(s.events, "TOOL_CALL_START")
    (call,) = s.by_id(start["parentMessageId"]).tool_calls
    args = "".join(e["delta"] for e in s.events if e["type"] == "TOOL_CALL_ARGS")
    assert (call.agui_id, call.name, call.arguments) == (
        start["toolCallId"],
        start["toolCallName"],
        args,
    )
    assert call.status is MessageStatus.COMPLETE
    result = first(s.events, "TOOL_CALL_RESULT")
    tool = s.by_id(result["messageId"], Role.TOOL)
    assert (tool.content, tool.tool_call_ref) == (result["content"], result["toolCallId"])
    assert [m.agui_id for m in s.messages] == ["msg_02", "msg_03", "msg_04"]

    # state_management: the text message, and the state document after the JSON Patch.
    s = seq["state_management"]
    complete_text(s, "msg_05")
    expected = copy.deepcopy(first(s.events, "STATE_SNAPSHOT")["snapshot"])
    ops = first(s.events, "STATE_DELTA")["delta"]
    expected["count"] = ops[0]["value"]
    expected["items"].append(ops[1]["value"])
    assert s.runs[0].metadata["agui_state"] == expected

    # messages_snapshot: every snapshot message stored, then the streamed reply. The
    # fixture reuses msg_09 for the reply; the reply keeps the id in metadata.
    s = seq["messages_snapshot"]
    snapshot = first(s.events, "MESSAGES_SNAPSHOT")["messages"]
    for entry in snapshot:
        stored = s.by_id(entry["id"], Role(entry["role"]))
        assert stored.status is MessageStatus.COMPLETE
    assistant = s.by_id(snapshot[1]["id"])
    (snap_call,) = assistant.tool_calls
    assert snap_call.arguments == snapshot[1]["toolCalls"][0]["function"]["arguments"]
    assert s.by_id(snapshot[2]["id"]).tool_call_ref == snapshot[2]["toolCallId"]
    image_message = s.by_id(snapshot[3]["id"], Role.USER)
    assert image_message.content == snapshot[3]["content"][0]["text"]
    (image,) = image_message.parts
    assert isinstance(image, ImagePart)
    assert image.url == snapshot[3]["content"][1]["source"]["value"]
    complete_text(s, "msg_09")

    # messages_snapshot_activity_reasoning: user, activity, reasoning, assistant.
    s = seq["messages_snapshot_activity_reasoning"]
    entries = first(s.events, "MESSAGES_SNAPSHOT")["messages"]
    assert [m.agui_id for m in s.messages] == [e["id"] for e in entries]
    activity = s.by_id(entries[1]["id"])
    assert activity.metadata["agui_role"] == "activity"
    (part,) = activity.parts
    assert isinstance(part, CustomPart)
    assert part.value == {
        "activity_type": entries[1]["activityType"],
        "content": entries[1]["content"],
    }
    reasoning = s.by_id(entries[2]["id"], Role.REASONING)
    (record,) = reasoning.reasonings
    assert (record.content, record.encrypted_value) == (
        entries[2]["content"],
        entries[2]["encryptedValue"],
    )
    assert (
        s.by_id(entries[3]["id"]).metadata["agui_encrypted_value"] == entries[3]["encryptedValue"]
    )

    # multiple_runs: two runs, one message each, both complete.
    s = seq["multiple_runs"]
    assert len(s.runs) == 2
    assert all(r.status is RunStatus.COMPLETE for r in s.runs)
    complete_text(s, "msg_10")
    complete_text(s, "msg_11")
    assert [m.run_id for m in s.messages] == s.run_ids

    # thinking_events (deprecated THINKING_*): one reasoning record, titled, deltas folded.
    s = seq["thinking_events"]
    host, answer = s.messages
    assert (host.role, answer.agui_id) == (Role.REASONING, "msg_12")
    (thought,) = host.reasonings
    assert thought.name == first(s.events, "THINKING_START")["title"]
    assert thought.content == "".join(
        e["delta"] for e in s.events if e["type"] == "THINKING_CONTENT"
    )
    assert (host.status, thought.status) == (MessageStatus.COMPLETE, MessageStatus.COMPLETE)
    complete_text(s, "msg_12")

    # step_events: the steps, in order, completed; no messages.
    s = seq["step_events"]
    assert s.messages == []
    names = [e["stepName"] for e in s.events if e["type"] == "STEP_STARTED"]
    agui_steps = [st for st in s.steps if st.type == "agui_step"]
    assert [st.input["step_name"] for st in agui_steps] == names
    assert all(st.status is StepStatus.COMPLETED for st in agui_steps)

    # error_handling: RUN_ERROR ends the run errored; the trailing RUN_FINISHED changes nothing.
    s = seq["error_handling"]
    error = first(s.events, "RUN_ERROR")
    (run,) = s.runs
    assert (run.status, run.error, run.metadata["agui_error_code"]) == (
        RunStatus.ERRORED,
        error["message"],
        error["code"],
    )
    complete_text(s, "msg_13")  # it ended before the error

    # custom_events: CUSTOM and RAW go to handle_unknown_event; the run completes.
    s = seq["custom_events"]
    assert s.messages == []
    assert s.runs[0].status is RunStatus.COMPLETE

    # concurrent_messages: interleaved deltas fold into their own messages and roles.
    s = seq["concurrent_messages"]
    complete_text(s, "msg_14")
    complete_text(s, "msg_15", Role.SYSTEM)

    # text_message_chunk: a single chunk opens and (at the next event) ends a message.
    s = seq["text_message_chunk"]
    chunk = s.by_id("msg_16")
    assert chunk.content == deltas(s.events, "msg_16", "TEXT_MESSAGE_CHUNK")
    assert chunk.status is MessageStatus.COMPLETE

    # activity_events: the snapshot, then both JSON Patch deltas applied.
    s = seq["activity_events"]
    snap = first(s.events, "ACTIVITY_SNAPSHOT")
    content = copy.deepcopy(snap["content"])
    patches = [e["patch"] for e in s.events if e["type"] == "ACTIVITY_DELTA"]
    content["progress"] = patches[-1][0]["value"]
    content["items"].append(patches[0][1]["value"])
    (part,) = s.by_id(snap["messageId"]).parts
    assert part.value == {"activity_type": snap["activityType"], "content": content}

    # reasoning_events: CONTENT and CHUNK fold into one reasoning; the encrypted value kept.
    s = seq["reasoning_events"]
    (host,) = s.messages
    (thought,) = host.reasonings
    assert thought.agui_id == "rsn_01"
    assert thought.content == deltas(s.events, "rsn_01", "REASONING_MESSAGE")
    assert thought.encrypted_value == first(s.events, "REASONING_ENCRYPTED_VALUE")["encryptedValue"]
    assert host.status is MessageStatus.COMPLETE

    # thinking_text_message_legacy: THINKING_TEXT_MESSAGE_* -> one reasoning record.
    s = seq["thinking_text_message_legacy"]
    (host,) = s.messages
    (thought,) = host.reasonings
    assert thought.content == "".join(
        e.get("delta", "") for e in s.events if e["type"] == "THINKING_TEXT_MESSAGE_CONTENT"
    )


def sse_sections(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line
    return sections


async def test_sse_sections_import(store, kit, realdata, tmp_path):
    sections = sse_sections((realdata / SSE).read_text(encoding="utf-8"))
    assert len(sections) == 8
    for index, (name, text) in enumerate(sections.items()):
        path = tmp_path / f"section-{index}.sse"
        path.write_text("\ufeff" + text, encoding="utf-8")  # a BOM is tolerated
        await import_agui(store, path, user_id=USER)
        messages = []
        for line in text.splitlines():
            if line.startswith("data:"):
                try:
                    messages.append(json.loads(line[5:]))
                except json.JSONDecodeError:
                    continue
        ids = {e["messageId"] for e in messages if e.get("messageId")}
        for agui_id in ids:
            (chat,) = [
                c
                for c in (await store.list_chats(limit=200)).items
                if c.thread_id.startswith(f"agui:section-{index}.sse:")
            ]
            stored = await store.get_message_by_agui_id(chat.chat_id, agui_id)
            assert stored is not None, (name, agui_id)
            assert stored.content == deltas(messages, agui_id, "TEXT_MESSAGE"), name
            assert stored.status is MessageStatus.COMPLETE


async def test_run_error_with_and_without_code_ends_errored(store, kit, realdata, tmp_path):
    """The compatibility arrays' RUN_ERROR events, each ending a run with an open message."""
    errors = []
    for path in sorted((realdata / COMPAT).glob("*.json")):
        errors += [e for e in json.loads(path.read_text()) if e["type"] == "RUN_ERROR"]
    assert len(errors) >= 4
    assert any("code" not in e for e in errors)
    assert any("usage" in e for e in errors)
    for index, error in enumerate(errors):
        stream = [
            {"type": "RUN_STARTED", "threadId": f"t{index}", "runId": f"r{index}"},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{index}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{index}", "delta": "partial"},
            error,
        ]
        path = tmp_path / f"error-{index}.json"
        path.write_text(json.dumps(stream))
        await import_agui(store, path, user_id=USER)
        chat = await store.find_chat(USER, f"agui:{path.name}:t{index}")
        run = await store.get_run(chat.chat_id, f"r{index}")
        assert (run.status, run.error) == (RunStatus.ERRORED, error["message"])
        assert run.metadata.get("agui_error_code") == error.get("code")
        assert ("agui_usage" in run.metadata) == ("usage" in error)
        message = await store.get_message_by_agui_id(chat.chat_id, f"m{index}")
        assert (message.content, message.status) == ("partial", MessageStatus.ERRORED)


async def test_compatibility_arrays_import_without_error(store, realdata):
    """Unknown fields, odd ids and out-of-run events fold without losing anything."""
    report = await import_agui(store, realdata / COMPAT, user_id=USER)
    assert report.messages_created >= 3
    chats = (await store.list_chats(limit=200)).items
    assert len(chats) == report.chats_created
