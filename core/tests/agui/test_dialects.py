"""Streams as real stacks send them fold without loss, live and imported, on every driver.

Issue 11's dialects: a ``TOOL_CALL_RESULT`` without ``messageId`` or with ``result``; a
``RUN_ERROR`` with its text under ``error`` or none; a ``MESSAGES_SNAPSHOT`` after the
stream; a client id reused with other content; ``RAW`` / ``USAGE_METADATA`` / ``CUSTOM``
events. Each stream is written as wire JSON; the live path hands the agent's events to
``StorageAgent`` as the agent could build them (a typed event where the schema allows,
else a bare ``BaseEvent`` or an unknown-type event), the import path reads a run folder
(``request.json``, ``response.jsonl``, ``metadata.json``). The expected records are stated
literally: an independent reading of each stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent, RunAgentInput, UserMessage
from pydantic import ValidationError

from threadkeep import Message, RunStatus
from threadkeep._importers.agui import import_agui
from threadkeep.agui import StorageAgent
from threadkeep.agui._compat import UnknownEvent
from threadkeep.agui._wire import EVENT_CLASSES

USER = "u"
THREAD = "t-1"
PROMPT = "What is 1+1?"


def started(run: str = "r-1") -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": THREAD, "runId": run}


def finished(run: str = "r-1") -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run}


def text(message_id: str, *deltas: str, end: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    ]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": d} for d in deltas
    ]
    if end:
        events.append({"type": "TEXT_MESSAGE_END", "messageId": message_id})
    return events


def call(call_id: str, name: str, args: str, parent: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": call_id,
            "toolCallName": name,
            "parentMessageId": parent,
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": args},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def live_event(data: dict[str, Any]) -> BaseEvent:
    """The event an agent could build for this wire object (typed where the schema allows)."""
    cls = EVENT_CLASSES.get(data["type"])
    for builder in (cls, BaseEvent, UnknownEvent):
        if builder is None:
            continue
        try:
            return builder.model_validate(data)
        except ValidationError:
            continue
    raise AssertionError(data)


def request(run: str = "r-1", prompt: str = PROMPT) -> dict[str, Any]:
    return {
        "threadId": THREAD,
        "runId": run,
        "messages": [{"id": "msg-1", "role": "user", "content": prompt}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


async def run_live(store, stream, *, run: str = "r-1", prompt: str = PROMPT, **options):
    events = [live_event(e) for e in stream]

    class Agent:
        async def run(self, _input):
            for event in events:
                yield event

    agent = StorageAgent(Agent(), store, user_id=USER, **options)
    [_ async for _ in agent.run(RunAgentInput.model_validate(request(run, prompt)))]
    return await store.find_chat(USER, THREAD)


async def run_import(store, tmp_path: Path, stream, *, folder: str = "rec", **options):
    directory = tmp_path / "recordings" / folder
    directory.mkdir(parents=True)
    run = next((e["runId"] for e in stream if e["type"] == "RUN_STARTED"), "r-1")
    prompt = options.pop("prompt", PROMPT)
    (directory / "request.json").write_text(json.dumps(request(run, prompt)))
    (directory / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stream))
    (directory / "metadata.json").write_text(json.dumps({"agent": "x", "success": True}))
    await import_agui(store, tmp_path / "recordings", user_id=USER, **options)
    scope = options.get("thread_scope", "recording")
    return await store.find_chat(USER, THREAD if scope == "thread" else f"agui:{folder}:{THREAD}")


async def records(store, chat) -> list[tuple[Any, ...]]:
    page = await store.list_messages(chat.chat_id, limit=200)
    return [summary(m) for m in page.items]


def summary(message: Message) -> tuple[Any, ...]:
    calls = [(c.agui_id, c.name, c.arguments) for c in message.tool_calls]
    return (
        message.role.value,
        message.agui_id,
        message.content,
        message.status.value,
        message.tool_call_ref,
        calls,
    )


USER_RECORD = ("user", "msg-1", PROMPT, "complete", None, [])

PATHS = ["live", "import"]


async def fold(path, store, tmp_path, stream, **options):
    if path == "live":
        return await run_live(store, stream, **options)
    return await run_import(store, tmp_path, stream, **options)


# -- 1. TOOL_CALL_RESULT without messageId / with result ---------------------------------

TOOL_STREAM = [
    started(),
    *call("c1", "calc", '{"x":1}', "a-tools"),
    {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "result": {"value": 2}},
    {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "result": {"value": 2}},  # a retry
    # snake_case keys and a harness field, as some recorders write them
    {"type": "TOOL_CALL_START", "tool_call_id": "c2", "tool_call_name": "echo", "_timestamp": 1},
    {"type": "TOOL_CALL_END", "tool_call_id": "c2"},
    {"type": "TOOL_CALL_RESULT", "message_id": "t2", "tool_call_id": "c2", "result": "ok"},
    *text("a2", "2"),
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_a_tool_result_without_message_id_is_the_tool_message_of_its_call(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, TOOL_STREAM)
    assert await records(every_store, chat) == [
        USER_RECORD,
        ("assistant", "a-tools", "", "complete", None, [("c1", "calc", '{"x":1}')]),
        ("tool", "result:c1", '{"value": 2}', "complete", "c1", []),
        ("assistant", None, "", "complete", None, [("c2", "echo", "")]),
        ("tool", "t2", "ok", "complete", "c2", []),
        ("assistant", "a2", "2", "complete", None, []),
    ]
    assert (await every_store.get_run(chat.chat_id, "r-1")).status is RunStatus.COMPLETE


# -- 2. RUN_ERROR with its text under error, or none (and mid-text) -----------------------

ERRORS = {
    "object": ({"error": {"message": "rate limited", "code": "429"}}, "rate limited", "429"),
    "string": ({"error": "boom", "code": "E1"}, "boom", "E1"),
    "none": ({}, None, None),
}


@pytest.mark.parametrize("shape", list(ERRORS))
@pytest.mark.parametrize("path", PATHS)
async def test_a_run_error_in_any_shape_ends_the_run_errored(every_store, tmp_path, path, shape):
    fields, message, code = ERRORS[shape]
    stream = [started(), *text("a1", "par", end=False), {"type": "RUN_ERROR", **fields}]
    chat = await fold(path, every_store, tmp_path, stream)
    assert await records(every_store, chat) == [
        USER_RECORD,
        ("assistant", "a1", "par", "errored", None, []),
    ]
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert (run.status, run.error, run.metadata.get("agui_error_code")) == (
        RunStatus.ERRORED,
        message,
        code,
    )


# -- 3. MESSAGES_SNAPSHOT after the stream ------------------------------------------------

SNAPSHOT_STREAM = [
    started(),
    *text("a1", "Hel"),
    *call("c1", "search", '{"q":"x"}', "a-tools"),
    {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "found"},
    *text("a2", "Done"),
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"id": "msg-1", "role": "user", "content": PROMPT},
            {"id": "a1", "role": "assistant", "content": "Hello"},
            {
                "id": "snap-a",
                "role": "assistant",
                "content": "",
                "toolCalls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"q": "x"}'},
                    }
                ],
            },
            {"id": "snap-t", "role": "tool", "content": "found", "toolCallId": "c1"},
            {"id": "a2", "role": "assistant", "content": "Finished"},
            {"id": "a3", "role": "assistant", "content": "extra"},
        ],
    },
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_a_snapshot_after_the_stream_is_reconciled_not_stored_twice(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, SNAPSHOT_STREAM)
    assert await records(every_store, chat) == [
        USER_RECORD,
        ("assistant", "a1", "Hello", "complete", None, []),  # the stream was a strict prefix
        ("assistant", "a-tools", "", "complete", None, [("c1", "search", '{"q":"x"}')]),
        ("tool", "t1", "found", "complete", "c1", []),
        ("assistant", "a2", "Done", "complete", None, []),  # disagreement: streamed kept
        ("assistant", "a3", "extra", "complete", None, []),
    ]
    page = await every_store.list_messages(chat.chat_id, limit=200)
    notes = {m.agui_id: m.metadata.get("agui_snapshot") for m in page.items}
    assert notes["a2"] == {"content": "Finished"}
    assert notes["a-tools"] == {"tool_calls": {"c1": '{"q": "x"}'}}
    assert notes["a1"] is None


# -- 4. a client id reused with other content --------------------------------------------


@pytest.mark.parametrize("path", PATHS)
async def test_a_reused_client_id_with_other_content_is_a_new_message(every_store, tmp_path, path):
    for index, prompt in enumerate(["first prompt", "second prompt", "second prompt"]):
        run = f"r-{index}"
        stream = [started(run), *text(f"a-{index}", "ok"), finished(run)]
        if path == "live":
            chat = await run_live(every_store, stream, run=run, prompt=prompt)
        else:
            chat = await run_import(
                every_store,
                tmp_path,
                stream,
                folder=f"rec-{index}",
                prompt=prompt,
                thread_scope="thread",
            )
    users = [r for r in await records(every_store, chat) if r[0] == "user"]
    assert users == [
        ("user", "msg-1", "first prompt", "complete", None, []),
        ("user", "msg-1#2", "second prompt", "complete", None, []),
    ]
    moved = await every_store.get_message_by_agui_id(chat.chat_id, "msg-1#2")
    assert moved.metadata["agui_id"] == "msg-1"


# -- 5. RAW, USAGE_METADATA and custom events ---------------------------------------------

RAW_STREAM = [
    started(),
    *text("a1", "Hi"),
    {
        "type": "RAW",
        "event": {
            "event": "on_chat_model_end",
            "data": {
                "output": {
                    "id": "a1",
                    "type": "ai",
                    "content": "Hi",
                    "usage_metadata": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
                }
            },
        },
    },
    {"type": "USAGE_METADATA", "input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
    {"type": "CUSTOM", "name": "progress", "value": {"pct": 100}},
    finished(),
]


@pytest.mark.parametrize("keep", [False, True], ids=["counted", "kept"])
@pytest.mark.parametrize("path", PATHS)
async def test_events_without_message_content_are_counted_usage_taken_kept_on_request(
    every_store, tmp_path, path, keep
):
    chat = await fold(path, every_store, tmp_path, RAW_STREAM, keep_events=keep)
    assert await records(every_store, chat) == [
        USER_RECORD,
        ("assistant", "a1", "Hi", "complete", None, []),
    ]
    answer = await every_store.get_message_by_agui_id(chat.chat_id, "a1")
    usage = {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}
    assert (answer.tokens, answer.metadata["usage"]) == (3, usage)
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert run.metadata["agui_token_usage"] == usage
    counts = {"RAW": 1, "USAGE_METADATA": 1, "CUSTOM:progress": 1}
    assert run.metadata["agui_other_events"] == counts
    kept = run.metadata.get("agui_events")
    if keep:
        assert [e["type"] for e in kept] == ["RAW", "USAGE_METADATA", "CUSTOM"]
        assert kept[0]["event"]["data"]["output"]["content"] == "Hi"
    else:
        assert kept is None


async def test_the_live_and_import_paths_store_the_same_records(store, tmp_path):
    live = await run_live(store, SNAPSHOT_STREAM)
    imported = await run_import(store, tmp_path, SNAPSHOT_STREAM)
    assert await records(store, live) == await records(store, imported)


def test_a_prompt_with_a_user_message_object(kit):
    # the request builders above match what kit builds (guards the helper itself)
    inp = RunAgentInput.model_validate(request())
    assert inp.messages == [UserMessage(id="msg-1", content=PROMPT)]
