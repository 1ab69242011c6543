"""Where ADK's ``app:`` and ``user:`` state lives in threadkeep: an append-only delta log.

App state is the chat ``(STATE_OWNER, "adk-state/app/<app>")`` and a user's state the chat
``(user_id, "adk-state/user/<app>")``, both on channel :data:`STATE_CHANNEL` and agent id
``<app>``. Each write of a scope's state appends one message whose metadata holds the
delta; the state is the deltas applied oldest first. Appends never read-modify-write, so
concurrent writers (two sessions of one user, two processes) never lose a delta, and the
last appended value of a key wins, as in ADK's own services.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from google.adk.sessions import _session_util

from threadkeep import MAX_PAGE_LIMIT, ChatNotFound, Message, Role, Store

__all__ = [
    "STATE_CHANNEL",
    "STATE_OWNER",
    "ScopeLog",
    "all_messages",
    "app_log",
    "json_safe",
    "user_log",
]

STATE_CHANNEL = "adk-state"
"""The channel of the chats that hold app and user state."""

STATE_OWNER = "adk:app"
"""The owner of the app-state chats (thread ids keep them apart from any user's chats)."""

_DELTA_KEY = "adk_state_delta"


class ScopeLog:
    """The delta log of one state scope (an app, or an (app, user) pair).

    Args:
        owner: The chat's ``user_id``.
        thread_id: The chat's ``thread_id``.
        app_name: The ADK app (the chat's ``agent_id``).
    """

    def __init__(self, owner: str, thread_id: str, app_name: str) -> None:
        self.owner = owner
        self.thread_id = thread_id
        self.app_name = app_name

    async def read(self, store: Store) -> dict[str, Any]:
        """Return the scope's state (keys without their prefix); ``{}`` when never written.

        Raises:
            BackendUnavailable: If the backend fails.
        """
        chat = await store.find_chat(self.owner, self.thread_id)
        if chat is None:
            return {}
        try:
            return await _fold(store, chat.chat_id)
        except ChatNotFound:
            return {}

    async def append(self, store: Store, delta: dict[str, Any]) -> Message | None:
        """Append ``delta`` (keys without their prefix) to the log; nothing for an empty one.

        Returns:
            The stored delta message (so a failed caller can take it back), or ``None``.

        Raises:
            InvalidContent: If a value is not JSON (NaN, infinity, a lone surrogate).
            BackendUnavailable: If the backend fails.
        """
        if not delta:
            return None
        chat = await store.create_chat(
            self.owner, self.thread_id, agent_id=self.app_name, channel=STATE_CHANNEL
        )
        note = Message(role=Role.SYSTEM, metadata={_DELTA_KEY: json_safe(delta)})
        return (await store.append_messages(chat.chat_id, [note]))[0]


def app_log(app_name: str) -> ScopeLog:
    """Return the delta log of ``app:`` state for ``app_name``."""
    return ScopeLog(STATE_OWNER, f"adk-state/app/{app_name}", app_name)


def user_log(app_name: str, user_id: str) -> ScopeLog:
    """Return the delta log of ``user:`` state for ``user_id`` in ``app_name``."""
    return ScopeLog(user_id, f"adk-state/user/{app_name}", app_name)


async def all_messages(store: Store, chat_id: UUID) -> list[Message]:
    """Return every message of a chat, oldest first (pages of ``MAX_PAGE_LIMIT``).

    Raises:
        ChatNotFound: If the chat is gone.
        BackendUnavailable: If the backend fails.
    """
    pages: list[list[Message]] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(chat_id, limit=MAX_PAGE_LIMIT, cursor=cursor)
        pages.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
    return [message for items in reversed(pages) for message in items]


async def _fold(store: Store, chat_id: UUID) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for message in await all_messages(store, chat_id):
        delta = message.metadata.get(_DELTA_KEY)
        if isinstance(delta, dict):
            state.update(delta)
    return state


def json_safe(state: dict[str, Any]) -> dict[str, Any]:
    """Return ``state`` as JSON values; a value JSON cannot hold becomes its string form.

    ADK's own rule for its persistent services (``_session_util.make_json_safe_state``).
    """
    return _session_util.make_json_safe_state(state)
