"""Ids a run uses twice: each use after the first ended is a new record, nothing merged or lost.

Providers and adapters number tool calls per model turn (``call_0`` in every turn) and may
name results after them, so one run can carry two tool calls with one id and two results
with one message id. Each is its own call and its own ``tool`` message; a repeated
message id is stored as ``"<id>#<n>"`` with the id in ``metadata["agui_id"]``.
"""

from __future__ import annotations

import json
from uuid import uuid4

import pytest
from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)

from threadkeep import MessageStatus, Role, RunStatus
from threadkeep.agui import StorageAgent

POLICIES = ["incremental", "buffered"]
ARGS = ['{"city":"Oslo", "note":"\\u00e9 \u00e9"}', '{"tz":"CET"}']


def two_turns(kit, inp, *, chunks: bool = False):
    """Two model turns, each calling ``call_0`` and answered by result ``result_0``."""
    events = [kit.started(inp)]
    for name, args, answer in (("get_weather", ARGS[0], "snow"), ("get_time", ARGS[1], "10:00")):
        if chunks:
            half = len(args) // 2
            events += [
                ToolCallChunkEvent(tool_call_id="call_0", tool_call_name=name, delta=args[:half]),
                ToolCallChunkEvent(tool_call_id="call_0", delta=args[half:]),
            ]
        else:
            events += [
                ToolCallStartEvent(tool_call_id="call_0", tool_call_name=name),
                ToolCallArgsEvent(tool_call_id="call_0", delta=args[:5]),
                ToolCallArgsEvent(tool_call_id="call_0", delta=args[5:]),
                ToolCallEndEvent(tool_call_id="call_0"),
            ]
        events.append(
            ToolCallResultEvent(message_id="result_0", tool_call_id="call_0", content=answer)
        )
    events += [*kit.text("a1", ["Snowing, 10:00."]), kit.finished(inp)]
    return events


async def run_once(store, kit, events, inp, policy):
    async def script(_):
        for event in events:
            yield event

    agent = StorageAgent(kit.Agent(script), store, user_id="u", write_policy=policy)
    return [e async for e in agent.run(inp)]


@pytest.mark.parametrize("chunks", [False, True], ids=["start-args-end", "chunks"])
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_tool_call_id_reused_after_its_call_ended_is_a_new_call(
    store, kit, policy, chunks, caplog
):
    inp = kit.run_input()
    await run_once(store, kit, two_turns(kit, inp, chunks=chunks), inp, policy)

    history = await kit.history(store, "u", "thread-1")
    assert [m.role for m in history] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    calls = [c for m in history for c in m.tool_calls]
    assert [(c.agui_id, c.name, c.arguments, c.status) for c in calls] == [
        ("call_0", "get_weather", ARGS[0], MessageStatus.COMPLETE),
        ("call_0", "get_time", ARGS[1], MessageStatus.COMPLETE),
    ]
    results = [m for m in history if m.role is Role.TOOL]
    assert [(m.agui_id, m.content, m.tool_call_ref) for m in results] == [
        ("result_0", "snow", "call_0"),
        ("result_0#2", "10:00", "call_0"),
    ]
    assert "agui_id" not in results[0].metadata
    assert results[1].metadata["agui_id"] == "result_0"
    assert all(m.status is MessageStatus.COMPLETE for m in history)
    chat = await store.find_chat("u", "thread-1")
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.COMPLETE
    assert "not ended in one batch" not in caplog.text  # the buffered batch is accepted


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_reused_id_is_deterministic_so_an_echo_and_a_replay_change_nothing(
    store, kit, policy
):
    inp = kit.run_input()
    await run_once(store, kit, two_turns(kit, inp), inp, policy)
    chat = await store.find_chat("u", "thread-1")
    before = await kit.history(store, "u", "thread-1")

    # The second result's key is "result_0#2" every time: appending it again dedups.
    again = before[4].model_copy(update={"message_id": uuid4()})
    assert (await store.append_message(chat.chat_id, again)).message_id == before[4].message_id

    # The client echoes the whole list (both calls, both results) with a new user message.
    echo = [
        UserMessage(id="user-run-1", content="hello from run-1"),
        *[
            m
            for args, answer in zip(ARGS, ("snow", "10:00"), strict=True)
            for m in (
                AssistantMessage(
                    id="call_0",
                    tool_calls=[
                        ToolCall(id="call_0", function=FunctionCall(name="f", arguments=args))
                    ],
                ),
                ToolMessage(id="result_0", tool_call_id="call_0", content=answer),
            )
        ],
        AssistantMessage(id="a1", content="Snowing, 10:00."),
        UserMessage(id="u2", content="thanks"),
    ]
    inp2 = kit.run_input(run_id="run-2", messages=echo)
    out = await run_once(store, kit, [kit.started(inp2), kit.finished(inp2)], inp2, policy)
    assert [e.type.value for e in out] == ["RUN_STARTED", "RUN_FINISHED"]
    after = await kit.history(store, "u", "thread-1")
    assert [m.message_id for m in after[:-1]] == [m.message_id for m in before]
    assert (after[-1].agui_id, after[-1].content) == ("u2", "thanks")
    assert json.loads(after[3].tool_calls[0].arguments) == {"tz": "CET"}
