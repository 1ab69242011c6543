"""A LangChain tool-calling agent over three turns, with the store reopened before turn 3.

The agent is langchain-core's own parts: ``GenericFakeChatModel`` (the fake chat model
LangChain tests with), a ``@tool``, the model -> tool -> model loop, and
``RunnableWithMessageHistory`` keeping the history in ``ThreadkeepChatMessageHistory``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory

pytestmark = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated:"
    "langchain_core._api.deprecation.LangChainDeprecationWarning"
)

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


@tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def _agent(model: GenericFakeChatModel, seen: list[list[BaseMessage]]) -> RunnableLambda:
    def run(messages: list[BaseMessage]) -> list[BaseMessage]:
        new: list[BaseMessage] = []
        while True:
            seen.append(list(messages) + new)
            reply = model.invoke(list(messages) + new)
            new.append(reply)
            if not reply.tool_calls:
                return new
            new.extend(get_weather.invoke(call) for call in reply.tool_calls)

    return RunnableLambda(run)


def _with_history(agent: RunnableLambda, store: Any) -> RunnableWithMessageHistory:
    return RunnableWithMessageHistory(
        agent, lambda session_id: ThreadkeepChatMessageHistory(session_id, store=store)
    )


@pytest.mark.parametrize("is_async", [False, True])
async def test_three_turns_with_a_tool_call_and_a_reopened_store(
    backend, is_async, check_weather_chat
) -> None:
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w", "type": "tool_call"}
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(
                    content="Hello! Ask me about the weather.", id="ai-1", usage_metadata=USAGE
                ),
                AIMessage(content="", id="ai-2", tool_calls=[call], usage_metadata=USAGE),
                AIMessage(content="It is sunny in Paris.", id="ai-3", usage_metadata=USAGE),
                AIMessage(content="You asked about Paris.", id="ai-4"),
            ]
        )
    )
    seen: list[list[BaseMessage]] = []
    config = {"configurable": {"session_id": "e2e-weather"}}

    async def turn(chain: RunnableWithMessageHistory, text: str) -> list[BaseMessage]:
        if is_async:
            return await chain.ainvoke([HumanMessage(content=text)], config)
        return chain.invoke([HumanMessage(content=text)], config)

    with backend.sync_store() as store:
        chain = _with_history(_agent(model, seen), store)
        assert (await turn(chain, "hi"))[-1].content == "Hello! Ask me about the weather."
        second = await turn(chain, "weather in Paris?")
        assert [type(m) for m in second] == [AIMessage, ToolMessage, AIMessage]
        assert second[1] == ToolMessage(
            content="sunny in Paris", tool_call_id="call_w", name="get_weather"
        )
        after_two = ThreadkeepChatMessageHistory("e2e-weather", store=store).messages
        assert len(after_two) == 6

    with backend.sync_store() as reopened:  # a new store on the same database
        chain = _with_history(_agent(model, seen), reopened)
        third = await turn(chain, "what did I ask?")
        assert third[-1].content == "You asked about Paris."
        assert seen[-1] == [*after_two, HumanMessage(content="what did I ask?")]
        assert seen[-1][3].tool_calls == [call]
        assert seen[-1][3].usage_metadata == USAGE

        chat = reopened.find_chat("langchain", "e2e-weather")
        assert chat is not None
        messages = reopened.list_messages(chat.chat_id, limit=200).items
        check_weather_chat(messages)
