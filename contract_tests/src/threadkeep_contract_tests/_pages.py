"""Pages and cursors: keyset walks, limits, signed bound cursors."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar
from uuid import UUID

import pytest

from threadkeep import (
    Capabilities,
    ChatFilter,
    InvalidArgument,
    InvalidCursor,
    Message,
    MessageFilter,
    MessageKind,
    Role,
    Store,
)

from ._base import ContractBase, StoreFactory
from ._helpers import opened, walk_chats, walk_messages

__all__ = ["PageTests"]

SECRET_A = "contract-secret-a-0123456789abcdef"  # noqa: S105 - a test value, not a secret
SECRET_B = "contract-secret-b-0123456789abcdef"  # noqa: S105 - a test value, not a secret


async def _chat_with(store: Store, count: int, thread: str = "t-pages") -> UUID:
    chat = await store.create_chat("u-pages", thread)
    for start in range(0, count, 100):
        batch = [
            Message(role="user", content=f"p{i}") for i in range(start, min(count, start + 100))
        ]
        await store.append_messages(chat.chat_id, batch)
    return chat.chat_id


async def _check_secrets(factory: StoreFactory, chat_id: UUID, cursor: str) -> None:
    async with opened(factory, cursor_secret=SECRET_B) as other:
        with pytest.raises(InvalidCursor):
            await other.list_messages(chat_id, limit=2, cursor=cursor)
    async with opened(factory, cursor_secret=SECRET_A) as same:
        page = await same.list_messages(chat_id, limit=2, cursor=cursor)
    assert [m.content for m in page.items] == ["p2", "p3"]


class PageTests(ContractBase):
    """First page newest, items oldest to newest, exact walks, limits, cursor binding."""

    contract_area: ClassVar[str] = "Pages & cursors"

    @pytest.mark.asyncio
    async def test_first_page_is_newest(self, store: Store) -> None:
        """The first page holds the newest messages, oldest to newest inside the page."""
        chat_id = await _chat_with(store, 12)
        page = await store.list_messages(chat_id, limit=5)
        assert [m.content for m in page.items] == [f"p{i}" for i in range(7, 12)]
        assert page.has_more
        older = await store.list_messages(chat_id, limit=5, cursor=page.next_cursor)
        assert [m.content for m in older.items] == [f"p{i}" for i in range(2, 7)]

    @pytest.mark.asyncio
    async def test_walk_is_exact_while_appending(self, store: Store) -> None:
        """A walk yields every message that existed at its start exactly once, despite appends."""
        chat_id = await _chat_with(store, 23)
        appended: list[int] = []

        async def append_between_pages() -> None:
            appended.append(len(appended))
            await store.append_message(
                chat_id, Message(role="assistant", content=f"late{len(appended)}")
            )

        walk = await walk_messages(store, chat_id, limit=4, between_pages=append_between_pages)
        assert [m.content for m in walk.items] == [f"p{i}" for i in range(23)]
        assert appended, "no page boundary was crossed"
        full = await walk_messages(store, chat_id, limit=7)
        assert len(full.items) == 23 + len(appended)

    @pytest.mark.asyncio
    async def test_limit_default_cap_and_invalid(self, store: Store) -> None:
        """``limit`` defaults to 50, is capped at 200, and below 1 raises ``InvalidArgument``."""
        chat_id = await _chat_with(store, 250)
        assert len((await store.list_messages(chat_id)).items) == 50
        assert len((await store.list_messages(chat_id, limit=500)).items) == 200
        assert len((await store.list_messages(chat_id, limit=200)).items) == 200
        assert len((await store.list_messages(chat_id, limit=1)).items) == 1
        for bad in (0, -1, -500):
            with pytest.raises(InvalidArgument):
                await store.list_messages(chat_id, limit=bad)
            with pytest.raises(InvalidArgument):
                await store.list_chats(limit=bad)
        await store.create_chat("u-pages", "t-extra")
        assert len((await store.list_chats(limit=1)).items) == 1

    @pytest.mark.asyncio
    async def test_has_more_false_on_full_last_page(self, store: Store) -> None:
        """A last page that is exactly full says ``has_more=False`` and has no cursor."""
        chat_id = await _chat_with(store, 100)
        walk = await walk_messages(store, chat_id, limit=50)
        assert walk.sizes == [50, 50]
        exact = await store.list_messages(chat_id, limit=100)
        assert (len(exact.items), exact.has_more, exact.next_cursor) == (100, False, None)
        empty_chat = await store.create_chat("u-pages", "t-empty")
        empty = await store.list_messages(empty_chat.chat_id)
        assert (empty.items, empty.has_more, empty.next_cursor) == ([], False, None)

    @pytest.mark.asyncio
    async def test_foreign_cursors_are_refused(self, store: Store) -> None:
        """A cursor from another chat, filter or listing raises ``InvalidCursor``."""
        chat_id = await _chat_with(store, 6)
        other_id = await _chat_with(store, 6, thread="t-other")
        cursor = (await store.list_messages(chat_id, limit=2)).next_cursor
        for _ in range(3):
            await store.create_chat("u-pages", f"t-c{_}")
        chat_cursor = (await store.list_chats(limit=1)).next_cursor
        assert cursor is not None
        assert chat_cursor is not None
        user_filter = MessageFilter(roles=frozenset({Role.USER}))
        with pytest.raises(InvalidCursor):
            await store.list_messages(other_id, limit=2, cursor=cursor)
        with pytest.raises(InvalidCursor):
            await store.list_messages(chat_id, limit=2, cursor=cursor, message_filter=user_filter)
        with pytest.raises(InvalidCursor):
            await store.list_messages(chat_id, limit=2, cursor=chat_cursor)
        with pytest.raises(InvalidCursor):
            await store.list_chats(limit=1, cursor=cursor)
        with pytest.raises(InvalidCursor):
            await store.list_chats(ChatFilter(user_id="u-pages"), limit=1, cursor=chat_cursor)
        for junk in ("", "x", "a.b", "....", "not-a-cursor", cursor + "=", " " + cursor):
            with pytest.raises(InvalidCursor):
                await store.list_messages(chat_id, limit=2, cursor=junk)

    @pytest.mark.asyncio
    async def test_altered_cursors_are_refused(self, store: Store) -> None:
        """A cursor with any one character changed raises ``InvalidCursor``."""
        chat_id = await _chat_with(store, 6)
        cursor = (await store.list_messages(chat_id, limit=2)).next_cursor
        assert cursor is not None
        for index, char in enumerate(cursor):
            for replacement in {"A" if char != "A" else "B", "." if char != "." else "-"}:
                altered = cursor[:index] + replacement + cursor[index + 1 :]
                with pytest.raises(InvalidCursor):
                    await store.list_messages(chat_id, limit=2, cursor=altered)
        with pytest.raises(InvalidCursor):
            await store.list_messages(chat_id, limit=2, cursor=cursor[:-1])

    @pytest.mark.asyncio
    async def test_other_secret_cursors_are_refused(
        self, store_factory: StoreFactory, capabilities: Capabilities
    ) -> None:
        """A cursor signed with another store secret raises ``InvalidCursor``.

        Checked on further instances opened while the signer is open
        (``concurrent_processes``), or after it closed (``persistent``).
        """
        if not (capabilities.concurrent_processes or capabilities.persistent):
            pytest.skip("driver declares neither 'concurrent_processes' nor 'persistent'")
        async with opened(store_factory, cursor_secret=SECRET_A) as signer:
            chat_id = await _chat_with(signer, 6)
            cursor = (await signer.list_messages(chat_id, limit=2)).next_cursor
            assert cursor is not None
            if capabilities.concurrent_processes:
                await _check_secrets(store_factory, chat_id, cursor)
                return
        await _check_secrets(store_factory, chat_id, cursor)

    @pytest.mark.asyncio
    @pytest.mark.threadkeep_capability("persistent")
    async def test_generated_secret_survives_reopen(self, store_factory: StoreFactory) -> None:
        """With no secret configured, a cursor still works after closing and reopening."""
        async with opened(store_factory) as first:
            chat_id = await _chat_with(first, 6)
            cursor = (await first.list_messages(chat_id, limit=2)).next_cursor
        async with opened(store_factory) as second:
            page = await second.list_messages(chat_id, limit=2, cursor=cursor)
        assert [m.content for m in page.items] == ["p2", "p3"]

    @pytest.mark.asyncio
    async def test_message_filters_page_exactly(self, store: Store) -> None:
        """Filtered walks (roles, kinds, run, request, block) return exactly what matches."""
        chat = await store.create_chat("u-pages", "t-filter")
        roles = [Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM]
        sent = [
            Message(
                role=roles[i % 4],
                content=f"f{i}",
                run_id=f"r{i % 3}",
                request_id=f"q{i % 2}",
                block_id=f"b{i % 5}",
            )
            for i in range(40)
        ]
        await store.append_messages(chat.chat_id, sent)
        await store.start_over(chat.chat_id)
        filters: list[tuple[MessageFilter, Callable[[Message], bool]]] = [
            (
                MessageFilter(roles=frozenset({Role.USER, Role.TOOL})),
                lambda m: m.role in {Role.USER, Role.TOOL},
            ),
            (MessageFilter(run_id="r1"), lambda m: m.run_id == "r1"),
            (MessageFilter(request_id="q0"), lambda m: m.request_id == "q0"),
            (
                MessageFilter(block_id="b3", run_id="r0"),
                lambda m: m.block_id == "b3" and m.run_id == "r0",
            ),
        ]
        for message_filter, keep in filters:
            walk = await walk_messages(store, chat.chat_id, limit=3, message_filter=message_filter)
            assert [m.content for m in walk.items] == [m.content for m in sent if keep(m)], (
                message_filter
            )
        boundaries = await store.list_messages(
            chat.chat_id, message_filter=MessageFilter(kinds=frozenset({MessageKind.BOUNDARY}))
        )
        assert [m.kind for m in boundaries.items] == [MessageKind.BOUNDARY]

    @pytest.mark.asyncio
    async def test_chat_pages_walk_exactly(self, store: Store) -> None:
        """``list_chats`` pages newest-created first and a walk yields each chat once."""
        created = [
            await store.create_chat("u-chat-pages", f"t-{i}", name=f"Chat {i}") for i in range(13)
        ]
        await store.create_chat("u-someone-else", "t-0")
        mine = ChatFilter(user_id="u-chat-pages")
        first = await store.list_chats(mine, limit=5)
        assert [c.chat_id for c in first.items] == [c.chat_id for c in created[8:]]
        walked = await walk_chats(store, mine, limit=5)
        assert [c.chat_id for c in walked] == [c.chat_id for c in created]
        keyword = await walk_chats(
            store, ChatFilter(user_id="u-chat-pages", keyword="CHAT 1"), limit=2
        )
        assert [c.name for c in keyword] == ["Chat 1", "Chat 10", "Chat 11", "Chat 12"]
