"""Chats with previews (``Store.list_chat_previews``): ``list_chats`` + ``get_last_messages``.

Whatever path the driver takes (one query, or the two primitives), the page must be the
``list_chats`` page for the same arguments, each chat with what ``get_last_messages``
gives it, cut to ``preview_chars`` code points.
"""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import UUID

import pytest

from threadkeep import (
    ChatFilter,
    ChatPreview,
    InvalidArgument,
    InvalidCursor,
    Message,
    MessagePreview,
    Role,
    Store,
    ToolCall,
)

from ._base import ContractBase

__all__ = ["PreviewTests"]

USER = "u-previews"


async def _varied_chats(store: Store) -> dict[str, UUID]:
    """Chats of every preview shape: none, text, long text, tool calls, hidden, deleted."""
    ids: dict[str, UUID] = {}
    for name in ("empty", "short", "long", "tools", "hidden", "deleted", "astral", "other"):
        user = "u-someone-else" if name == "other" else USER
        ids[name] = (await store.create_chat(user, f"t-{name}", channel="web")).chat_id
    await store.append_message(ids["short"], Message(role="user", content="hi"))
    await store.append_messages(
        ids["long"],
        [Message(role="user", content="first"), Message(role="assistant", content="é" * 500)],
    )
    calls = [ToolCall(name="search", arguments="{}"), ToolCall(name="fetch", arguments="{}")]
    await store.append_message(ids["tools"], Message(role="assistant", tool_calls=calls))
    _shown, hidden = await store.append_messages(
        ids["hidden"],
        [Message(role="user", content="kept"), Message(role="user", content="gone")],
    )
    await store.delete_messages(ids["hidden"], [hidden.message_id])
    await store.append_message(ids["deleted"], Message(role="user", content="bye"))
    await store.delete_chat(ids["deleted"])
    await store.append_message(ids["astral"], Message(role="user", content="\U0001f600" * 9))
    await store.append_message(ids["other"], Message(role="user", content="not yours"))
    return ids


def _expected(message: Message | None, chars: int) -> MessagePreview | None:
    if message is None:
        return None
    return MessagePreview(
        message_id=message.message_id,
        seq=message.seq,
        role=message.role,
        kind=message.kind,
        status=message.status,
        created_at=message.created_at,
        text=message.content[:chars],
        truncated=len(message.content) > chars,
        tool_calls=len(message.tool_calls),
    )


async def _walk(
    store: Store, chat_filter: dict[str, Any], limit: int, chars: int
) -> list[ChatPreview]:
    items: list[ChatPreview] = []
    cursor: str | None = None
    while True:
        page = await store.list_chat_previews(
            chat_filter, limit=limit, cursor=cursor, preview_chars=chars
        )
        plain = await store.list_chats(chat_filter, limit=limit, cursor=cursor)
        assert [p.chat for p in page.items] == plain.items, "not the list_chats page"
        assert page.has_more == plain.has_more, "has_more differs from list_chats"
        assert (page.next_cursor is None) == (plain.next_cursor is None)
        items[:0] = page.items
        if not page.has_more:
            return items
        cursor = page.next_cursor


class PreviewTests(ContractBase):
    """``list_chat_previews`` equals ``list_chats`` with ``get_last_messages``, cut."""

    contract_area: ClassVar[str] = "Pages & cursors"

    @pytest.mark.asyncio
    @pytest.mark.parametrize("chars", [0, 3, 200])
    async def test_previews_match_list_chats_and_last_messages(
        self, store: Store, chars: int
    ) -> None:
        """Every filter shape and page size: the same chats, their newest messages, cut."""
        ids = await _varied_chats(store)
        filters: list[dict[str, Any]] = [
            {},
            {"user_id": USER},
            {"user_id": USER, "deleted": "include"},
            {"deleted": "only"},
            {"channel": "web", "visible_to": {"user_id": USER}},
        ]
        for chat_filter in filters:
            for limit in (1, 3, 200):
                got = await _walk(store, chat_filter, limit, chars)
                newest = await store.get_last_messages([p.chat.chat_id for p in got] or [])
                for preview in got:
                    want = _expected(newest.get(preview.chat.chat_id), chars)
                    assert preview.last_message == want, (chat_filter, limit, preview.chat)
        every = await _walk(store, {"deleted": "include"}, 200, 3)
        mine = {p.chat.thread_id: p.last_message for p in every}
        assert mine["t-empty"] is None
        assert mine["t-deleted"] is None
        assert mine["t-hidden"] is not None
        assert mine["t-hidden"].text == "kep"
        assert ids["deleted"] not in {p.chat.chat_id for p in await _walk(store, {}, 200, 3)}

    @pytest.mark.asyncio
    async def test_preview_fields_and_cut(self, store: Store) -> None:
        """Text cut by code point, ``truncated``, role, tool call count, newest first pages."""
        ids = await _varied_chats(store)
        page = await store.list_chat_previews({"user_id": USER}, preview_chars=4, limit=200)
        by_thread = {p.chat.thread_id: p.last_message for p in page.items}
        assert [p.chat.chat_id for p in page.items] == [
            ids[n] for n in ("empty", "short", "long", "tools", "hidden", "astral")
        ], "items do not run oldest to newest created"
        long, short = by_thread["t-long"], by_thread["t-short"]
        assert long is not None
        assert (long.text, long.truncated) == ("éééé", True)
        assert long.role is Role.ASSISTANT
        assert long.seq == 2
        assert short is not None
        assert (short.text, short.truncated) == ("hi", False)
        astral = by_thread["t-astral"]
        assert astral is not None
        assert astral.text == "\U0001f600" * 4
        tools = by_thread["t-tools"]
        assert tools is not None
        assert (tools.text, tools.tool_calls) == ("", 2)
        full = await store.list_chat_previews({"user_id": USER}, preview_chars=10_000)
        for preview in full.items:
            if preview.last_message is not None:
                stored = await store.get_message(preview.last_message.message_id)
                assert preview.last_message.text == stored.content
                assert not preview.last_message.truncated

    @pytest.mark.asyncio
    async def test_cursors_shared_with_list_chats(self, store: Store) -> None:
        """A ``list_chats`` cursor continues a preview walk and back; filters stay bound."""
        for i in range(5):
            chat = await store.create_chat(USER, f"t-walk-{i}")
            await store.append_message(chat.chat_id, Message(role="user", content=f"w{i}"))
        chat_filter = ChatFilter(user_id=USER)
        first = await store.list_chats(chat_filter, limit=2)
        second = await store.list_chat_previews(chat_filter, limit=2, cursor=first.next_cursor)
        assert [p.last_message.text for p in second.items if p.last_message] == ["w1", "w2"]
        third = await store.list_chats(chat_filter, limit=2, cursor=second.next_cursor)
        assert [c.thread_id for c in third.items] == ["t-walk-0"]
        with pytest.raises(InvalidCursor):
            await store.list_chat_previews({"user_id": "u-x"}, cursor=first.next_cursor)

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", [-1, 1.5, "200", True, None])
    async def test_bad_preview_chars(self, store: Store, bad: Any) -> None:
        """``preview_chars`` must be an int >= 0; ``limit`` and filters as ``list_chats``."""
        with pytest.raises(InvalidArgument):
            await store.list_chat_previews(preview_chars=bad)
        with pytest.raises(InvalidArgument):
            await store.list_chat_previews(limit=0)
        with pytest.raises(InvalidArgument):
            await store.list_chat_previews({"no_such_field": "x"})
