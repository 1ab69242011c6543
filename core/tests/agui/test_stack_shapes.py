"""Stream shapes of real stacks' AG-UI adapters, live and imported, stated record by record.

Each stream is wire JSON in the shape an adapter emits (LlamaIndex's workflow router,
Pydantic AI's event stream, harnesses that write events before ``RUN_STARTED``...). The
live path hands the events to ``StorageAgent``; the import path reads a run folder
(``request.json`` + ``response.jsonl``). The expected records are an independent reading
of each stream, written out literally.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import BaseEvent, RunAgentInput
from pydantic import ValidationError

from threadkeep import Message, MessageFilter, RunStatus, Store
from threadkeep._importers.agui import import_agui
from threadkeep.agui import StorageAgent
from threadkeep.agui._compat import UnknownEvent
from threadkeep.agui._wire import EVENT_CLASSES

USER = "u"
THREAD = "t-1"
PROMPT = {"id": "msg-1", "role": "user", "content": "What is the weather?"}
PROMPT_RECORD = ("user", "msg-1", "What is the weather?", "complete", None, [])
PATHS = ["live", "import"]


def started(run: str = "r-1") -> dict[str, Any]:
    return {"type": "RUN_STARTED", "threadId": THREAD, "runId": run}


def finished(run: str = "r-1") -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": THREAD, "runId": run}


def text(message_id: str, delta: str) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def live_event(data: dict[str, Any]) -> BaseEvent:
    """The event an agent could build for this wire object (typed where the schema allows)."""
    for builder in (EVENT_CLASSES.get(data["type"]), BaseEvent, UnknownEvent):
        if builder is not None:
            try:
                return builder.model_validate(data)
            except ValidationError:
                continue
    raise AssertionError(data)


def request(run: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "threadId": THREAD,
        "runId": run,
        "messages": messages,
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


async def fold(
    path: str,
    store: Store,
    tmp_path: Path,
    stream: list[dict[str, Any]],
    *,
    run: str = "r-1",
    messages: list[dict[str, Any]] | None = None,
    folder: str = "rec",
) -> Any:
    """Fold one recorded run through the live wrapper or the importer; return its chat."""
    sent = [PROMPT] if messages is None else messages
    if path == "live":
        events = [live_event(e) for e in stream]

        class Agent:
            async def run(self, _input: RunAgentInput) -> Any:
                for event in events:
                    yield event

        agent = StorageAgent(Agent(), store, user_id=USER)
        [_ async for _ in agent.run(RunAgentInput.model_validate(request(run, sent)))]
        return await store.find_chat(USER, THREAD)
    directory = tmp_path / "recordings" / folder
    directory.mkdir(parents=True)
    (directory / "request.json").write_text(json.dumps(request(run, sent)))
    (directory / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in stream))
    await import_agui(store, directory / "response.jsonl", user_id=USER, thread_scope="thread")
    return await store.find_chat(USER, THREAD)


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


async def records(store: Store, chat: Any, run: str | None = None) -> list[tuple[Any, ...]]:
    page = await store.list_messages(
        chat.chat_id, limit=200, message_filter=MessageFilter(run_id=run) if run else None
    )
    return [summary(m) for m in page.items]


# -- a recording whose events begin before RUN_STARTED, or repeat it -----------------------

EARLY_EVENTS = [
    {"type": "CUSTOM", "name": "harness", "value": {"model": "gpt-4o"}},
    {"type": "STATE_SNAPSHOT", "snapshot": {"city": "Paris"}},
    started(),
    started(),  # re-announced by a reconnecting adapter: the same run
    *text("a1", "Sunny."),
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_events_before_or_repeating_run_started_belong_to_that_one_run(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, EARLY_EVENTS)
    assert await records(every_store, chat, "r-1") == [
        PROMPT_RECORD,
        ("assistant", "a1", "Sunny.", "complete", None, []),
    ]
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert (run.status, run.metadata["agui_state"]) == (RunStatus.COMPLETE, {"city": "Paris"})
    assert run.metadata["agui_other_events"] == {"CUSTOM:harness": 1}
    for other in ("r-1#2", "r-1#3"):
        with pytest.raises(Exception, match="run"):
            await every_store.get_run(chat.chat_id, other)


# -- a tool call whose parentMessageId names the tool result before it (Pydantic AI < 1.0) --


def pydantic_call(call_id: str, name: str, args: str, parent: str) -> list[dict[str, Any]]:
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


def pydantic_result(message_id: str, call_id: str, content: str) -> dict[str, Any]:
    return {
        "type": "TOOL_CALL_RESULT",
        "messageId": message_id,
        "toolCallId": call_id,
        "content": content,
        "role": "tool",
    }


PARENT_IS_RESULT = [
    started(),
    *text("m1", "Checking."),
    *pydantic_call("c1", "geocode", '{"city":"Paris"}', "m1"),  # the ended text message
    pydantic_result("m2", "c1", "48.85,2.35"),
    # the next model turn's calls name the last message id: the tool result's
    *pydantic_call("c2", "weather", '{"lat":48.85}', "m2"),
    *pydantic_call("c3", "time", "{}", "m2"),
    pydantic_result("m3", "c2", "sunny"),
    pydantic_result("m4", "c3", "noon"),
    *text("m5", "Sunny at noon."),
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_a_tool_call_parented_to_a_tool_result_gets_an_assistant_message(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, PARENT_IS_RESULT)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        ("assistant", "m1", "Checking.", "complete", None, [("c1", "geocode", '{"city":"Paris"}')]),
        ("tool", "m2", "48.85,2.35", "complete", "c1", []),
        (
            "assistant",
            None,
            "",
            "complete",
            None,
            [("c2", "weather", '{"lat":48.85}'), ("c3", "time", "{}")],
        ),
        ("tool", "m3", "sunny", "complete", "c2", []),
        ("tool", "m4", "noon", "complete", "c3", []),
        ("assistant", "m5", "Sunny at noon.", "complete", None, []),
    ]


# -- LlamaIndex's workflow router: chunks, no tool results, snapshots with fresh ids --------


def llama_snapshot(*messages: tuple[str, str, str | None]) -> dict[str, Any]:
    """A ``MESSAGES_SNAPSHOT`` as LlamaIndex builds it: a fresh uuid for every message."""
    built = []
    for index, (role, content, call_id) in enumerate(messages):
        message: dict[str, Any] = {"id": f"uuid-{len(messages)}-{index}", "role": role}
        message["content"] = content
        if call_id is not None:
            message["toolCallId"] = call_id
        built.append(message)
    return {"type": "MESSAGES_SNAPSHOT", "messages": built}


SYSTEM = "You are a weather bot."
LLAMA = [
    started(),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "resp-1", "role": "assistant", "delta": "Let me "},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "resp-1", "role": "assistant", "delta": "check."},
    {
        "type": "TOOL_CALL_CHUNK",
        "toolCallId": "call_a",
        "toolCallName": "weather",
        "delta": '{"city": "Paris"}',
    },
    llama_snapshot(
        ("system", SYSTEM, None),
        ("user", PROMPT["content"], None),
        ("assistant", "Let me check.", None),
        ("tool", "sunny", "call_a"),
    ),
    # the second model turn only calls a tool: no text chunk, a content-less message
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "call_b", "toolCallName": "time", "delta": "{}"},
    llama_snapshot(
        ("system", SYSTEM, None),
        ("user", PROMPT["content"], None),
        ("assistant", "Let me check.", None),
        ("tool", "sunny", "call_a"),
        ("assistant", None, None),
        ("tool", "noon", "call_b"),
    ),
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "resp-3", "role": "assistant", "delta": "Noon."},
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_snapshots_with_fresh_ids_match_by_content_and_store_nothing_twice(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, LLAMA)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            "resp-1",
            "Let me check.",
            "complete",
            None,
            [("call_a", "weather", '{"city": "Paris"}')],
        ),
        ("system", "uuid-4-0", SYSTEM, "complete", None, []),
        ("tool", "uuid-4-3", "sunny", "complete", "call_a", []),
        ("assistant", None, "", "complete", None, [("call_b", "time", "{}")]),
        ("tool", "uuid-6-5", "noon", "complete", "call_b", []),
        ("assistant", "resp-3", "Noon.", "complete", None, []),
    ]


async def test_a_prompt_sent_twice_is_matched_once_per_snapshot_message(store, tmp_path):
    # two identical prompts in the history, echoed by a snapshot with fresh ids: both are
    # the stored ones; a third, new one in the snapshot is stored
    history = [
        {"id": "u1", "role": "user", "content": "yes"},
        {"id": "a1", "role": "assistant", "content": "Sure?"},
        {"id": "u2", "role": "user", "content": "yes"},
    ]
    stream = [
        started(),
        *text("a2", "Done."),
        llama_snapshot(
            ("user", "yes", None),
            ("assistant", "Sure?", None),
            ("user", "yes", None),
            ("assistant", "Done.", None),
            ("user", "yes", None),
        ),
        finished(),
    ]
    chat = await fold("import", store, tmp_path, stream, messages=history)
    assert await records(store, chat) == [
        ("user", "u1", "yes", "complete", None, []),
        ("assistant", "a1", "Sure?", "complete", None, []),
        ("user", "u2", "yes", "complete", None, []),
        ("assistant", "a2", "Done.", "complete", None, []),
        ("user", "uuid-5-4", "yes", "complete", None, []),
    ]


# -- a stream cut after RUN_STARTED: no RUN_FINISHED, no RUN_ERROR --------------------------

CUT = [
    started(),
    *text("a0", "Checking."),
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "weather",
        "parentMessageId": "a0",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city":'},
    {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "The weath"},
]


@pytest.mark.parametrize("path", PATHS)
async def test_a_cut_stream_ends_its_open_records_and_the_run_interrupted(
    every_store, tmp_path, path
):
    chat = await fold(path, every_store, tmp_path, CUT)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        ("assistant", "a0", "Checking.", "complete", None, [("c1", "weather", '{"city":')]),
        ("assistant", "a1", "The weath", "interrupted", None, []),
    ]
    held = await every_store.get_message_by_agui_id(chat.chat_id, "a0")
    assert held.tool_calls[0].status.value == "interrupted"
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert run.status is RunStatus.INTERRUPTED
    assert run.error == (
        "the agent's stream ended after RUN_STARTED without RUN_FINISHED or RUN_ERROR"
    )


@pytest.mark.parametrize("path", PATHS)
async def test_a_stream_without_lifecycle_events_still_completes(store, tmp_path, path):
    chat = await fold(path, store, tmp_path, text("a1", "Hi."))
    assert await records(store, chat, "r-1") == [
        PROMPT_RECORD,
        ("assistant", "a1", "Hi.", "complete", None, []),
    ]
    assert (await store.get_run(chat.chat_id, "r-1")).status is RunStatus.COMPLETE


# -- field types recorders bend: each would drop a whole event (text, a run's end) ----------

BENT = [
    {"type": "RUN_STARTED", "threadId": THREAD, "runId": "r-1", "timestamp": 1733100000.5},
    {"type": "TEXT_MESSAGE_START", "messageId": 7, "role": "model"},
    {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": 7,
        "delta": "It is ",
        "timestamp": "2025-01-01T00:00:00Z",
    },
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": 7, "delta": "sunny.", "timestamp": "soon"},
    {"type": "TEXT_MESSAGE_END", "messageId": 7},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "parentMessageId": "a2"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": {"city": "Paris"}},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "content": "ok", "role": "function"},
    {"type": "STATE_DELTA", "delta": {"op": "add", "path": "/city", "value": "Paris"}},
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"role": "user", "content": PROMPT["content"]},
            {"id": "a3", "role": "assistant", "content": [{"type": "text", "text": "Bye."}]},
        ],
    },
    {"type": "RUN_FINISHED"},
]


async def test_bent_field_types_are_read_not_dropped(every_store, tmp_path):
    # recorded only: a live agent cannot build these (the event models refuse them)
    chat = await fold("import", every_store, tmp_path, BENT)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        ("assistant", "7", "It is sunny.", "complete", None, []),
        ("assistant", "a2", "", "complete", None, [("c1", "", '{"city": "Paris"}')]),
        ("tool", "result:c1", "ok", "complete", "c1", []),
        ("assistant", "a3", "Bye.", "complete", None, []),
    ]
    run = await every_store.get_run(chat.chat_id, "r-1")
    assert (run.status, run.metadata["agui_state"]) == (RunStatus.COMPLETE, {"city": "Paris"})


async def test_the_next_turn_echoing_a_snapshots_fresh_ids_is_accepted_and_stores_once(
    every_store, tmp_path
):
    # the client adopts the last snapshot, so turn 2 sends LlamaIndex's fresh ids back
    await fold("live", every_store, tmp_path, LLAMA)
    echoed = [
        {
            "id": m["id"],
            "role": m["role"],
            "content": m["content"] or "",
            **({"toolCallId": m["toolCallId"]} if "toolCallId" in m else {}),
        }
        for m in LLAMA[-3]["messages"]
    ]
    echoed += [
        {"id": "resp-3", "role": "assistant", "content": "Noon."},
        {"id": "msg-2", "role": "user", "content": "And tomorrow?"},
    ]
    stream = [started("r-2"), *text("a-2", "Rain."), finished("r-2")]
    chat = await fold("live", every_store, tmp_path, stream, run="r-2", messages=echoed)
    assert await records(every_store, chat, "r-2") == [
        ("user", "msg-2", "And tomorrow?", "complete", None, []),
        ("assistant", "a-2", "Rain.", "complete", None, []),
    ]
    assert (await every_store.get_run(chat.chat_id, "r-2")).status is RunStatus.COMPLETE
    assert len(await records(every_store, chat)) == 7 + 2


# -- AG2's AGUIStream: no TOOL_CALL_END until after the result; results share a messageId ---

AG2 = [
    started(),
    {"type": "TOOL_CALL_START", "toolCallId": "call_1", "toolCallName": "weather"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call_1", "delta": '{"city":"Paris"}'},
    {"type": "TOOL_CALL_START", "toolCallId": "call_2", "toolCallName": "time"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "call_2", "delta": "{}"},
    {"type": "TOOL_CALL_RESULT", "toolCallId": "call_1", "content": "sunny", "messageId": "X"},
    {"type": "TOOL_CALL_END", "toolCallId": "call_1"},
    {"type": "TOOL_CALL_RESULT", "toolCallId": "call_2", "content": "noon", "messageId": "X"},
    {"type": "TOOL_CALL_END", "toolCallId": "call_2"},
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "Y", "delta": "Sunny at noon."},
    # a client-side tool: its chunk names the message whose text follows it
    {
        "type": "TOOL_CALL_CHUNK",
        "parentMessageId": "Z",
        "toolCallId": "call_3",
        "toolCallName": "show_card",
        "delta": "{}",
    },
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "Z", "delta": "Here is a card."},
    finished(),
]


@pytest.mark.parametrize("path", PATHS)
async def test_ag2_results_before_their_ends_and_sharing_a_message_id(every_store, tmp_path, path):
    chat = await fold(path, every_store, tmp_path, AG2)
    assert await records(every_store, chat) == [
        PROMPT_RECORD,
        (
            "assistant",
            None,
            "",
            "complete",
            None,
            [("call_1", "weather", '{"city":"Paris"}'), ("call_2", "time", "{}")],
        ),
        ("tool", "X", "sunny", "complete", "call_1", []),
        ("tool", "X#2", "noon", "complete", "call_2", []),
        ("assistant", "Y", "Sunny at noon.", "complete", None, []),
        ("assistant", "Z", "Here is a card.", "complete", None, [("call_3", "show_card", "{}")]),
    ]


async def test_a_new_prompt_repeating_an_earlier_ones_text_is_stored(every_store, tmp_path):
    # a client that sends only the newest prompt, under a fresh id, with a repeated text
    for run, prompt_id in (("r-1", "p-1"), ("r-2", "p-2")):
        sent = [{"id": prompt_id, "role": "user", "content": "yes"}]
        stream = [started(run), *text(f"a-{run}", "ok"), finished(run)]
        chat = await fold("live", every_store, tmp_path, stream, run=run, messages=sent)
    assert await records(every_store, chat) == [
        ("user", "p-1", "yes", "complete", None, []),
        ("assistant", "a-r-1", "ok", "complete", None, []),
        ("user", "p-2", "yes", "complete", None, []),
        ("assistant", "a-r-2", "ok", "complete", None, []),
    ]
