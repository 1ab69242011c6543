"""Fixtures for the LangChain integration: histories on each backend's shared store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from threadkeep import Message, Role
from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory
from threadkeep.sync import SyncStore


@pytest.fixture(scope="module")
def module_store(module_backend) -> Iterator[SyncStore]:
    """One open ``threadkeep.sync`` store per backend for the module's tests."""
    with module_backend.sync_store() as store:
        yield store


@pytest.fixture
def make_history(module_store: SyncStore) -> Any:
    """Return ``(session_id, user_id="") -> ThreadkeepChatMessageHistory`` for this test.

    Chats are owned by a user id unique to the test (plus the given one), so LangChain's
    fixed session ids of different tests never meet on the shared store.
    """
    prefix = f"lc-test-{uuid.uuid4().hex}"

    def make(session_id: str, user_id: str = "", **kwargs: Any) -> ThreadkeepChatMessageHistory:
        owner = f"{prefix}:{user_id}" if user_id else prefix
        return ThreadkeepChatMessageHistory(session_id, store=module_store, user_id=owner, **kwargs)

    return make


def _check_weather_chat(messages: list[Message]) -> None:
    """Assert the end-to-end agents' stored chat: three turns, turn 2 calling ``get_weather``.

    ``messages`` is the chat as the plain threadkeep API lists it, oldest first: the tool call
    (``call_w``) is on the 2nd assistant message with its tokens, and the tool message after
    it is linked to it by ``tool_call_ref``.
    """
    assert [m.role for m in messages] == [
        Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT,
        Role.USER, Role.ASSISTANT,
    ]  # fmt: skip
    (tool_call,) = messages[3].tool_calls
    assert (tool_call.agui_id, tool_call.name) == ("call_w", "get_weather")
    assert (messages[4].tool_call_ref, messages[4].content) == ("call_w", "sunny in Paris")
    assert messages[3].tokens == 15


@pytest.fixture
def check_weather_chat() -> Any:
    """Return the check of the end-to-end agents' stored chat (see ``_check_weather_chat``)."""
    return _check_weather_chat
