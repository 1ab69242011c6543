"""The Agents SDK's own session tests, run against ``ThreadkeepSession`` on every backend.

Ported from openai/openai-agents-python v0.24.0 (the sdist on PyPI): ``tests/memory/
test_session.py`` and ``tests/memory/test_session_limit.py``. Adapted only by swapping the
backend under test: ``SQLiteSession(session_id, db_path)`` became ``make_session(session_id)``
(a ``ThreadkeepSession`` on SQLite, PostgreSQL or MongoDB), the temporary directories went
with it, and the helpers come from the ``sdk`` fixture. Not ported: tests of SQLiteSession's
own machinery (its file locks, per-thread connections, corrupt JSON rows, dropped tables,
``_await_mutation``), which have no counterpart in a threadkeep store.

Original licence (MIT)::

    Copyright (c) 2025 OpenAI

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

import asyncio
import concurrent.futures
from typing import cast

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, TResponseInputItem
from agents.testing import ScriptedModel

from threadkeep import BackendUnavailable

RUNNER_METHODS = ["run", "run_sync", "run_streamed"]


# -- tests/memory/test_session.py ------------------------------------------------------------


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_basic_functionality_parametrized(runner_method, make_session, sdk):
    """Test basic session memory functionality across all runner methods."""
    session = make_session("test_session_123")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    # First turn
    model.enqueue([sdk.get_text_message("San Francisco")])
    result1 = await sdk.run_agent_async(
        runner_method, agent, "What city is the Golden Gate Bridge in?", session=session
    )
    assert result1.final_output == "San Francisco"

    # Second turn - should have conversation history
    model.enqueue([sdk.get_text_message("California")])
    result2 = await sdk.run_agent_async(
        runner_method, agent, "What state is it in?", session=session
    )
    assert result2.final_output == "California"

    # The model should have received the full conversation history
    last_input = model.calls[-1].input
    assert len(last_input) > 1
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_with_explicit_instance_parametrized(runner_method, make_session, sdk):
    """Test session memory with an explicit session instance across all runner methods."""
    session = make_session("test_session_456")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    model.enqueue([sdk.get_text_message("Hello")])
    result1 = await sdk.run_agent_async(runner_method, agent, "Hi there", session=session)
    assert result1.final_output == "Hello"

    model.enqueue([sdk.get_text_message("I remember you said hi")])
    result2 = await sdk.run_agent_async(
        runner_method, agent, "Do you remember what I said?", session=session
    )
    assert result2.final_output == "I remember you said hi"
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_different_sessions_parametrized(runner_method, make_session, sdk):
    """Different session IDs maintain separate conversation histories."""
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    session_1 = make_session("session_1")
    model.enqueue([sdk.get_text_message("I like cats")])
    result1 = await sdk.run_agent_async(runner_method, agent, "I like cats", session=session_1)
    assert result1.final_output == "I like cats"

    session_2 = make_session("session_2")
    model.enqueue([sdk.get_text_message("I like dogs")])
    result2 = await sdk.run_agent_async(runner_method, agent, "I like dogs", session=session_2)
    assert result2.final_output == "I like dogs"

    # Back to Session 1 - should remember cats, not dogs
    model.enqueue([sdk.get_text_message("Yes, you mentioned cats")])
    result3 = await sdk.run_agent_async(
        runner_method, agent, "What did I say I like?", session=session_1
    )
    assert result3.final_output == "Yes, you mentioned cats"
    # (added) the model saw session 1's history only
    assert "I like dogs" not in str(model.calls[-1].input)
    session_1.close()
    session_2.close()


async def test_session_memory_direct(make_session):
    """Test the session class directly."""
    session = make_session("direct_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()

    assert len(retrieved) == 2
    assert retrieved[0].get("role") == "user"
    assert retrieved[0].get("content") == "Hello"
    assert retrieved[1].get("role") == "assistant"
    assert retrieved[1].get("content") == "Hi there!"

    await session.clear_session()
    retrieved_after_clear = await session.get_items()
    assert len(retrieved_after_clear) == 0
    session.close()


async def test_session_closed_rejects_empty_add_items(make_session):
    session = make_session("closed_test")
    session.close()
    with pytest.raises(BackendUnavailable, match="closed"):  # (adapted) threadkeep's error
        await session.add_items([])


async def test_session_memory_pop_item(make_session):
    """Test pop_item functionality."""
    session = make_session("pop_test")

    popped = await session.pop_item()
    assert popped is None

    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert len(retrieved) == 3

    popped = await session.pop_item()
    assert popped is not None
    assert popped.get("role") == "user"
    assert popped.get("content") == "How are you?"

    retrieved_after_pop = await session.get_items()
    assert len(retrieved_after_pop) == 2
    assert retrieved_after_pop[-1].get("content") == "Hi there!"

    popped2 = await session.pop_item()
    assert popped2 is not None
    assert popped2.get("role") == "assistant"
    assert popped2.get("content") == "Hi there!"

    popped3 = await session.pop_item()
    assert popped3 is not None
    assert popped3.get("role") == "user"
    assert popped3.get("content") == "Hello"

    popped4 = await session.pop_item()
    assert popped4 is None

    final_items = await session.get_items()
    assert len(final_items) == 0
    session.close()


async def test_session_memory_pop_different_sessions(make_session):
    """pop_item only affects the specified session."""
    session_1 = make_session("session_1")
    session_2 = make_session("session_2")
    items_1: list[TResponseInputItem] = [{"role": "user", "content": "Session 1 message"}]
    items_2: list[TResponseInputItem] = [
        {"role": "user", "content": "Session 2 message 1"},
        {"role": "user", "content": "Session 2 message 2"},
    ]
    await session_1.add_items(items_1)
    await session_2.add_items(items_2)

    popped = await session_2.pop_item()
    assert popped is not None
    assert popped.get("content") == "Session 2 message 2"

    session_1_items = await session_1.get_items()
    assert len(session_1_items) == 1
    assert session_1_items[0].get("content") == "Session 1 message"

    session_2_items = await session_2.get_items()
    assert len(session_2_items) == 1
    assert session_2_items[0].get("content") == "Session 2 message 1"
    session_1.close()
    session_2.close()


async def test_session_get_items_with_limit(make_session):
    """get_items with a limit returns the latest N in chronological order."""
    session = make_session("count_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Message 1"},
        {"role": "assistant", "content": "Response 1"},
        {"role": "user", "content": "Message 2"},
        {"role": "assistant", "content": "Response 2"},
        {"role": "user", "content": "Message 3"},
        {"role": "assistant", "content": "Response 3"},
    ]
    await session.add_items(items)

    all_items = await session.get_items()
    assert len(all_items) == 6
    assert all_items[0].get("content") == "Message 1"
    assert all_items[-1].get("content") == "Response 3"

    latest_2 = await session.get_items(limit=2)
    assert len(latest_2) == 2
    assert latest_2[0].get("content") == "Message 3"
    assert latest_2[1].get("content") == "Response 3"

    latest_4 = await session.get_items(limit=4)
    assert len(latest_4) == 4
    assert latest_4[0].get("content") == "Message 2"
    assert latest_4[1].get("content") == "Response 2"
    assert latest_4[2].get("content") == "Message 3"
    assert latest_4[3].get("content") == "Response 3"

    latest_10 = await session.get_items(limit=10)
    assert len(latest_10) == 6
    assert latest_10[0].get("content") == "Message 1"
    assert latest_10[-1].get("content") == "Response 3"

    latest_0 = await session.get_items(limit=0)
    assert len(latest_0) == 0
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_memory_appends_list_input_by_default(runner_method, make_session, sdk):
    """List inputs are appended to session history when no callback is provided."""
    session = make_session("test_validation_parametrized")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(initial_history)
    list_input = [{"role": "user", "content": "Test message"}]

    model.enqueue([sdk.get_text_message("This should run")])
    await sdk.run_agent_async(runner_method, agent, list_input, session=session)

    assert model.calls[-1].input == initial_history + list_input
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_callback_prepared_input(runner_method, make_session, sdk):
    """The user passes a list of items and a callback that filters the history."""
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session = make_session("session_1")

    initial_history: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello there."},
        {"role": "assistant", "content": "Hi, I'm here to assist you."},
    ]
    try:
        await session.add_items(initial_history)

        def filter_assistant_messages(history, new_input):
            # Only include user messages from history
            return [item for item in history if item["role"] == "user"] + new_input

        new_turn_input = [{"role": "user", "content": "What your name?"}]
        model.enqueue([sdk.get_text_message("I'm gpt-4o")])
        await sdk.run_agent_async(
            runner_method,
            agent,
            new_turn_input,
            session=session,
            run_config=RunConfig(session_input_callback=filter_assistant_messages),
        )
        expected_model_input = [initial_history[0], new_turn_input[0]]
        assert len(model.calls[-1].input) == 2
        assert model.calls[-1].input == expected_model_input
    finally:
        session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_callback_repeating_history_does_not_grow_session(
    runner_method, make_session, sdk
):
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    session = make_session("session_repeat")

    def repeat_first(history, new_input):
        if not history:
            return new_input
        return [*history, history[0], *new_input]

    try:
        for turn in range(3):
            model.enqueue([sdk.get_text_message(f"assistant {turn}")])
            await sdk.run_agent_async(
                runner_method,
                agent,
                f"user {turn}",
                session=session,
                run_config=RunConfig(session_input_callback=repeat_first),
            )
        stored = await session.get_items()
        user_messages = [item for item in stored if item.get("role") == "user"]
        assert [item.get("content") for item in user_messages] == ["user 0", "user 1", "user 2"]
        assert len(stored) == 6
    finally:
        session.close()


async def test_session_unicode_content(make_session):
    """The session stores and retrieves unicode/non-ASCII content."""
    session = make_session("unicode_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "こんにちは"},
        {"role": "assistant", "content": "😊👍"},
        {"role": "user", "content": "Привет"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert retrieved[0].get("content") == "こんにちは"
    assert retrieved[1].get("content") == "😊👍"
    assert retrieved[2].get("content") == "Привет"
    session.close()


async def test_session_special_characters_and_sql_injection(make_session):
    """Items with special characters and SQL keywords are stored safely."""
    session = make_session("special_chars_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "O'Reilly"},
        {"role": "assistant", "content": "DROP TABLE sessions;"},
        {"role": "user", "content": ('"SELECT * FROM users WHERE name = "admin";"')},
        {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        {"role": "user", "content": "Normal message"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert len(retrieved) == len(items)
    assert retrieved[0].get("content") == "O'Reilly"
    assert retrieved[1].get("content") == "DROP TABLE sessions;"
    assert retrieved[2].get("content") == '"SELECT * FROM users WHERE name = "admin";"'
    assert retrieved[3].get("content") == "Robert'); DROP TABLE students;--"
    assert retrieved[4].get("content") == "Normal message"
    session.close()


async def test_session_concurrent_access(make_session):
    """Concurrent writes to one session, each thread with its own event loop, keep every item."""
    session = make_session("concurrent_test")
    items: list[TResponseInputItem] = [
        {"role": "user", "content": f"Message {i}"} for i in range(10)
    ]

    def add_item(item):
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.run_until_complete(session.add_items([item]))
        loop.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as executor:
        list(executor.map(add_item, items))  # (adapted) list() surfaces a failed write

    retrieved = await session.get_items()
    contents = {
        content
        for item in retrieved
        for content in [item.get("content")]
        if isinstance(content, str)
    }
    expected = {f"Message {i}" for i in range(10)}
    assert contents == expected
    session.close()


async def test_session_add_items_exception_propagates_in_streamed(make_session, sdk):
    """Exceptions from session.add_items propagate in run_streamed instead of hanging.

    Regression test for openai/openai-agents-python issue 2130.
    """
    session = make_session("test_exception_session")

    async def _failing_add_items(_items):
        raise RuntimeError("Simulated session.add_items failure")

    session.add_items = _failing_add_items  # type: ignore[method-assign]
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([sdk.get_text_message("This should not be reached")])
    result = Runner.run_streamed(agent, "Hello", session=session)

    async def consume_stream():
        async for _event in result.stream_events():
            pass

    with pytest.raises(RuntimeError, match=r"Simulated session\.add_items failure"):
        await asyncio.wait_for(consume_stream(), timeout=120)  # a hang guard
    session.close()


async def test_session_settings_default(make_session):
    """session_settings defaults to empty SessionSettings."""
    session = make_session("default_settings_test")
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None
    session.close()


async def test_session_settings_constructor(make_session):
    session = make_session("constructor_settings_test", session_settings=SessionSettings(limit=5))
    assert session.session_settings is not None
    assert session.session_settings.limit == 5
    session.close()


async def test_session_settings_constructor_normalizes_dictionary(make_session) -> None:
    session = make_session("dictionary_settings_test", session_settings={"limit": 0})
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit == 0
    assert session.session_settings.resolve({"limit": 4}).limit == 4
    session.close()


def test_session_settings_rejects_unknown_dictionary_fields(make_session) -> None:
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        make_session("invalid_settings_test", session_settings={"limitt": 1})


async def test_get_items_uses_session_settings_limit(make_session):
    session = make_session("uses_settings_limit_test", session_settings=SessionSettings(limit=3))
    items: list[TResponseInputItem] = [
        {"role": "user", "content": f"Message {i}"} for i in range(5)
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert len(retrieved) == 3
    assert retrieved[0].get("content") == "Message 2"
    assert retrieved[1].get("content") == "Message 3"
    assert retrieved[2].get("content") == "Message 4"
    session.close()


async def test_get_items_explicit_limit_overrides_session_settings(make_session):
    session = make_session("explicit_override_test", session_settings=SessionSettings(limit=5))
    items: list[TResponseInputItem] = [
        {"role": "user", "content": f"Message {i}"} for i in range(10)
    ]
    await session.add_items(items)
    retrieved = await session.get_items(limit=2)
    assert len(retrieved) == 2
    assert retrieved[0].get("content") == "Message 8"
    assert retrieved[1].get("content") == "Message 9"
    session.close()


async def test_runner_with_session_settings_override(make_session, sdk):
    """RunConfig can override the session's default settings."""
    session = make_session("runner_override_test", session_settings=SessionSettings(limit=100))
    items: list[TResponseInputItem] = [{"role": "user", "content": f"Turn {i}"} for i in range(10)]
    await session.add_items(items)

    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([sdk.get_text_message("Got it")])
    await Runner.run(
        agent,
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    last_input = model.calls[-1].input
    history_items = [item for item in last_input if item.get("content") != "New question"]
    assert len(history_items) == 2
    session.close()


# -- tests/memory/test_session_limit.py ------------------------------------------------------


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_limit_parameter(runner_method, make_session, sdk):
    """session_limit correctly limits the history retrieved from the session."""
    session = make_session("limit_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)

    for i in (1, 2, 3):
        model.enqueue([sdk.get_text_message(f"Reply {i}")])
        await sdk.run_agent_async(runner_method, agent, f"Message {i}", session=session)

    all_items = await session.get_items()
    assert len(all_items) == 6

    model.enqueue([sdk.get_text_message("Reply 4")])
    await sdk.run_agent_async(
        runner_method,
        agent,
        "Message 4",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0].get("content") == "Message 3"
    assert last_input[1].get("content")[0]["text"] == "Reply 3"
    assert last_input[2].get("content") == "Message 4"
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_limit_drops_unmatched_history_function_call_output(
    runner_method, make_session, sdk
):
    """A limit boundary must not pass an output whose matching call was excluded."""
    session = make_session("limit_tool_pair")
    history = cast(
        list[TResponseInputItem],
        [
            {"role": "user", "content": "What is the weather?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
            },
        ],
    )
    await session.add_items(history)
    assert await session.get_items(limit=2) == history[-2:]

    model = ScriptedModel()
    model.enqueue([sdk.get_text_message("Tomorrow is sunny too.")])
    agent = Agent(name="test", model=model)
    await sdk.run_agent_async(
        runner_method,
        agent,
        "What about tomorrow?",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    assert model.calls[-1].input == [
        history[-1],
        {"role": "user", "content": "What about tomorrow?"},
    ]
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_limit_zero(runner_method, make_session, sdk):
    """session_limit=0 provides no history, only the new message."""
    session = make_session("limit_zero_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for i in (1, 2):
        model.enqueue([sdk.get_text_message(f"Reply {i}")])
        await sdk.run_agent_async(runner_method, agent, f"Message {i}", session=session)

    model.enqueue([sdk.get_text_message("Reply 3")])
    await sdk.run_agent_async(
        runner_method,
        agent,
        "Message 3",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=0)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 1
    assert last_input[0].get("content") == "Message 3"
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_limit_none_gets_all_history(runner_method, make_session, sdk):
    """session_limit=None retrieves the entire history (default behavior)."""
    session = make_session("limit_none_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    for i in range(1, 6):
        model.enqueue([sdk.get_text_message(f"Reply {i}")])
        await sdk.run_agent_async(runner_method, agent, f"Message {i}", session=session)

    all_items = await session.get_items()
    assert len(all_items) == 10

    model.enqueue([sdk.get_text_message("Reply 6")])
    await sdk.run_agent_async(
        runner_method,
        agent,
        "Message 6",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=None)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 11
    assert last_input[0].get("content") == "Message 1"
    assert last_input[-1].get("content") == "Message 6"
    session.close()


@pytest.mark.parametrize("runner_method", RUNNER_METHODS)
async def test_session_limit_larger_than_history(runner_method, make_session, sdk):
    """session_limit larger than the history returns all items."""
    session = make_session("limit_large_test")
    model = ScriptedModel()
    agent = Agent(name="test", model=model)
    model.enqueue([sdk.get_text_message("Reply 1")])
    await sdk.run_agent_async(runner_method, agent, "Message 1", session=session)

    model.enqueue([sdk.get_text_message("Reply 2")])
    await sdk.run_agent_async(
        runner_method,
        agent,
        "Message 2",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=100)),
    )
    last_input = model.calls[-1].input
    assert len(last_input) == 3
    assert last_input[0].get("content") == "Message 1"
    assert last_input[1].get("content")[0]["text"] == "Reply 1"
    assert last_input[2].get("content") == "Message 2"
    session.close()
