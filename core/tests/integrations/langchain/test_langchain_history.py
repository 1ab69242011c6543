"""LangChain's own chat-history tests, run against ``ThreadkeepChatMessageHistory``.

Ported from langchain-ai/langchain, langchain-core 1.8.1 (the sdist on PyPI):
``tests/unit_tests/chat_history/test_chat_history.py`` (the tests of a history backend's
behaviour) and ``tests/unit_tests/runnables/test_history.py`` (``RunnableWithMessageHistory``
over a history backend). Adapted only by swapping the backend under test:
``InMemoryChatMessageHistory()`` in the session factories became ``make_history(session_id)``
(a ``ThreadkeepChatMessageHistory`` on SQLite, PostgreSQL or MongoDB), and assertions that
compared the factory's dict of ``InMemoryChatMessageHistory`` objects now compare each
history's ``messages``; the test bodies' repeated lambdas became the helpers ``_you_said``
and ``_history_and_input``, and the sync/async twins of ``test_output_message`` and
``test_using_custom_config_specs`` one test parametrized by ``is_async``. Not ported: tests
of ``BaseChatMessageHistory`` subclasses defined in the test itself, deprecation notices,
and input/output schema tests (no backend involved).

Original licence (MIT)::

    Copyright (c) LangChain, Inc.

    Permission is hereby granted, free of charge, to any person obtaining a copy
    of this software and associated documentation files (the "Software"), to deal
    in the Software without restriction, including without limitation the rights
    to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
    copies of the Software, and to permit persons to whom the Software is
    furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all
    copies or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
    IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
    FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
    AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
    LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
    SOFTWARE.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.runnables.utils import ConfigurableFieldSpec

# This module is the compatibility test suite for `RunnableWithMessageHistory`,
# so constructing that deprecated class is the behavior under test.
pytestmark = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated. Use LangGraph's built-in "
    "persistence instead.:"
    "langchain_core._api.deprecation.LangChainDeprecationWarning"
)


# -- tests/unit_tests/chat_history/test_chat_history.py -------------------------------------


async def test_history_initialization(make_history) -> None:
    messages = [HumanMessage(content="Hello")]
    history = make_history("init")
    history.add_messages(messages)  # (adapted) the in-memory class took them in __init__
    assert await history.aget_messages() == messages
    other_history = make_history("other")
    await other_history.aadd_messages([HumanMessage(content="World")])
    assert history.messages == messages
    await history.aclear()
    assert history.messages == []
    assert other_history.messages == [HumanMessage(content="World")]


def test_add_message_and_add_messages(make_history) -> None:
    chat_history = make_history("add")
    chat_history.add_message(HumanMessage(content="Hello"))
    assert len(chat_history.messages) == 1
    assert chat_history.messages[0] == HumanMessage(content="Hello")
    chat_history.add_message(HumanMessage(content="World"))
    assert len(chat_history.messages) == 2
    assert chat_history.messages[1] == HumanMessage(content="World")

    chat_history.add_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert len(chat_history.messages) == 4
    assert chat_history.messages[2] == HumanMessage(content="Hello")
    assert chat_history.messages[3] == HumanMessage(content="World")


async def test_async_interface(make_history) -> None:
    """Test async interface for BaseChatMessageHistory."""
    chat_history = make_history("async")
    await chat_history.aadd_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert await chat_history.aget_messages() == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
    ]
    await chat_history.aadd_messages([HumanMessage(content="!")])
    assert await chat_history.aget_messages() == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
        HumanMessage(content="!"),
    ]
    await chat_history.aclear()
    assert await chat_history.aget_messages() == []


# -- tests/unit_tests/runnables/test_history.py ----------------------------------------------


def test_interfaces(make_history) -> None:
    history = make_history("interfaces")
    history.add_message(SystemMessage(content="system"))
    history.add_message(HumanMessage(content="human 1"))
    history.add_message(AIMessage(content="ai"))
    assert str(history) == "System: system\nHuman: human 1\nAI: ai"


@pytest.fixture
def get_get_session_history(make_history):
    def _get_get_session_history(*, store=None):
        chat_history_store = store if store is not None else {}

        def get_session_history(session_id: str, **_kwargs: Any):
            if session_id not in chat_history_store:
                chat_history_store[session_id] = make_history(session_id)
            return chat_history_store[session_id]

        return get_session_history

    return _get_get_session_history


def _messages_of(store) -> dict:
    """(adapted) What the original compared: the histories' messages, by key."""
    return {key: history.messages for key, history in store.items()}


def _you_said(messages) -> str:
    return "you said: " + "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))


def test_input_messages(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](_you_said)
    store: dict = {}
    get_session_history = get_get_session_history(store=store)
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config: RunnableConfig = {"configurable": {"session_id": "1"}}
    output = with_history.invoke([HumanMessage(content="hello")], config)
    assert output == "you said: hello"
    output = with_history.invoke([HumanMessage(content="good bye")], config)
    assert output == "you said: hello\ngood bye"
    output = [*with_history.stream([HumanMessage(content="hi again")], config)]
    assert output == ["you said: hello\ngood bye\nhi again"]
    assert _messages_of(store) == {
        "1": [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="good bye"),
            AIMessage(content="you said: hello\ngood bye"),
            HumanMessage(content="hi again"),
            AIMessage(content="you said: hello\ngood bye\nhi again"),
        ]
    }


async def test_input_messages_async(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](_you_said)
    store: dict = {}
    get_session_history = get_get_session_history(store=store)
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config = {"session_id": "1_async"}
    output = await with_history.ainvoke([HumanMessage(content="hello")], config)  # type: ignore[arg-type]
    assert output == "you said: hello"
    output = await with_history.ainvoke([HumanMessage(content="good bye")], config)  # type: ignore[arg-type]
    assert output == "you said: hello\ngood bye"
    output = [
        c
        async for c in with_history.astream([HumanMessage(content="hi again")], config)  # type: ignore[arg-type]
    ]
    assert output == ["you said: hello\ngood bye\nhi again"]
    assert {k: await h.aget_messages() for k, h in store.items()} == {
        "1_async": [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="good bye"),
            AIMessage(content="you said: hello\ngood bye"),
            HumanMessage(content="hi again"),
            AIMessage(content="you said: hello\ngood bye\nhi again"),
        ]
    }


def test_input_dict(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](lambda params: _you_said(params["messages"]))
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="messages"
    )
    config: RunnableConfig = {"configurable": {"session_id": "2"}}
    output = with_history.invoke({"messages": [HumanMessage(content="hello")]}, config)
    assert output == "you said: hello"
    output = with_history.invoke({"messages": [HumanMessage(content="good bye")]}, config)
    assert output == "you said: hello\ngood bye"


async def test_input_dict_async(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](lambda params: _you_said(params["messages"]))
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable, get_session_history, input_messages_key="messages"
    )
    config: RunnableConfig = {"configurable": {"session_id": "2_async"}}
    output = await with_history.ainvoke({"messages": [HumanMessage(content="hello")]}, config)
    assert output == "you said: hello"
    output = await with_history.ainvoke({"messages": [HumanMessage(content="good bye")]}, config)
    assert output == "you said: hello\ngood bye"


def _history_and_input(params) -> str:
    return "you said: " + "\n".join(
        [str(m.content) for m in params["history"] if isinstance(m, HumanMessage)]
        + [params["input"]]
    )


def test_input_dict_with_history_key(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](_history_and_input)
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: RunnableConfig = {"configurable": {"session_id": "3"}}
    output = with_history.invoke({"input": "hello"}, config)
    assert output == "you said: hello"
    output = with_history.invoke({"input": "good bye"}, config)
    assert output == "you said: hello\ngood bye"


async def test_input_dict_with_history_key_async(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, str](_history_and_input)
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: RunnableConfig = {"configurable": {"session_id": "3_async"}}
    output = await with_history.ainvoke({"input": "hello"}, config)
    assert output == "you said: hello"
    output = await with_history.ainvoke({"input": "good bye"}, config)
    assert output == "you said: hello\ngood bye"


@pytest.mark.parametrize("is_async", [False, True])
async def test_output_message(get_get_session_history, is_async) -> None:
    runnable = RunnableLambda[Any, AIMessage](
        lambda params: AIMessage(content=_history_and_input(params))
    )
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: RunnableConfig = {"configurable": {"session_id": f"4{'_async' if is_async else ''}"}}
    invoke = with_history.ainvoke if is_async else with_history.invoke
    output = invoke({"input": "hello"}, config)
    output = await output if is_async else output
    assert output == AIMessage(content="you said: hello")
    output = invoke({"input": "good bye"}, config)
    output = await output if is_async else output
    assert output == AIMessage(content="you said: hello\ngood bye")


class LengthChatModel(BaseChatModel):
    """A fake chat model that returns the length of the messages passed in."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Top Level call."""
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=str(len(messages))))]
        )

    @property
    def _llm_type(self) -> str:
        return "length-fake-chat-model"


def test_input_messages_output_message(get_get_session_history) -> None:
    runnable = LengthChatModel()
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config: RunnableConfig = {"configurable": {"session_id": "5"}}
    output = with_history.invoke([HumanMessage(content="hi")], config)
    assert output.content == "1"
    output = with_history.invoke([HumanMessage(content="hi")], config)
    assert output.content == "3"


async def test_input_messages_output_message_async(get_get_session_history) -> None:
    runnable = LengthChatModel()
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(runnable, get_session_history)
    config: RunnableConfig = {"configurable": {"session_id": "5_async"}}
    output = await with_history.ainvoke([HumanMessage(content="hi")], config)
    assert output.content == "1"
    output = await with_history.ainvoke([HumanMessage(content="hi")], config)
    assert output.content == "3"


def test_output_messages(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, list[AIMessage]](
        lambda params: [AIMessage(content=_history_and_input(params))]
    )
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: RunnableConfig = {"configurable": {"session_id": "6"}}
    output = with_history.invoke({"input": "hello"}, config)
    assert output == [AIMessage(content="you said: hello")]
    output = with_history.invoke({"input": "good bye"}, config)
    assert output == [AIMessage(content="you said: hello\ngood bye")]


async def test_output_messages_async(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, list[AIMessage]](
        lambda params: [AIMessage(content=_history_and_input(params))]
    )
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
    )
    config: RunnableConfig = {"configurable": {"session_id": "6_async"}}
    output = await with_history.ainvoke({"input": "hello"}, config)
    assert output == [AIMessage(content="you said: hello")]
    output = await with_history.ainvoke({"input": "good bye"}, config)
    assert output == [AIMessage(content="you said: hello\ngood bye")]


def test_output_dict(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, dict[str, list[AIMessage]]](
        lambda params: {"output": [AIMessage(content=_history_and_input(params))]}
    )
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output",
    )
    config: RunnableConfig = {"configurable": {"session_id": "7"}}
    output = with_history.invoke({"input": "hello"}, config)
    assert output == {"output": [AIMessage(content="you said: hello")]}
    output = with_history.invoke({"input": "good bye"}, config)
    assert output == {"output": [AIMessage(content="you said: hello\ngood bye")]}


async def test_output_dict_async(get_get_session_history) -> None:
    runnable = RunnableLambda[Any, dict[str, list[AIMessage]]](
        lambda params: {"output": [AIMessage(content=_history_and_input(params))]}
    )
    get_session_history = get_get_session_history()
    with_history = RunnableWithMessageHistory(
        runnable,
        get_session_history,
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output",
    )
    config: RunnableConfig = {"configurable": {"session_id": "7_async"}}
    output = await with_history.ainvoke({"input": "hello"}, config)
    assert output == {"output": [AIMessage(content="you said: hello")]}
    output = await with_history.ainvoke({"input": "good bye"}, config)
    assert output == {"output": [AIMessage(content="you said: hello\ngood bye")]}


def _custom_config_runnable(make_history):
    def _fake_llm(params: dict[str, Any]) -> list[BaseMessage]:
        return [AIMessage(content=_you_said(params["messages"]))]

    store: dict = {}

    def get_session_history(user_id: str, conversation_id: str):
        if (user_id, conversation_id) not in store:
            store[user_id, conversation_id] = make_history(conversation_id, user_id=user_id)
        return store[user_id, conversation_id]

    with_message_history = RunnableWithMessageHistory(
        RunnableLambda(_fake_llm),
        get_session_history=get_session_history,
        input_messages_key="messages",
        history_messages_key="history",
        history_factory_config=[
            ConfigurableFieldSpec(
                id="user_id",
                annotation=str,
                name="User ID",
                description="Unique identifier for the user.",
                default="",
                is_shared=True,
            ),
            ConfigurableFieldSpec(
                id="conversation_id",
                annotation=str,
                name="Conversation ID",
                description="Unique identifier for the conversation.",
                default=None,
                is_shared=True,
            ),
        ],
    )
    return with_message_history, store


@pytest.mark.parametrize("is_async", [False, True])
async def test_using_custom_config_specs(make_history, is_async) -> None:
    """Test that we can configure which keys should be passed to the session factory."""
    with_message_history, store = _custom_config_runnable(make_history)
    invoke = with_message_history.ainvoke if is_async else with_message_history.invoke

    async def call(text: str, user: str) -> Any:
        result = invoke(
            {"messages": [HumanMessage(content=text)]},
            {"configurable": {"user_id": user, "conversation_id": "1"}},
        )
        return await result if is_async else result

    assert await call("hello", "user1") == [AIMessage(content="you said: hello")]
    assert _messages_of(store) == {
        ("user1", "1"): [HumanMessage(content="hello"), AIMessage(content="you said: hello")]
    }
    assert await call("goodbye", "user1") == [AIMessage(content="you said: goodbye")]
    assert _messages_of(store) == {
        ("user1", "1"): [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="goodbye"),
            AIMessage(content="you said: goodbye"),
        ]
    }
    assert await call("meow", "user2") == [AIMessage(content="you said: meow")]
    assert _messages_of(store) == {
        ("user1", "1"): [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="goodbye"),
            AIMessage(content="you said: goodbye"),
        ],
        ("user2", "1"): [HumanMessage(content="meow"), AIMessage(content="you said: meow")],
    }
