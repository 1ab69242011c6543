"""``ChatBinding``: the threadkeep chat behind one framework session or history object."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from threadkeep import MAX_PAGE_LIMIT, ChatNotFound, Message, MessageKind, Store

__all__ = ["ChatBinding", "ClearMode", "context_window"]

ClearMode = Literal["start_over", "delete"]
"""What clearing a framework's session does: draw a "start over" line, or delete the chat."""


class ChatBinding:
    """The chat ``(user_id, thread_id)`` of a framework session: found or made on first use.

    The chat id is cached; a cached chat that was deleted meanwhile (``clear="delete"``, or
    another client) is looked up or made again.

    Args:
        user_id: The chat's owner.
        thread_id: The framework's session or conversation id.
        clear: What :meth:`clear` does (see :data:`ClearMode`).
    """

    def __init__(self, user_id: str, thread_id: str, clear: ClearMode) -> None:
        self.user_id = user_id
        self.thread_id = thread_id
        self.clear_mode: ClearMode = clear
        self.chat_id: UUID | None = None

    async def find(self, store: Store) -> UUID | None:
        """Return the live chat's id, or ``None`` when there is none yet."""
        if self.chat_id is None:
            chat = await store.find_chat(self.user_id, self.thread_id)
            self.chat_id = chat.chat_id if chat is not None else None
        return self.chat_id

    async def append(self, store: Store, messages: list[Message]) -> list[Message]:
        """Append ``messages`` (all or nothing), making the chat if needed; return them stored.

        Raises:
            ChatNotFound: If the chat is deleted again and again while appending.
            InvalidArgument, InvalidContent, PayloadTooLarge, BackendUnavailable: From the
                store (nothing is written).
        """
        for _ in range(2):
            if self.chat_id is None:
                chat = await store.create_chat(self.user_id, self.thread_id)
                self.chat_id = chat.chat_id
            try:
                return await store.append_messages(self.chat_id, messages)
            except ChatNotFound:
                self.chat_id = None
        raise ChatNotFound(f"chat {self.user_id!r}/{self.thread_id!r} keeps being deleted")

    async def window(self, store: Store, limit: int | None) -> list[Message]:
        """Return the messages the model sees (after the cut), oldest first; newest ``limit``."""
        chat_id = await self.find(store)
        if chat_id is None:
            return []
        try:
            return await context_window(store, chat_id, limit)
        except ChatNotFound:
            self.chat_id = None
            return []

    async def clear(self, store: Store) -> None:
        """Draw a "start over" line (history kept), or delete the chat (``clear="delete"``)."""
        chat_id = await self.find(store)
        if chat_id is None:
            return
        try:
            if self.clear_mode == "delete":
                await store.delete_chat(chat_id)
                self.chat_id = None
            else:
                await store.start_over(chat_id)
        except ChatNotFound:
            self.chat_id = None


async def context_window(store: Store, chat_id: UUID, limit: int | None) -> list[Message]:
    """Walk the chat newest first to its cut; return up to ``limit`` messages, oldest first.

    The cut is the last "start over" boundary; a compaction boundary (threadkeep's
    ``compact``) keeps its summary first and cuts at its ``upto_seq``, as
    ``Store.context_messages`` does. Costs pages for ``limit`` messages, not the chat.
    """
    newest_first: list[Message] = []
    summary: Message | None = None
    cut = 0
    cursor: str | None = None
    while True:
        size = (
            MAX_PAGE_LIMIT if limit is None else min(MAX_PAGE_LIMIT, limit - len(newest_first) + 1)
        )
        page = await store.list_messages(chat_id, limit=max(size, 1), cursor=cursor)
        for message in reversed(page.items):
            if (message.seq or 0) <= cut or (limit is not None and len(newest_first) >= limit):
                return _with_summary(summary, newest_first)
            if message.kind is MessageKind.BOUNDARY:
                boundary = message.boundary
                if boundary is None or boundary.reason == "start_over":
                    return _with_summary(summary, newest_first)
                if summary is None:
                    summary, cut = message, boundary.upto_seq or 0
                continue
            newest_first.append(message)
        if not page.has_more:
            return _with_summary(summary, newest_first)
        cursor = page.next_cursor


def _with_summary(summary: Message | None, newest_first: list[Message]) -> list[Message]:
    head: list[Message] = []
    if summary is not None:
        head = [Message(role="system", content=summary.content)]
    return head + newest_first[::-1]
