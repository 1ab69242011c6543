"""LangChain v1's own agent, ``create_agent``, over three turns with the store reopened.

The agent is ``langchain.agents.create_agent`` (the LangGraph model -> tools loop LangChain
ships), with ``GenericFakeChatModel`` (the fake chat model LangChain tests with) as its model,
so nothing touches the network. The history lives in ``ThreadkeepChatMessageHistory``: each
turn's input is the stored history plus the new ``HumanMessage``, and the run's new messages
(that human message, the model's replies and the tool results) are appended after it. Before
turn 3 the store, the history, the model and the agent are all made anew, as after a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from pydantic import Field

from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory
from threadkeep.sync import SyncStore

SESSION = "e2e-create-agent"
SYSTEM = "You answer questions about the weather."
USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
CALL = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w", "type": "tool_call"}


@tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


class ToolCallingFakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that ``create_agent`` can bind tools to, recording its inputs.

    The replies (and their tool calls) are scripted, so binding the tools changes nothing:
    ``bind_tools`` returns the model itself. ``calls`` holds the messages of every model call.
    """

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFakeModel:
        """Return this model: its scripted replies already name the tools."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def _agent(replies: list[AIMessage]) -> tuple[Any, ToolCallingFakeModel]:
    model = ToolCallingFakeModel(messages=iter(replies))
    return create_agent(model, tools=[get_weather], system_prompt=SYSTEM), model


async def _turn(agent: Any, store: SyncStore, text: str, is_async: bool) -> list[BaseMessage]:
    """Run one turn on the stored history; store and return the run's new messages."""
    history = ThreadkeepChatMessageHistory(SESSION, store=store)
    past = await history.aget_messages() if is_async else history.messages
    state = {"messages": [*past, HumanMessage(content=text)]}
    result = await agent.ainvoke(state) if is_async else agent.invoke(state)
    new: list[BaseMessage] = result["messages"][len(past) :]
    if is_async:
        await history.aadd_messages(new)
    else:
        history.add_messages(new)
    return new


@pytest.mark.parametrize("is_async", [False, True])
async def test_create_agent_three_turns_with_a_tool_call_and_a_reopened_store(
    backend, is_async, check_weather_chat
) -> None:
    agent, model = _agent(
        [
            AIMessage(content="Hello! Ask me about the weather.", usage_metadata=USAGE),
            AIMessage(content="", tool_calls=[CALL], usage_metadata=USAGE),
            AIMessage(content="It is sunny in Paris.", usage_metadata=USAGE),
        ]
    )
    with backend.sync_store() as store:
        first = await _turn(agent, store, "hi", is_async)
        assert [type(m) for m in first] == [HumanMessage, AIMessage]
        second = await _turn(agent, store, "weather in Paris?", is_async)
        assert [type(m) for m in second] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
        assert second[1].tool_calls == [CALL]
        assert (second[2].tool_call_id, second[2].content) == ("call_w", "sunny in Paris")
        assert second[3].content == "It is sunny in Paris."
        # the agent's own loop fed the tool's result back to the model within turn 2
        assert model.calls[-1][1:] == [*first, *second[:3]]

    with backend.sync_store() as reopened:  # a new store on the same database
        after_two = ThreadkeepChatMessageHistory(SESSION, store=reopened).messages
        assert after_two == [*first, *second]  # exact round trip, ids included
        agent, model = _agent([AIMessage(content="You asked about Paris.")])
        third = await _turn(agent, reopened, "what did I ask?", is_async)
        assert [m.content for m in third] == ["what did I ask?", "You asked about Paris."]
        (seen,) = model.calls
        assert seen[0] == SystemMessage(content=SYSTEM)
        assert seen[1:-1] == after_two
        assert (type(seen[-1]), seen[-1].content) == (HumanMessage, "what did I ask?")
        assert seen[4].tool_calls == [CALL]
        assert seen[4].usage_metadata == USAGE

    async with backend.store() as plain:  # the plain threadkeep API, no LangChain
        chat = await plain.find_chat("langchain", SESSION)
        assert chat is not None
        messages = (await plain.list_messages(chat.chat_id, limit=200)).items
    check_weather_chat(messages)
    assert messages[-1].content == "You asked about Paris."
