"""Fixtures for the Agents SDK integration: sessions on each backend, the SDK's test helpers.

``get_text_message``, ``get_function_tool_call`` and ``run_agent_async`` are copied from the
SDK's own tests (openai/openai-agents-python v0.24.0, ``tests/test_responses.py`` and
``tests/memory/test_session.py``; MIT License, Copyright (c) 2025 OpenAI), handed out as the
``sdk`` fixture because tests here run with ``--import-mode=importlib``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Runner, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
)

from threadkeep.integrations.openai_agents import ThreadkeepSession
from threadkeep.sync import SyncStore

set_tracing_disabled(True)  # no trace export: the tests have no network


def get_text_message(content: str) -> ResponseOutputItem:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=content, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


def get_function_tool_call(
    name: str, arguments: str | None = None, call_id: str | None = None
) -> ResponseOutputItem:
    return ResponseFunctionToolCall(
        id="1", call_id=call_id or "2", type="function_call", name=name, arguments=arguments or ""
    )


def _run_sync_wrapper(agent, input_data, **kwargs):
    """Wrapper for run_sync that properly sets up an event loop."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, input_data, **kwargs)
    finally:
        loop.close()


async def run_agent_async(runner_method: str, agent, input_data, **kwargs):
    """Helper function to run agent with different methods."""
    if runner_method == "run":
        return await Runner.run(agent, input_data, **kwargs)
    if runner_method == "run_sync":
        # For run_sync, we need to run it in a thread with its own event loop
        return await asyncio.to_thread(_run_sync_wrapper, agent, input_data, **kwargs)
    if runner_method == "run_streamed":
        result = Runner.run_streamed(agent, input_data, **kwargs)
        async for _event in result.stream_events():
            pass
        return result
    raise ValueError(f"Unknown runner method: {runner_method}")


@pytest.fixture
def sdk() -> SimpleNamespace:
    """The SDK test suite's helpers."""
    return SimpleNamespace(
        get_text_message=get_text_message,
        get_function_tool_call=get_function_tool_call,
        run_agent_async=run_agent_async,
    )


@pytest.fixture(scope="module")
def module_store(module_backend) -> Iterator[SyncStore]:
    """One open ``threadkeep.sync`` store per backend for the module's tests."""
    with module_backend.sync_store() as store:
        yield store


@pytest.fixture
def make_session(module_store: SyncStore) -> Any:
    """Return ``(session_id, **kwargs) -> ThreadkeepSession`` on the module's store.

    The sessions of one test share one store (as sessions built from one URL do in an
    application) and a user id of their own, so the SDK tests' fixed session ids of different
    tests never meet.
    """
    user_id = f"sdk-test-{uuid.uuid4().hex}"

    def make(session_id: str, **kwargs: Any) -> ThreadkeepSession:
        kwargs.setdefault("user_id", user_id)
        return ThreadkeepSession(session_id, store=module_store, **kwargs)

    return make
