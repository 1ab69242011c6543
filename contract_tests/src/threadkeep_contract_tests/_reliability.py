"""Faults a user meets: cancelled writes, racing writers, hostile nesting and input (issue 12).

* A write cancelled at any await (``asyncio.wait_for``, a client gone away) leaves no
  transaction open, nothing locked and no connection checked out: the next write succeeds.
* Writers appending to one chat at the same time never fail for the race.
* Nesting deeper than ``MAX_NESTING_DEPTH`` is ``InvalidContent`` naming the limit, at any
  depth (no walker recurses without a bound).
* Ids that are not clean text (bytes, surrounding whitespace, control characters) are
  ``InvalidArgument`` and nothing is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest

from threadkeep import (
    MAX_NESTING_DEPTH,
    ChatFilter,
    Conflict,
    InvalidArgument,
    InvalidContent,
    Message,
    Store,
)

from ._base import ContractBase

__all__ = ["ReliabilityTests", "nested"]

CANCEL_TRIES = 48
"""Cancellations per test: after 0, 1, ... event-loop iterations, cycling."""
WRITERS = 50
"""Concurrent asyncio writers on one chat."""
LOAD_BATCH = 20
"""Messages per cancelled ``load_messages`` (one batch of the driver's bulk path)."""
APPENDS_PER_WRITER = 6
"""Appends (of two messages each) every writer makes, one after the other."""


def nested(depth: int) -> dict[str, Any]:
    """Return ``{"a": {"a": ...}}`` nested ``depth`` levels, built without recursion."""
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        node["a"] = child
        node = child
    return root


async def _cancel_after(awaitable: Any, iterations: int) -> bool:
    """Run ``awaitable``, cancel it after ``iterations`` loop turns; True if it finished first."""
    task = asyncio.ensure_future(awaitable)
    for _ in range(iterations):
        if task.done():
            break
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return False
    return True


class ReliabilityTests(ContractBase):
    """Cancellation, racing writers, deep nesting and unclean ids, on every driver."""

    contract_area: ClassVar[str] = "Reliability"

    @pytest.mark.asyncio
    async def test_cancelled_appends_leave_the_store_usable(self, store: Store) -> None:
        chat = await store.create_chat("u-cancel", "t-cancel")
        completed = 0
        for attempt in range(CANCEL_TRIES):
            batch = [Message(role="user", content=f"c{attempt}-{i}") for i in range(3)]
            completed += await _cancel_after(
                store.append_messages(chat.chat_id, batch), attempt % 16
            )
            # The next write succeeds (on a locked SQLite database it would wait for the
            # busy timeout and fail), and a read sees a whole batch or none of it.
            await store.append_message(chat.chat_id, Message(role="user", content=f"n{attempt}"))
        page = await store.list_messages(chat.chat_id, limit=200)
        contents = [m.content for m in page.items]
        for attempt in range(CANCEL_TRIES):
            kept = [c for c in contents if c.startswith(f"c{attempt}-")]
            assert len(kept) in (0, 3), f"a cancelled batch was half-written: {kept}"
            assert f"n{attempt}" in contents
        assert completed < CANCEL_TRIES, "no append was ever cancelled mid-way"

    @pytest.mark.asyncio
    async def test_cancelled_loads_leave_the_store_usable(self, store: Store) -> None:
        """A cancelled ``load_messages`` (the bulk path) leaves nothing locked or half-done.

        On SQLite a load cancelled mid-batch once left ``BEGIN IMMEDIATE`` held: the next
        write failed ``database is locked``.
        """
        chat = await store.create_chat("u-cancel", "t-load")
        completed = 0
        for attempt in range(CANCEL_TRIES):
            batch = [Message(role="user", content=f"c{attempt}-{i}") for i in range(LOAD_BATCH)]
            completed += await _cancel_after(store.load_messages(chat.chat_id, batch), attempt % 16)
            await store.append_message(chat.chat_id, Message(role="user", content=f"n{attempt}"))
        contents: list[str] = []
        cursor = None
        while True:
            page = await store.list_messages(chat.chat_id, limit=200, cursor=cursor)
            contents += [m.content for m in page.items]
            if not page.has_more:
                break
            cursor = page.next_cursor
        for attempt in range(CANCEL_TRIES):
            kept = [c for c in contents if c.startswith(f"c{attempt}-")]
            assert len(kept) in (0, LOAD_BATCH), f"a cancelled load was half-written: {kept}"
            assert f"n{attempt}" in contents
        assert completed < CANCEL_TRIES, "no load was ever cancelled mid-way"

    @pytest.mark.asyncio
    async def test_cancelled_chat_writes_leave_the_store_usable(self, store: Store) -> None:
        for attempt in range(CANCEL_TRIES):
            iterations = attempt % 16
            write = (
                store.create_chat("u-cancel", f"t{attempt}")
                if attempt % 2
                else store.update_chat((await store.create_chat("u-c", "t")).chat_id, name="x")
            )
            await _cancel_after(write, iterations)
            chat = await store.create_chat("u-after", f"t{attempt}")
            assert chat.user_id == "u-after"
        page = await store.list_chats(ChatFilter(user_id="u-after"), limit=200)
        assert len(page.items) == CANCEL_TRIES

    @pytest.mark.asyncio
    async def test_concurrent_writers_on_one_chat_all_succeed(self, store: Store) -> None:
        chat = await store.create_chat("u-race", "t-race")

        async def writer(n: int) -> list[list[Message]]:
            return [
                await store.append_messages(
                    chat.chat_id,
                    [Message(role="user", content=f"w{n}-{k}-{i}") for i in range(2)],
                )
                for k in range(APPENDS_PER_WRITER)
            ]

        done = await asyncio.gather(*(writer(n) for n in range(WRITERS)))
        results = [batch for batches in done for batch in batches]
        total = 2 * WRITERS * APPENDS_PER_WRITER
        seqs = sorted(m.seq for batch in results for m in batch if m.seq is not None)
        assert len(seqs) == total, "an append was lost"
        assert len(set(seqs)) == total, "a seq was given twice"
        for batch in results:
            first, second = batch
            assert first.seq is not None, "no seq assigned"
            assert second.seq == first.seq + 1, "a batch was split"
        seen, cursor = 0, None
        while True:
            page = await store.list_messages(chat.chat_id, limit=200, cursor=cursor)
            seen += len(page.items)
            if not page.has_more:
                break
            cursor = page.next_cursor
        assert seen == total

    @pytest.mark.asyncio
    @pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 10_000, 100_000])
    async def test_deep_nesting_is_invalid_content(self, store: Store, depth: int) -> None:
        chat = await store.create_chat("u-deep", "t-deep")
        deep = nested(depth)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "append_message": lambda: store.append_message(
                chat.chat_id, Message(role="user", metadata=deep)
            ),
            "create_chat": lambda: store.create_chat("u-deep", "t-other", metadata=deep),
            "update_chat": lambda: store.update_chat(chat.chat_id, metadata=deep),
            "append_messages[list]": lambda: store.append_messages(
                chat.chat_id, [Message(role="user", metadata={"x": [deep]})]
            ),
        }
        for name, call in calls.items():
            with pytest.raises(InvalidContent) as caught:
                await call()
            assert str(MAX_NESTING_DEPTH) in str(caught.value), name
        assert (await store.list_messages(chat.chat_id)).items == []
        assert await store.find_chat("u-deep", "t-other") is None

    @pytest.mark.asyncio
    async def test_nesting_at_the_limit_round_trips(self, store: Store) -> None:
        chat = await store.create_chat("u-deep", "t-limit")
        # The message is level 1 and metadata level 2: this is the deepest allowed.
        metadata = nested(MAX_NESTING_DEPTH - 1)
        stored = await store.append_message(chat.chat_id, Message(role="user", metadata=metadata))
        assert (await store.get_message(stored.message_id)).metadata == metadata
        (paged,) = (await store.list_messages(chat.chat_id)).items
        assert paged.metadata == metadata

    @pytest.mark.asyncio
    async def test_no_call_hands_one_tenants_chat_to_another(self, store: Store) -> None:
        """Issue 12: a chat's identity is ``(tenant_id, user_id, thread_id)``.

        Tenants A, B and none each get their own live chat for one user and thread from
        ``create_chat``, and ``find_chat`` finds only the chat of the tenant it names.
        """
        a = await store.create_chat("alice", "t1", tenant_id="A", name="secret")
        await store.append_message(a.chat_id, Message(role="user", content="private"))
        b = await store.create_chat("alice", "t1", tenant_id="B", name="mine")
        plain = await store.create_chat("alice", "t1", name="plain")
        assert len({a.chat_id, b.chat_id, plain.chat_id}) == 3
        assert [(c.tenant_id, c.name) for c in (b, plain)] == [("B", "mine"), (None, "plain")]
        assert (await store.list_messages(b.chat_id)).items == []
        for tenant, chat in (("A", a), ("B", b), (None, plain)):
            again = await store.create_chat("alice", "t1", tenant_id=tenant, name="other")
            found = await store.find_chat("alice", "t1", tenant_id=tenant)
            assert found is not None
            assert (again.chat_id, found.chat_id) == (chat.chat_id, chat.chat_id), tenant
            assert (again.tenant_id, found.tenant_id, found.name) == (tenant, tenant, chat.name)
        assert await store.find_chat("alice", "t1", tenant_id="C") is None
        listed = await store.list_chats(ChatFilter(user_id="alice", tenant_id="B"))
        assert [c.chat_id for c in listed.items] == [b.chat_id]
        with pytest.raises(InvalidArgument):  # the tenant is identity: it never changes
            await store.update_chat(b.chat_id, tenant_id="A")

    @pytest.mark.asyncio
    async def test_tenants_delete_restore_and_race_on_their_own_keys(self, store: Store) -> None:
        """Deleting, restoring and racing creates of one tenant's chat never touch another's."""
        a = await store.create_chat("alice", "t2", tenant_id="A")
        b = await store.create_chat("alice", "t2", tenant_id="B")
        await store.delete_chat(a.chat_id)
        assert await store.find_chat("alice", "t2", tenant_id="A") is None
        kept = await store.find_chat("alice", "t2", tenant_id="B")
        assert kept is not None
        assert kept.chat_id == b.chat_id
        assert await store.find_chat("alice", "t2") is None
        fresh = await store.create_chat("alice", "t2", tenant_id="A")
        assert fresh.chat_id not in (a.chat_id, b.chat_id)
        with pytest.raises(Conflict):  # A's key is held again, by A's new chat
            await store.restore_chat(a.chat_id)
        await store.delete_chat(fresh.chat_id)
        assert (await store.restore_chat(a.chat_id)).chat_id == a.chat_id
        tenants = ["A", "B", None] * 6
        raced = await asyncio.gather(
            *(store.create_chat("carol", "t-race", tenant_id=t) for t in tenants)
        )
        pairs = list(zip(raced, tenants, strict=True))
        ids = {t: {c.chat_id for c, u in pairs if u == t} for t in tenants}
        assert all(len(one) == 1 for one in ids.values()), ids
        assert len(set().union(*ids.values())) == 3
        assert all(c.tenant_id == t for c, t in pairs)
        await store.erase_user("carol")  # removes live chats for good: their keys are free
        for tenant in ("A", "B", None):
            assert await store.find_chat("carol", "t-race", tenant_id=tenant) is None
            anew = await store.create_chat("carol", "t-race", tenant_id=tenant)
            assert anew.chat_id not in ids[tenant]

    @pytest.mark.asyncio
    @pytest.mark.parametrize(
        "bad", [b"u", " u", "u ", "u\n", "\tu", "u\x00", "a\x1bb", "u\u2028", bytearray(b"u")]
    )
    async def test_unclean_ids_are_invalid_argument(self, store: Store, bad: Any) -> None:
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "create_chat(user_id)": lambda: store.create_chat(bad, "t"),
            "create_chat(thread_id)": lambda: store.create_chat("u", bad),
            "create_chat(tenant_id)": lambda: store.create_chat("u", "t-ten", tenant_id=bad),
            "find_chat": lambda: store.find_chat(bad, "t"),
        }
        for name, call in calls.items():
            with pytest.raises(InvalidArgument):
                await call()
            assert (await store.list_chats(ChatFilter(deleted="include"))).items == [], name
