"""What the copied langchain-core tests construct: ``InMemoryChatMessageHistory`` on threadkeep.

The upstream tests build ``InMemoryChatMessageHistory(messages=...)`` and compare histories
with ``==`` (pydantic equality: same class, same messages). Here that constructor gives a
:class:`~threadkeep.integrations.langchain.ThreadkeepChatMessageHistory` on a session of its
own (a fresh session id) at the current test's location (SQLite or PostgreSQL, see
upstream/conftest.py), holding ``messages`` if given; two of them are equal when their stored
messages are, which is what the upstream comparison means.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from threadkeep.integrations.langchain import ThreadkeepChatMessageHistory
from threadkeep.sync import SyncStore

# Set by upstream/conftest.py's `upstream_location` fixture for the running test.
current_location: Callable[[str | None], tuple[SyncStore, str]] | None = None


class InMemoryChatMessageHistory(ThreadkeepChatMessageHistory):
    """``ThreadkeepChatMessageHistory`` with ``InMemoryChatMessageHistory``'s constructor."""

    def __init__(self, messages: Sequence[BaseMessage] | None = None) -> None:
        if current_location is None:
            raise RuntimeError("the upstream_location fixture is not active")
        store, user_id = current_location(None)
        super().__init__(f"upstream-{uuid.uuid4().hex}", store=store, user_id=user_id)
        if messages:
            self.add_messages(list(messages))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BaseChatMessageHistory):
            return NotImplemented
        return type(other) is type(self) and self.messages == other.messages

    __hash__ = None  # type: ignore[assignment]  # equal by content, as the pydantic model


# Copied tests with no threadkeep history in them: skipped by upstream/conftest.py.
OUT_OF_SCOPE = {
    "test_chat_history_deprecated": (
        "checks the deprecation note in the docstrings of langchain-core's own classes"
    ),
    "test_add_message_implementation_only": (
        "tests BaseChatMessageHistory's default methods on a history class defined in the test"
    ),
    "test_bulk_message_implementation_only": (
        "tests BaseChatMessageHistory's default methods on a history class defined in the test"
    ),
    "test_async_interface": (
        "tests BaseChatMessageHistory's default async methods on a history class of the test"
    ),
}
