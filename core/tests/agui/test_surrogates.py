"""Lone UTF-16 surrogates anywhere in a run never cost a record nor leave the run ``active``.

SPEC section 3: the store rejects them at write (``InvalidContent``); the stream layer
replaces them with U+FFFD, notes how many in ``metadata["replaced_surrogates"]``, and a
run never dies on them. That covers every string the fold writes (ids, names, step names,
state, results, errors), not only streamed text, and the client's inbound messages.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from ag_ui.core import (
    AssistantMessage,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from threadkeep import MessageStatus, Role, RunStatus, StepStatus
from threadkeep.agui import SURROGATES_NOTE, StorageAgent

POLICIES = ["incremental", "buffered"]
B = "\ud800"
ARGS = '{"city":"Oslo"}'


def tool_events(call_id: str, name: str) -> list:
    return [
        ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name),
        ToolCallArgsEvent(tool_call_id=call_id, delta=ARGS),
        ToolCallEndEvent(tool_call_id=call_id),
        ToolCallResultEvent(message_id="res" + B, tool_call_id=call_id, content="sunny"),
    ]


CASES = {
    "tool_call_name": tool_events("c1", "get_weather" + B),
    "tool_call_id": tool_events("c1" + B, "get_weather"),
    "message_id": [
        TextMessageStartEvent(message_id="a1" + B, role="assistant"),
        TextMessageContentEvent(message_id="a1" + B, delta="The answer is 42"),
        TextMessageEndEvent(message_id="a1" + B),
    ],
    "step_name": [
        StepStartedEvent(step_name="plan" + B),
        TextMessageChunkEvent(message_id="a1", delta="The answer is 42"),
        StepFinishedEvent(step_name="plan" + B),
    ],
}


async def run_script(store, kit, body, *, policy, end=None, messages=(), thread_id="thread-1"):
    inp = kit.run_input(thread_id=thread_id, messages=messages)

    async def script(_):
        yield kit.started(inp)
        for event in body:
            yield event
        yield end if end is not None else kit.finished(inp)

    agent = StorageAgent(kit.Agent(script), store, user_id="u", write_policy=policy)
    return [e async for e in agent.run(inp)]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_lone_surrogate_in_an_id_or_name_is_replaced_and_noted(
    store, kit, policy, case, caplog
):
    out = await run_script(store, kit, CASES[case], policy=policy)
    assert type(out[-1]) is RunFinishedEvent
    history = await kit.history(store, "u", "thread-1")
    assert [m.status for m in history] == [MessageStatus.COMPLETE] * len(history)
    chat = await store.find_chat("u", "thread-1")
    assert (await store.get_run(chat.chat_id, "run-1")).status is RunStatus.COMPLETE
    reply = history[1]
    assert reply.metadata[SURROGATES_NOTE] >= 1
    if case.startswith("tool"):
        ((call,), result) = reply.tool_calls, history[2]
        assert (call.name, call.arguments) == (
            "get_weather\ufffd" if case == "tool_call_name" else "get_weather",
            ARGS,
        )
        assert result.role is Role.TOOL
        assert result.tool_call_ref == call.agui_id  # still paired
        assert (result.agui_id, result.content) == ("res\ufffd", "sunny")
    else:
        assert reply.content == "The answer is 42"
    if case == "message_id":
        assert reply.agui_id == "a1\ufffd"
    if case == "step_name":
        assert reply.step == "plan\ufffd"
        steps = await store.get_steps(chat.chat_id, "run-1")
        (agui_step,) = [s for s in steps if s.type == "agui_step"]
        assert agui_step.input == {"step_name": "plan\ufffd"}
        assert agui_step.status is StepStatus.COMPLETED
        assert agui_step.metadata[SURROGATES_NOTE] == 2  # input and key
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


RUN_LEVEL = {
    "state": ([StateSnapshotEvent(snapshot={"city": "Z\udc81rich"})], None),
    "error": ([], RunErrorEvent(message="upstream said \udc81", code="UPSTREAM")),
    "result": ([], "result"),
}


@pytest.mark.parametrize("case", list(RUN_LEVEL))
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_lone_surrogate_in_run_data_never_leaves_the_run_active(
    store, kit, policy, case, caplog
):
    body, end = RUN_LEVEL[case]
    if end == "result":
        end = RunFinishedEvent(thread_id="thread-1", run_id="run-1", result={"x\udc81": "\udc81"})
    body = [*body, TextMessageChunkEvent(message_id="a1", delta="ok")]
    await run_script(store, kit, body, policy=policy, end=end)
    chat = await store.find_chat("u", "thread-1")
    run = await store.get_run(chat.chat_id, "run-1")
    assert run.lease_expires_at is None  # ended, so the sweeper leaves it alone
    assert run.metadata[SURROGATES_NOTE] >= 1
    if case == "state":
        assert run.metadata["agui_state"] == {"city": "Z\ufffdrich"}
    elif case == "error":
        assert (run.status, run.error) == (RunStatus.ERRORED, "upstream said \ufffd")
    else:
        assert run.metadata["agui_result"] == {"x\ufffd": "\ufffd"}
    if case != "error":
        assert run.status is RunStatus.COMPLETE
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("policy", POLICIES)
async def test_an_inbound_message_with_a_lone_surrogate_is_stored_repaired(store, kit, policy):
    inbound = UserMessage(id="u1" + B, content="caf\udce9 menu")
    out = await run_script(store, kit, [], policy=policy, messages=[inbound])
    assert type(out[-1]) is RunFinishedEvent
    (user,) = await kit.history(store, "u", "thread-1")
    assert (user.agui_id, user.content) == ("u1\ufffd", "caf\ufffd menu")
    assert user.metadata[SURROGATES_NOTE] == 2
    # The client sends the same list again: the message is found, not stored twice.
    second = kit.run_input(run_id="run-2", messages=[inbound, UserMessage(id="u2", content="hi")])
    agent = StorageAgent(kit.Agent(lambda inp: _finish(kit, inp)), store, user_id="u")
    assert type([e async for e in agent.run(second)][-1]) is RunFinishedEvent
    assert [m.agui_id for m in await kit.history(store, "u", "thread-1")] == ["u1\ufffd", "u2"]


@pytest.mark.parametrize(
    ("streamed", "snapshot", "stored"),
    [
        ("x " + B + " y", "x " + B + " y", "x \ufffd y"),  # the same text: they agree
        ("x " + B, "x " + B + " more", "x \ufffd more"),  # a strict prefix: the rest is added
    ],
)
@pytest.mark.parametrize("policy", POLICIES)
async def test_a_snapshot_with_the_streamed_lone_surrogate_agrees_with_the_stream(
    store, kit, policy, streamed, snapshot, stored
):
    # The strict-prefix rule compares both texts as they are stored (lone surrogates as
    # U+FFFD): comparing the repaired stream with the raw snapshot took them for disagreeing,
    # noted the snapshot's text and dropped the rest a strict prefix's snapshot completes.
    body = [
        TextMessageStartEvent(message_id="a1", role="assistant"),
        TextMessageContentEvent(message_id="a1", delta=streamed),
        TextMessageEndEvent(message_id="a1"),
        MessagesSnapshotEvent(messages=[AssistantMessage(id="a1", content=snapshot)]),
    ]
    out = await run_script(store, kit, body, policy=policy)
    assert type(out[-1]) is RunFinishedEvent
    history = await kit.history(store, "u", "thread-1")
    (message,) = [m for m in history if m.agui_id == "a1"]
    assert message.content == stored
    assert "agui_snapshot" not in message.metadata
    assert message.metadata[SURROGATES_NOTE] == 1


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_snapshot_under_another_id_with_a_lone_surrogate_is_the_streamed_message(
    store, kit, policy
):
    # Rule 3 (a snapshot message whose id names nothing is the record of the same text):
    # the snapshot's text is compared as stored, so the lone surrogate does not make it a
    # second message.
    body = [
        TextMessageStartEvent(message_id="a1", role="assistant"),
        TextMessageContentEvent(message_id="a1", delta="x " + B + " y"),
        TextMessageEndEvent(message_id="a1"),
        MessagesSnapshotEvent(messages=[AssistantMessage(id="fresh", content="x " + B + " y")]),
    ]
    out = await run_script(store, kit, body, policy=policy)
    assert type(out[-1]) is RunFinishedEvent
    history = await kit.history(store, "u", "thread-1")
    assert [(m.agui_id, m.content) for m in history if m.role is Role.ASSISTANT] == [
        ("a1", "x \ufffd y")
    ]


async def test_an_empty_thread_id_is_invalid_input_without_an_error_log(store, kit, caplog):
    out = await run_script(store, kit, [], policy="incremental", thread_id="")
    (event,) = out
    assert isinstance(event, RunErrorEvent)
    assert event.code == "INVALID_INPUT"
    assert "thread_id" in event.message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not [r for r in caplog.records if r.exc_info]


async def _finish(kit, inp):
    await asyncio.sleep(0)
    yield kit.started(inp)
    yield kit.finished(inp)
