"""Filters evaluated in Python, for drivers whose backend cannot express them natively.

SQL and MongoDB drivers translate ``ChatFilter``/``MessageFilter`` into queries; the memory
and memory-service drivers (and small third-party drivers) call these. Both must agree: the
contract suite compares every driver with the same plain-Python model.
"""

from __future__ import annotations

from ._models import Chat, Message
from ._paging import ChatFilter, MessageFilter
from ._store_chats import chat_visible_to

__all__ = ["chat_idle_since", "chat_matches", "message_matches"]


def chat_idle_since(chat: Chat) -> object:
    """Return the instant a chat's idleness counts from: its last message, else its creation."""
    return chat.last_message_at or chat.created_at


def chat_matches(chat_filter: ChatFilter, chat: Chat) -> bool:
    """Return whether ``chat`` passes every condition of ``chat_filter``."""
    deleted = chat.deleted_at is not None
    if (chat_filter.deleted == "exclude" and deleted) or (
        chat_filter.deleted == "only" and not deleted
    ):
        return False
    for field in ("user_id", "tenant_id", "team_id", "agent_id", "channel", "status"):
        wanted = getattr(chat_filter, field)
        if wanted is not None and getattr(chat, field) != wanted:
            return False
    return _passes_text_and_time(chat_filter, chat)


def _passes_text_and_time(chat_filter: ChatFilter, chat: Chat) -> bool:
    keyword = chat_filter.keyword
    if keyword is not None and keyword.casefold() not in (chat.name or "").casefold():
        return False
    if chat_filter.visible_to is not None and not chat_visible_to(chat, chat_filter.visible_to):
        return False
    idle = chat.last_message_at or chat.created_at
    if chat_filter.idle_before is not None and (idle is None or idle >= chat_filter.idle_before):
        return False
    deleted_at = chat.deleted_at
    before = chat_filter.deleted_before
    return before is None or (deleted_at is not None and deleted_at < before)


def message_matches(message_filter: MessageFilter, message: Message) -> bool:
    """Return whether ``message`` passes every condition of ``message_filter``."""
    if message_filter.roles is not None and message.role not in message_filter.roles:
        return False
    if message_filter.kinds is not None and message.kind not in message_filter.kinds:
        return False
    for field in ("run_id", "request_id", "block_id"):
        wanted = getattr(message_filter, field)
        if wanted is not None and getattr(message, field) != wanted:
            return False
    return True
