"""Inbound messages and the history the inner agent receives (AG-UI seed, ``run``).

New user messages are stored; an unknown non-user message ends the run with RUN_ERROR
``INVALID_INPUT`` and nothing written; an echoed history (tool calls, results and reasoning
included) replays cleanly; the inner agent gets only what follows the last boundary.
"""

from __future__ import annotations

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    SystemMessage,
    TextMessageContentEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)

from threadkeep import MessageStatus, Role
from threadkeep.agui import SURROGATES_NOTE, StorageAgent


async def run_once(store, kit, script, input, **options):
    agent = kit.Agent(script)
    events = [e async for e in StorageAgent(agent, store, user_id="u", **options).run(input)]
    return events, agent


async def _nothing(inp):
    return
    yield  # pragma: no cover


async def test_an_unknown_assistant_message_is_invalid_input_and_writes_nothing(store, kit):
    input = kit.run_input(
        messages=[
            UserMessage(id="u1", content="hi"),
            AssistantMessage(id="ghost", content="I never said that"),
        ]
    )
    events, agent = await run_once(store, kit, _nothing, input)
    (error,) = events
    assert isinstance(error, RunErrorEvent)
    assert error.code == "INVALID_INPUT"
    assert "ghost" in error.message
    assert agent.inputs == []
    assert await store.find_chat("u", "thread-1") is None


async def test_an_echoed_history_replays_cleanly(store, kit):
    async def first_run(inp):
        yield kit.started(inp)
        yield ReasoningStartEvent(message_id="think-1")
        yield ReasoningMessageStartEvent(message_id="think-1")
        yield ReasoningMessageContentEvent(message_id="think-1", delta="hmm")
        yield ReasoningMessageEndEvent(message_id="think-1")
        yield ReasoningEndEvent(message_id="think-1")
        yield ToolCallStartEvent(tool_call_id="call-1", tool_call_name="lookup")
        yield ToolCallArgsEvent(tool_call_id="call-1", delta='{"k": 1}')
        yield ToolCallEndEvent(tool_call_id="call-1")
        yield kit.finished(inp)

    await run_once(
        store, kit, first_run, kit.run_input(messages=[UserMessage(id="u1", content="q")])
    )

    # The client echoes everything (naming the tool-only message after its call, as AG-UI
    # clients do), adds the frontend tool's result and a new question.
    echo = [
        UserMessage(id="u1", content="q"),
        {"id": "think-1", "role": "reasoning", "content": "hmm"},
        AssistantMessage(
            id="call-1",
            tool_calls=[
                ToolCall(id="call-1", function=FunctionCall(name="lookup", arguments='{"k": 1}'))
            ],
        ),
        ToolMessage(id="result-1", tool_call_id="call-1", content="42"),
        UserMessage(id="u2", content="and then?"),
    ]
    seen = []

    async def second_run(inp):
        seen.extend(inp.messages)
        yield kit.finished(inp)

    second = kit.run_input(run_id="run-2", messages=echo)
    events, _ = await run_once(store, kit, second_run, second)
    assert not any(isinstance(e, RunErrorEvent) for e in events)
    history = await kit.history(store, "u", "thread-1")
    assert [(m.role, m.agui_id) for m in history] == [
        (Role.USER, "u1"),
        (Role.REASONING, "think-1"),
        (Role.ASSISTANT, None),
        (Role.TOOL, "result-1"),
        (Role.USER, "u2"),
    ]
    assert [m.run_id for m in history] == ["run-1", "run-1", "run-1", "run-2", "run-2"]
    # The inner agent received the stored history, translated back to AG-UI.
    assert [type(m).__name__ for m in seen] == [
        "UserMessage",
        "ReasoningMessage",
        "AssistantMessage",
        "ToolMessage",
        "UserMessage",
    ]
    assert seen[1].content == "hmm"
    assert seen[2].tool_calls[0].function.arguments == '{"k": 1}'
    assert (seen[3].tool_call_id, seen[3].content) == ("call-1", "42")


async def test_a_tool_result_for_an_unknown_call_is_invalid(store, kit):
    input = kit.run_input(messages=[ToolMessage(id="t1", tool_call_id="nope", content="x")])
    (error,), _ = await run_once(store, kit, _nothing, input)
    assert error.code == "INVALID_INPUT"


async def test_only_what_follows_the_last_boundary_reaches_the_model(store, kit):
    async def reply(inp):
        for event in kit.text(f"a-{inp.run_id}", ["answer"]):
            yield event

    await run_once(store, kit, reply, kit.run_input(run_id="run-1"))
    chat = await store.find_chat("u", "thread-1")
    await store.start_over(chat.chat_id)
    seen = []

    async def look(inp):
        seen.append([m.id for m in inp.messages])
        yield kit.finished(inp)

    await run_once(store, kit, look, kit.run_input(run_id="run-2"))
    assert seen == [["user-run-2"]]

    history = await kit.history(store, "u", "thread-1")
    await store.compact(chat.chat_id, "the story so far", upto_seq=history[-1].seq)
    await run_once(store, kit, look, kit.run_input(run_id="run-3"))
    summary_id, new_id = seen[-1]
    assert new_id == "user-run-3"
    assert summary_id == "threadkeep:compaction:" + str(history[-1].seq)


async def test_the_summary_arrives_as_a_system_message(store, kit):
    await run_once(store, kit, _nothing, kit.run_input(run_id="run-1"))
    chat = await store.find_chat("u", "thread-1")
    (first,) = await kit.history(store, "u", "thread-1")
    await store.compact(chat.chat_id, "summary text", upto_seq=first.seq)
    received = []

    async def look(inp):
        received.extend(inp.messages)
        yield kit.finished(inp)

    await run_once(store, kit, look, kit.run_input(run_id="run-2"))
    assert isinstance(received[0], SystemMessage)
    assert received[0].content == "summary text"
    assert [m.id for m in received[1:]] == ["user-run-2"]


async def test_a_run_id_used_again_is_a_run_conflict(store, kit):
    await run_once(store, kit, _nothing, kit.run_input())
    (error,), agent = await run_once(store, kit, _nothing, kit.run_input())
    assert error.code == "RUN_CONFLICT"
    assert agent.inputs == []


async def test_lone_surrogates_become_replacement_characters_and_are_noted(store, kit):
    async def script(inp):
        yield kit.started(inp)
        for event in kit.text("a1", ["pair split: \ud83d", "\ude80", " lone: \udc00!"]):
            yield event
        yield kit.finished(inp)

    await run_once(store, kit, script, kit.run_input())
    message = (await kit.history(store, "u", "thread-1"))[-1]
    assert message.content == "pair split: \U0001f680 lone: \ufffd!"
    assert message.metadata[SURROGATES_NOTE] == 1
    assert message.status is MessageStatus.COMPLETE


async def test_content_for_a_message_never_started_is_kept(store, kit):
    async def script(inp):
        yield TextMessageContentEvent(message_id="orphan", delta="still ")
        yield TextMessageContentEvent(message_id="orphan", delta="kept")

    await run_once(store, kit, script, kit.run_input())
    message = (await kit.history(store, "u", "thread-1"))[-1]
    assert (message.agui_id, message.content, message.status) == (
        "orphan",
        "still kept",
        MessageStatus.COMPLETE,
    )
