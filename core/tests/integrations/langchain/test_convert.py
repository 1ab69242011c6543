"""LangChain messages round-trip exactly and are stored typed where they map."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from threadkeep import InvalidArgument, MessageStatus, Role
from threadkeep.integrations.langchain import (
    ThreadkeepChatMessageHistory,
    from_threadkeep,
    to_threadkeep,
)

USAGE = {
    "input_tokens": 12,
    "output_tokens": 7,
    "total_tokens": 19,
    "input_token_details": {"cache_read": 4},
    "output_token_details": {"reasoning": 3},
}

MESSAGES = [
    SystemMessage(content="Be brief.", id="sys-1"),
    HumanMessage(content="hi ünïcödé 😊", name="ana", additional_kwargs={"lang": "pt"}),
    HumanMessage(
        content=[
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]
    ),
    AIMessage(
        content="",
        id="run-1",
        tool_calls=[
            {
                "name": "get_weather",
                "args": {"city": "Paris", "days": 2},
                "id": "call_1",
                "type": "tool_call",
            },
            {"name": "get_time", "args": {}, "id": "call_2", "type": "tool_call"},
        ],
        usage_metadata=USAGE,
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        additional_kwargs={"refusal": None},
    ),
    AIMessage(
        content="x",
        invalid_tool_calls=[
            {
                "name": "bad",
                "args": "{not json",
                "id": "call_3",
                "error": "oops",
                "type": "invalid_tool_call",
            }
        ],
    ),
    ToolMessage(content="sunny", tool_call_id="call_1", name="get_weather"),
    ToolMessage(content="boom", tool_call_id="call_2", status="error", artifact={"trace": [1, 2]}),
    ToolMessage(content=[{"type": "text", "text": "listed"}], tool_call_id="call_4"),
    AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "thinking"},
            {"type": "text", "text": "It is sunny."},
        ],
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    ),
    ChatMessage(content="custom role", role="critic"),
    FunctionMessage(content="legacy", name="fn"),
    AIMessageChunk(content="partial", id="chunk-1"),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_each_message_round_trips_exactly(message) -> None:
    stored = to_threadkeep(message)
    (back,) = from_threadkeep(stored)
    assert back == message
    assert type(back) is type(message)
    reread = type(stored).model_validate_json(stored.model_dump_json())  # what drivers keep
    assert from_threadkeep(reread) == [message]


def test_what_maps_is_stored_typed() -> None:
    ai = to_threadkeep(MESSAGES[3])
    assert ai.role is Role.ASSISTANT
    assert [(c.agui_id, c.name) for c in ai.tool_calls] == [
        ("call_1", "get_weather"),
        ("call_2", "get_time"),
    ]
    assert ai.tool_calls[0].arguments == '{"city": "Paris", "days": 2}'
    assert ai.tokens == 19
    tool = to_threadkeep(MESSAGES[6])
    assert (tool.role, tool.tool_call_ref, tool.status) == (
        Role.TOOL,
        "call_2",
        MessageStatus.ERRORED,
    )
    assert to_threadkeep(MESSAGES[5]).content == "sunny"
    assert to_threadkeep(MESSAGES[2]).content == "what is this?"
    assert to_threadkeep(MESSAGES[0]).role is Role.SYSTEM
    assert "tool_calls" not in to_threadkeep(MESSAGES[3]).metadata["langchain"]["rest"]


def test_bad_input_is_a_typed_error(tmp_path) -> None:
    history = ThreadkeepChatMessageHistory("s", store=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(InvalidArgument):
        history.add_messages(HumanMessage(content="not a list"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        history.add_messages(["a string"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        ThreadkeepChatMessageHistory("", store="memory://")


async def test_every_message_round_trips_through_each_backend(backend) -> None:
    with backend.sync_store() as store:
        history = ThreadkeepChatMessageHistory("all", store=store)
        history.add_messages(MESSAGES[:6])
        await history.aadd_messages(MESSAGES[6:])
        assert history.messages == MESSAGES
        assert await history.aget_messages() == MESSAGES
        history.clear()  # start over: the model sees nothing, the history stays
        assert history.messages == []
        chat = store.find_chat("langchain", "all")
        assert chat is not None
        assert len(store.list_messages(chat.chat_id, limit=200).items) == len(MESSAGES) + 1

        deleting = ThreadkeepChatMessageHistory("del", store=store, clear="delete")
        deleting.add_message(HumanMessage(content="x"))
        await deleting.aclear()
        assert store.find_chat("langchain", "del") is None
        assert deleting.messages == []


_IMAGE = "data:image/png;base64," + "iVBORw0KGgo" * 200_000  # 2.2 MB inline image


async def test_messages_with_megabytes_of_untyped_data_round_trip(backend) -> None:
    # Inline images in content blocks and large artifacts have no typed place the store
    # bounds by its payload limit; they must not be refused with PayloadTooLarge.
    large = [
        HumanMessage(content=[{"type": "image_url", "image_url": {"url": _IMAGE}}]),
        AIMessage(
            content="",
            tool_calls=[{"name": "snap", "args": {}, "id": "call_big", "type": "tool_call"}],
        ),
        ToolMessage(content="ok", tool_call_id="call_big", artifact={"png": _IMAGE}),
    ]
    with backend.sync_store() as store:
        history = ThreadkeepChatMessageHistory("large", store=store)
        history.add_messages(large)
        assert history.messages == large
        chat = store.find_chat("langchain", "large")
        assert chat is not None
        stored = store.list_messages(chat.chat_id, limit=10).items
        assert stored[-1].role is Role.TOOL
        assert stored[-1].tool_call_ref == "call_big"  # still linked to its call


async def test_an_async_store_serves_the_async_methods_only(tmp_path) -> None:
    import threadkeep

    async with threadkeep.open_store(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as store:
        history = ThreadkeepChatMessageHistory("s", store=store)
        await history.aadd_messages([HumanMessage(content="hi")])
        assert await history.aget_messages() == [HumanMessage(content="hi")]
        with pytest.raises(InvalidArgument, match="blocking calls need"):
            _ = history.messages


async def test_messages_of_other_clients_read_as_langchain_messages(backend) -> None:
    with backend.sync_store() as store:
        chat = store.create_chat("langchain", "mixed")
        store.append_messages(
            chat.chat_id,
            [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"agui_id": "c1", "name": "f", "arguments": '{"a": 1}'},
                        {"agui_id": "c2", "name": "g", "arguments": "not json"},
                    ],
                },
                {"role": "tool", "tool_call_ref": "c1", "content": "r", "status": "errored"},
                {"role": "reasoning", "content": "hidden"},
            ],
        )
        history = ThreadkeepChatMessageHistory("mixed", store=store)
        got = history.messages
        assert got[:2] == [SystemMessage(content="sys"), HumanMessage(content="q")]
        assert got[2].tool_calls == [
            {"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"}
        ]
        assert got[2].invalid_tool_calls[0]["args"] == "not json"
        assert got[3] == ToolMessage(content="r", tool_call_id="c1", status="error")
        assert len(got) == 4


def test_a_missing_framework_names_the_extra(monkeypatch) -> None:
    import sys

    from threadkeep.integrations._requires import require_framework

    monkeypatch.setitem(sys.modules, "langchain_core", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'threadkeep\[langchain\]'$"):
        require_framework("langchain_core", "LangChain (langchain-core)", "langchain")
