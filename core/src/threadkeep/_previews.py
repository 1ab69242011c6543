"""A chat list with each chat's newest message as a preview, in one driver call.

A chat list screen shows the newest chats with a line of each one's last message. Through
``list_chats`` then ``get_last_messages`` that is two round trips and a full message model
per chat; :meth:`PreviewOps.list_chat_previews` asks the driver once
(``PreviewsDriver.page_chats_with_last``: a ``LATERAL`` join on PostgreSQL, a correlated
``max(seq)`` on SQLite, the two primitives one after the other elsewhere) and returns each
preview cut to the length the caller chooses.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from ._corrupt import collecting, window
from ._errors import InvalidArgument
from ._models import Chat, Message, MessageKind, MessageStatus, Role
from ._paging import DEFAULT_PAGE_LIMIT, ChatFilter, Page
from ._rows import built
from ._store_chats import page_of
from ._store_core import Component

__all__ = [
    "DEFAULT_PREVIEW_CHARS",
    "ChatPreview",
    "MessagePreview",
    "PreviewOps",
    "message_preview",
]

DEFAULT_PREVIEW_CHARS = 200
"""Characters of a preview's text when the caller does not choose (code points)."""


class MessagePreview(BaseModel):
    """The newest visible message of a chat, cut for a chat list.

    Attributes:
        message_id: The message (read it whole with ``get_message``).
        seq: Its position in the chat.
        role: Who wrote it.
        kind: ``message`` or ``boundary``.
        status: ``complete``, ``streaming``, ``error``...
        created_at: When it was appended.
        text: Its ``content``, at most ``preview_chars`` code points (cut, never
            ellipsised: how to mark the cut is the caller's choice, see ``truncated``).
        truncated: Whether ``content`` was longer than ``text``.
        tool_calls: How many tool calls it holds (a tool-calling turn often has no text).
    """

    message_id: UUID
    seq: int | None
    role: Role
    kind: MessageKind
    status: MessageStatus
    created_at: datetime | None
    text: str
    truncated: bool
    tool_calls: int


class ChatPreview(BaseModel):
    """A chat and its newest visible message, one row of :meth:`PreviewOps.list_chat_previews`.

    Attributes:
        chat: The chat, as ``list_chats`` returns it (the store's ``chat_model``).
        last_message: Its newest visible message, or ``None`` when it has none, when the
            chat is deleted or archived (its messages are not hot; ``get_last_messages``
            leaves the same chats out). When that message's stored row is damaged and the
            store reads past damaged rows (``corrupt_records="skip"``), what
            ``get_last_messages`` reads instead: ``None`` or, on a driver that reads past
            the damaged row, the newest readable message before it.
    """

    chat: Chat
    last_message: MessagePreview | None = None


def message_preview(message: Message, chars: int) -> MessagePreview:
    """Return the preview of ``message`` with at most ``chars`` code points of its content.

    The fields are read from the model's ``__dict__`` (where pydantic keeps them): an
    attribute read of a pydantic model goes through ``BaseModel.__getattr__``'s slow slot,
    several times the cost of a dict look-up, and a listing reads eight per preview.
    """
    fields = message.__dict__
    content = fields["content"]
    return built(
        MessagePreview,
        {
            "message_id": fields["message_id"],
            "seq": fields["seq"],
            "role": fields["role"],
            "kind": fields["kind"],
            "status": fields["status"],
            "created_at": fields["created_at"],
            "text": content[:chars],
            "truncated": len(content) > chars,
            "tool_calls": len(fields["tool_calls"]),
        },
    )


def _check_chars(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"preview_chars must be an integer of at least 0, not {value!r}")
    return value


def _pair_seq(pair: tuple[Chat, Message | None]) -> int | None:
    return pair[0].seq


class PreviewOps(Component):
    """``list_chat_previews``: chats with their previews in one driver call."""

    async def list_chat_previews(
        self,
        chat_filter: ChatFilter | Mapping[str, Any] | None = None,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
    ) -> Page[ChatPreview]:
        """Implement :meth:`threadkeep.Store.list_chat_previews`."""
        chat_filter, size, scope, before = self._ctx.chat_page_start(chat_filter, limit, cursor)
        chars = _check_chars(preview_chars)
        with collecting(self._ctx.corrupt_records) as skipped:
            rows = await self._driver.page_chats_with_last(chat_filter, before, size + 1)
        # A damaged newest message only loses its preview; damaged chats are page rows.
        chat_skips = [error for error in skipped if error.kind == "chat"]
        pairs, corrupt, has_more, last = window(rows, chat_skips, size, _pair_seq)
        next_cursor = None
        if has_more:
            assert last is not None
            next_cursor = self._ctx.encode_cursor(scope, last)
        items = [
            built(
                ChatPreview,
                {
                    "chat": chat,
                    "last_message": None if message is None else message_preview(message, chars),
                },
            )
            for chat, message in reversed(pairs)
        ]
        return page_of(ChatPreview, items, next_cursor, has_more, corrupt)
