"""Pydantic AI message histories on threadkeep: exact round trips, typed records, real agents.

``test_run_with_history_new`` follows Pydantic AI's own test of the same name
(pydantic/pydantic-ai, ``tests/test_agent.py``; MIT License, Copyright (c) Pydantic Services
Inc. 2024 to present) with the history stored in and loaded from threadkeep between the runs;
its ``inline-snapshot`` assertions are replaced by the structural ones of the original (part
kinds, ``new_messages() == all_messages()[-2:]``, the output). Pydantic AI has no session
interface with a contract suite of its own: the application passes ``message_history=`` and
stores ``new_messages()``, which is what :class:`ThreadkeepMessageHistory` does.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from threadkeep import InvalidArgument, Role
from threadkeep.integrations.pydantic_ai import (
    METADATA_KEY,
    ThreadkeepMessageHistory,
    from_threadkeep,
    to_threadkeep,
)

T = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)

MESSAGES: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart(content="Be brief.", timestamp=T),
            UserPromptPart(content="hi ünïcödé 😊", timestamp=T),
            UserPromptPart(
                content=[
                    "look:",
                    ImageUrl(url="https://example.com/a.png"),
                    BinaryContent(data=b"\x89PNG\x00\xff", media_type="image/png"),
                ],
                timestamp=T,
            ),
        ],
        instructions="Answer in French.",
        timestamp=T,
    ),
    ModelResponse(
        parts=[
            ThinkingPart(content="The user greets; check weather.", signature="sig-abc"),
            TextPart(content="Let me check. "),
            ToolCallPart(tool_name="get_weather", args={"city": "Paris"}, tool_call_id="call_1"),
            ToolCallPart(tool_name="get_time", args='{"tz": "CET"}', tool_call_id="call_2"),
            TextPart(content="One moment."),
        ],
        model_name="fake-model",
        timestamp=T,
        provider_name="fake",
        provider_response_id="resp_1",
        finish_reason="tool_call",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(
                tool_name="get_weather", content="sunny", tool_call_id="call_1", timestamp=T
            ),
            ToolReturnPart(
                tool_name="get_time",
                content={"time": "10:00", "ok": True},
                tool_call_id="call_2",
                timestamp=T,
            ),
        ],
        timestamp=T,
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(
                tool_name="get_weather",
                content="bad args",
                tool_call_id="call_3",
                outcome="retried",
                timestamp=T,
            )
        ],
        timestamp=T,
    ),
    ModelResponse(parts=[TextPart(content="Il fait beau.")], model_name="fake-model", timestamp=T),
    ModelRequest(parts=[], timestamp=T),
]


def _json(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def test_messages_round_trip_exactly_through_the_type_adapter() -> None:
    stored = to_threadkeep(MESSAGES)
    reread = [type(m).model_validate_json(m.model_dump_json()) for m in stored]  # as drivers keep
    assert _json(from_threadkeep(reread)) == _json(MESSAGES)
    assert all("message" not in m.metadata[METADATA_KEY] for m in stored)  # none fell back


def test_tool_calls_results_and_thinking_are_typed_records() -> None:
    stored = to_threadkeep(MESSAGES)
    assert [m.role for m in stored] == [
        Role.SYSTEM, Role.USER, Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.TOOL,
        Role.ASSISTANT, Role.USER,
    ]  # fmt: skip
    response = stored[3]
    assert response.content == "Let me check. One moment."
    assert [(c.agui_id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}'),
        ("call_2", "get_time", '{"tz": "CET"}'),
    ]
    assert [(r.content, r.encrypted_value) for r in response.reasonings] == [
        ("The user greets; check weather.", "sig-abc")
    ]
    assert [(m.tool_call_ref, m.content) for m in stored[4:6]] == [
        ("call_1", "sunny"),
        ("call_2", ""),
    ]
    assert stored[6].tool_call_ref == "call_3"
    assert stored[0].content == "Be brief."


async def test_saved_and_loaded_on_each_backend(backend) -> None:
    with backend.sync_store() as store:
        history = ThreadkeepMessageHistory("conv", store=store)
        await history.save(MESSAGES[:2])
        history.save_sync(MESSAGES[2:])
        assert _json(await history.load()) == _json(MESSAGES)
        assert _json(history.load_sync()) == _json(MESSAGES)
        await history.clear()
        assert await history.load() == []
        chat = store.find_chat("pydantic-ai", "conv")
        assert chat is not None
        assert (
            len(store.list_messages(chat.chat_id, limit=200).items)
            == len(to_threadkeep(MESSAGES)) + 1
        )


async def test_messages_with_megabytes_of_untyped_data_round_trip(backend) -> None:
    # An inline BinaryContent or a large tool return has no typed place the store bounds by
    # its payload limit; such messages must not be refused with PayloadTooLarge.
    image = BinaryContent(data=b"\x89PNG" * 400_000, media_type="image/png")  # 1.6 MB
    large: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(content=["look", image], timestamp=T)], timestamp=T),
        ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name="snap",
                    content={"png": "A" * 2_000_000},
                    tool_call_id="c",
                    timestamp=T,
                )
            ],
            timestamp=T,
        ),
    ]
    with backend.sync_store() as store:
        history = ThreadkeepMessageHistory("large", store=store)
        await history.save(large)
        assert _json(await history.load()) == _json(large)


def test_bad_input_is_a_typed_error() -> None:
    history = ThreadkeepMessageHistory("s", store="memory://")
    with pytest.raises(InvalidArgument):
        history.save_sync("not messages")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        ThreadkeepMessageHistory("s", store="memory://", clear="wipe")  # type: ignore[arg-type]


async def test_run_with_history_new(backend) -> None:
    m = TestModel()
    agent = Agent(m, system_prompt="Foobar")

    @agent.tool_plain
    async def ret_a(x: str) -> str:
        return f"{x}-apple"

    with backend.sync_store() as store:
        history = ThreadkeepMessageHistory("history-new", store=store)
        result1 = await agent.run("Hello")
        await history.save(result1.new_messages())

        # if we pass new_messages, system prompt is inserted before the message_history messages
        loaded = await history.load()
        assert _json(loaded) == _json(result1.new_messages())
        result2 = await agent.run("Hello again", message_history=loaded)
        assert result2.new_messages() == result2.all_messages()[-2:]
        assert result2.output == '{"ret_a":"a-apple"}'
        new_msg_part_kinds = [
            (m.kind, [p.part_kind for p in m.parts]) for m in result2.all_messages()
        ]
        assert new_msg_part_kinds == [
            ("request", ["system-prompt", "user-prompt"]),
            ("response", ["tool-call"]),
            ("request", ["tool-return"]),
            ("response", ["text"]),
            ("request", ["user-prompt"]),
            ("response", ["text"]),
        ]
        assert result2.new_messages_json().startswith(b'[{"parts":[{"content":"Hello again",')


async def test_three_turns_with_a_tool_call_and_a_reopened_store(backend) -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(content=f"It is {last.content}.")])
        prompt = str(last.content)
        if "weather" in prompt:
            return ModelResponse(
                parts=[
                    ThinkingPart(content="needs the tool", signature="sig-1"),
                    ToolCallPart(
                        tool_name="get_weather", args={"city": "Paris"}, tool_call_id="call_w"
                    ),
                ]
            )
        return ModelResponse(parts=[TextPart(content=f"You said {prompt!r}.")])

    agent = Agent(FunctionModel(model))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    with backend.sync_store() as store:
        history = ThreadkeepMessageHistory("e2e", store=store)
        first = await agent.run("hi", message_history=await history.load())
        await history.save(first.new_messages())

        def sync_turn():  # a script's turn: run_sync and the blocking methods, in a thread
            loop = asyncio.new_event_loop()  # run_sync's loop in this thread, closed after
            asyncio.set_event_loop(loop)
            try:
                result = agent.run_sync("weather in Paris?", message_history=history.load_sync())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
            history.save_sync(result.new_messages())
            return result

        second = await asyncio.to_thread(sync_turn)
        assert second.output == "It is sunny in Paris."
        after_two = second.all_messages()

    with backend.sync_store() as reopened:  # a new store on the same database
        history = ThreadkeepMessageHistory("e2e", store=reopened)
        loaded = await history.load()
        assert _json(loaded) == _json(after_two)
        third = await agent.run("what did I ask?", message_history=loaded)
        await history.save(third.new_messages())
        assert _json(seen[-1][: len(after_two)]) == _json(after_two)

        chat = reopened.find_chat("pydantic-ai", "e2e")
        assert chat is not None
        messages = reopened.list_messages(chat.chat_id, limit=200).items
        calls = [c for m in messages for c in m.tool_calls]
        assert [(c.agui_id, c.name) for c in calls] == [("call_w", "get_weather")]
        results = [m for m in messages if m.role is Role.TOOL]
        assert [(r.tool_call_ref, r.content) for r in results] == [("call_w", "sunny in Paris")]
        assert [r.encrypted_value for m in messages for r in m.reasonings] == ["sig-1"]
        assert [m.content for m in messages if m.role is Role.USER] == [
            "hi",
            "weather in Paris?",
            "what did I ask?",
        ]
