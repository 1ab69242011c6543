"""AWS Strands' AG-UI adapter (``ag-ui-strands``), its shapes written from its source.

``ag_ui_strands/agent.py`` of the AG-UI repository fixes what it sends (read, not run: the
adapter needs a Strands model; no scripted one ships with it):

- a ``MESSAGES_SNAPSHOT`` right after ``RUN_STARTED`` seeding the thread with the input
  messages, then a new *running* snapshot after every text message, every tool call and
  every tool result, each carrying the whole thread so far (``emit_messages_snapshot``);
- the text message is ended when a tool call starts and the message id is rotated, so each
  ``TOOL_CALL_START`` names as its parent a fresh id no text event ever used, and the
  snapshot then holds an assistant message of that id with no text and the call;
- the call's arguments stream as raw increments of the model's JSON, while the snapshot
  holds ``json.dumps`` of the parsed input (another spelling of the same JSON);
- ``TOOL_CALL_RESULT`` without ``role`` (on purpose), a fresh ``messageId``, the content
  ``json.dumps`` of the parsed tool output;
- a ``STATE_SNAPSHOT`` before ``RUN_FINISHED``; a failure is ``RUN_ERROR`` with
  ``message=str(e)`` and ``code="STRANDS_ERROR"``, the open text message left unended.

Live and imported, on memory, SQLite and PostgreSQL; the records are stated literally.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from threadkeep import RunStatus

_SPEC = importlib.util.spec_from_file_location(
    "_agui_stack_shapes_strands", Path(__file__).with_name("test_stack_shapes.py")
)
assert _SPEC is not None
assert _SPEC.loader is not None
shapes = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(shapes)

PROMPT = shapes.PROMPT
STREAMED_ARGS = '{"city":"Paris"}'
DUMPED_ARGS = '{"city": "Paris"}'  # json.dumps(json.loads(STREAMED_ARGS))
RESULT = '{"weather": "sunny"}'
CALL = {
    "id": "tooluse_7Q",
    "type": "function",
    "function": {"name": "get_weather", "arguments": DUMPED_ARGS},
}


def snapshot(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"type": "MESSAGES_SNAPSHOT", "messages": [PROMPT, *messages]}


def content(message_id: str, delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta}


M1 = {"id": "st-m1", "role": "assistant", "content": "Let me check."}
M2 = {"id": "st-m2", "role": "assistant", "content": "", "toolCalls": [CALL]}
R1 = {"id": "st-r1", "role": "tool", "content": RESULT, "toolCallId": "tooluse_7Q"}
M3 = {"id": "st-m3", "role": "assistant", "content": "Sunny in Paris."}

STRANDS_TURN = [
    shapes.started(),
    {"type": "STATE_SNAPSHOT", "snapshot": {}},
    snapshot(),  # the seeded thread: the input messages
    {"type": "TEXT_MESSAGE_START", "messageId": "st-m1", "role": "assistant"},
    content("st-m1", "Let me "),
    content("st-m1", "check."),
    {"type": "TEXT_MESSAGE_END", "messageId": "st-m1"},
    snapshot(M1),
    # the id rotated: the call's parent is an id no text event used
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "tooluse_7Q",
        "toolCallName": "get_weather",
        "parentMessageId": "st-m2",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "tooluse_7Q", "delta": '{"city":'},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "tooluse_7Q", "delta": '"Paris"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "tooluse_7Q"},
    snapshot(M1, M2),
    {
        "type": "TOOL_CALL_RESULT",
        "toolCallId": "tooluse_7Q",
        "messageId": "st-r1",
        "content": RESULT,
    },
    snapshot(M1, M2, R1),
    {"type": "TEXT_MESSAGE_START", "messageId": "st-m3", "role": "assistant"},
    content("st-m3", "Sunny in Paris."),
    {"type": "TEXT_MESSAGE_END", "messageId": "st-m3"},
    snapshot(M1, M2, R1, M3),
    {"type": "STATE_SNAPSHOT", "snapshot": {}},
    shapes.finished(),
]

TURN_RECORDS = [
    shapes.PROMPT_RECORD,
    ("assistant", "st-m1", "Let me check.", "complete", None, []),
    ("assistant", "st-m2", "", "complete", None, [("tooluse_7Q", "get_weather", STREAMED_ARGS)]),
    ("tool", "st-r1", RESULT, "complete", "tooluse_7Q", []),
    ("assistant", "st-m3", "Sunny in Paris.", "complete", None, []),
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_a_strands_turn_with_running_snapshots(any_store, tmp_path, path):
    chat = await shapes.fold(path, any_store, tmp_path, STRANDS_TURN)
    assert await shapes.records(any_store, chat) == TURN_RECORDS
    page = await any_store.list_messages(chat.chat_id, limit=10)
    holder = next(m for m in page.items if m.agui_id == "st-m2")
    # the streamed spelling stays; the snapshot's json.dumps spelling is noted
    assert holder.metadata["agui_snapshot"] == {"tool_calls": {"tooluse_7Q": DUMPED_ARGS}}
    run = await any_store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.COMPLETE


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_the_next_strands_turn_sends_the_snapshot_back(store, tmp_path, path):
    await shapes.fold(path, store, tmp_path, STRANDS_TURN)
    prompt = {"id": "user-2", "role": "user", "content": "And tomorrow?"}
    answer = {"id": "st-m4", "role": "assistant", "content": "Rain."}
    second = [
        shapes.started("r-2"),
        {"type": "MESSAGES_SNAPSHOT", "messages": [PROMPT, M1, M2, R1, M3, prompt]},
        {"type": "TEXT_MESSAGE_START", "messageId": "st-m4", "role": "assistant"},
        content("st-m4", "Rain."),
        {"type": "TEXT_MESSAGE_END", "messageId": "st-m4"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [PROMPT, M1, M2, R1, M3, prompt, answer]},
        shapes.finished("r-2"),
    ]
    history = [PROMPT, M1, M2, R1, M3, prompt]  # what the client holds: the last snapshot
    chat = await shapes.fold(
        path, store, tmp_path, second, run="r-2", messages=history, folder="turn-2"
    )
    assert await shapes.records(store, chat) == [
        *TURN_RECORDS,
        ("user", "user-2", "And tomorrow?", "complete", None, []),
        ("assistant", "st-m4", "Rain.", "complete", None, []),
    ]


STRANDS_FAILURE = [
    shapes.started(),
    snapshot(),
    {"type": "TEXT_MESSAGE_START", "messageId": "st-e1", "role": "assistant"},
    content("st-e1", "The weather in"),
    {"type": "RUN_ERROR", "message": "ModelThrottledException: slow down", "code": "STRANDS_ERROR"},
]


@pytest.mark.parametrize("path", shapes.PATHS)
async def test_a_strands_failure_mid_text(store, tmp_path, path):
    chat = await shapes.fold(path, store, tmp_path, STRANDS_FAILURE)
    assert await shapes.records(store, chat) == [
        shapes.PROMPT_RECORD,
        ("assistant", "st-e1", "The weather in", "errored", None, []),
    ]
    run = await store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.ERRORED
    assert run.error == "ModelThrottledException: slow down"
    assert run.metadata["agui_error_code"] == "STRANDS_ERROR"
