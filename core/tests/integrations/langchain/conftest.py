"""Fixtures for the LangChain integration: histories on each backend's shared store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

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
