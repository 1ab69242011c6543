"""Small tools the contract tests share: page walks, clocks, bodies, real data."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from threadkeep import Chat, ChatFilter, CorruptRow, Message, MessageFilter, Page, Store

from ._base import StoreFactory

__all__ = [
    "REALDATA_ENV",
    "STORE_ASSIGNED",
    "SteppingClock",
    "Walk",
    "acebench_dialogues",
    "assert_utc",
    "body_of",
    "opened",
    "realdata_dir",
    "require_realdata",
    "walk_chats",
    "walk_messages",
    "walk_past_damage",
]

STORE_ASSIGNED = frozenset({"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"})
"""Message fields the store assigns; everything else must read back as written."""

REALDATA_ENV = "THREADKEEP_REALDATA"
"""Environment variable pointing at a ``realdata`` folder (default: ``../shared/realdata``)."""


def body_of(message: Message) -> dict[str, Any]:
    """Return what a client wrote: the message as JSON without store-assigned fields."""
    return message.model_dump(mode="json", exclude=set(STORE_ASSIGNED))


def assert_utc(value: datetime | None, what: str) -> None:
    """Assert ``value`` is a timezone-aware datetime at UTC offset zero."""
    assert value is not None, f"{what} is missing"
    assert value.tzinfo is not None, f"{what} is naive: {value!r}"
    assert value.utcoffset() == timedelta(0), f"{what} is not UTC: {value!r}"


@asynccontextmanager
async def opened(factory: StoreFactory, **options: Any) -> AsyncIterator[Store]:
    """Open ``factory(**options)`` for the ``async with`` block and close it afterwards."""
    store = await factory(**options).open()
    try:
        yield store
    finally:
        await store.close()


@dataclass
class SteppingClock:
    """A clock returning ``start``, ``start + step``, ``start + 2 * step``... per call.

    ``step=timedelta(0)`` freezes time; a negative step makes the clock run backwards
    (real clocks step backwards and tie; order must come from ``seq`` alone).
    """

    start: datetime = field(default_factory=lambda: datetime(2030, 1, 1, tzinfo=UTC))
    step: timedelta = timedelta(0)
    calls: int = 0

    def __call__(self) -> datetime:
        """Return the next instant."""
        now = self.start + self.step * self.calls
        self.calls += 1
        return now

    def advance(self, delta: timedelta) -> None:
        """Move every later instant by ``delta`` (a lease expiring, a sweeper waking up)."""
        self.start += delta


@dataclass
class Walk:
    """The result of walking every page of a keyset listing.

    Attributes:
        items: Every item, oldest first (pages reversed and joined).
        sizes: Items per page, in the order the pages were read (newest page first).
    """

    items: list[Any]
    sizes: list[int]


def _check_page(page: Page[Any], limit: int, seq_of: Callable[[Any], int | None]) -> None:
    seqs = [seq_of(item) for item in page.items]
    assert all(s is not None for s in seqs), f"items without seq: {seqs}"
    assert seqs == sorted(seqs), f"a page must run oldest to newest by seq, got {seqs}"  # type: ignore[type-var]
    assert len(set(seqs)) == len(seqs), f"a page repeats an item: {seqs}"
    assert len(page.items) <= limit, f"page of {len(page.items)} items for limit {limit}"
    assert page.has_more == (page.next_cursor is not None), (
        f"has_more={page.has_more} but next_cursor={page.next_cursor!r}"
    )
    if page.has_more:
        assert len(page.items) == limit, f"a page with has_more holds {len(page.items)} < {limit}"


async def _walk(
    fetch: Callable[[str | None], Awaitable[Page[Any]]],
    limit: int,
    seq_of: Callable[[Any], int | None],
    between_pages: Callable[[], Awaitable[None]] | None,
) -> Walk:
    pages: list[list[Any]] = []
    cursor: str | None = None
    for _ in range(100_000):
        page = await fetch(cursor)
        _check_page(page, limit, seq_of)
        if pages and page.items:
            older, newer = seq_of(page.items[-1]), seq_of(pages[-1][0])
            assert older is not None
            assert newer is not None
            assert older < newer, (
                f"page ends at seq {older}, not older than the previous page's {newer}"
            )
        pages.append(page.items)
        if not page.has_more:
            break
        cursor = page.next_cursor
        if between_pages is not None:
            await between_pages()
    items = [item for page_items in reversed(pages) for item in page_items]
    return Walk(items=items, sizes=[len(p) for p in pages])


async def walk_messages(
    store: Store,
    chat_id: UUID,
    *,
    limit: int,
    message_filter: MessageFilter | None = None,
    between_pages: Callable[[], Awaitable[None]] | None = None,
) -> Walk:
    """Walk a chat's history page by page, checking each page's shape on the way.

    Args:
        store: An open store.
        chat_id: The chat.
        limit: Page size.
        message_filter: Passed to every ``list_messages`` call.
        between_pages: Awaited after each page that has more (to write concurrently).

    Returns:
        Every message, oldest first, and the page sizes.
    """

    async def fetch(cursor: str | None) -> Page[Any]:
        return await store.list_messages(
            chat_id, limit=limit, cursor=cursor, message_filter=message_filter
        )

    return await _walk(fetch, limit, lambda m: m.seq, between_pages)


async def walk_past_damage(
    store: Store, chat_id: UUID, *, limit: int
) -> tuple[list[Message], list[CorruptRow]]:
    """Walk a chat's history on a ``corrupt_records="skip"`` store, collecting the damage.

    Unlike :func:`walk_messages` it does not check page sizes: a page that skipped damaged
    rows holds fewer than ``limit`` messages and may still have more.

    Args:
        store: An open store made with ``corrupt_records="skip"``.
        chat_id: The chat.
        limit: Page size (``list_messages``' ``limit``).

    Returns:
        ``(messages, corrupt)``: every readable message, oldest first, and every
        ``CorruptRow`` the pages reported, in the order they were read (newest page first).
    """
    pages: list[list[Message]] = []
    corrupt: list[CorruptRow] = []
    cursor: str | None = None
    while True:
        page = await store.list_messages(chat_id, limit=limit, cursor=cursor)
        pages.append(list(page.items))
        corrupt += page.corrupt
        if not page.has_more:
            return [m for items in reversed(pages) for m in items], corrupt
        cursor = page.next_cursor


async def walk_chats(
    store: Store, chat_filter: ChatFilter | Mapping[str, Any] | None, *, limit: int
) -> list[Chat]:
    """Walk ``list_chats`` page by page; return every chat, oldest created first."""

    async def fetch(cursor: str | None) -> Page[Any]:
        return await store.list_chats(chat_filter, limit=limit, cursor=cursor)

    walk = await _walk(fetch, limit, lambda c: c.seq, None)
    return walk.items


def realdata_dir() -> Path | None:
    """Return the shared ``realdata`` folder, or ``None`` when it is not on this machine.

    Looks at ``$THREADKEEP_REALDATA``, then ``shared/realdata`` next to the working directory
    and each of its parents.
    """
    configured = os.environ.get(REALDATA_ENV)
    if configured:
        path = Path(configured)
        return path if path.is_dir() else None
    for base in [Path.cwd(), *Path.cwd().parents]:
        candidate = base.parent / "shared" / "realdata"
        if candidate.is_dir():
            return candidate
    return None


def require_realdata(path: Path | None, what: str = "real recorded data") -> Path:
    """Return ``path`` if it exists, else skip the calling test saying what it lacks.

    Real recorded conversations (agent traces from several stacks) are kept beside the
    repository in ``../shared/realdata``, not shipped with threadkeep: a fresh clone does not
    have them, and the tests that read them skip, saying so.

    Args:
        path: The file or folder the test reads (``None``: none found).
        what: What it is, for the reason (``"tau-bench trajectories"``).

    Raises:
        pytest.skip.Exception: If ``path`` is ``None`` or does not exist.
    """
    if path is not None and path.exists():
        return path
    where = "" if path is None else f" ({path})"
    pytest.skip(
        f"{what} not present{where}: recorded real conversations are kept beside the "
        "repository in ../shared/realdata, not shipped with it; these tests run where it exists"
    )


def _acebench_lines(path: Path) -> Iterator[tuple[str, str]]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        question = record.get("question")
        if isinstance(question, str):
            yield question, json.dumps(record.get("function"), ensure_ascii=False)


def acebench_dialogues(limit: int) -> list[tuple[list[tuple[str, str]], str]]:
    """Return up to ``limit`` CJK dialogues from ACEBench: ``([(role, text)...], tools_json)``.

    ``role`` is ``user`` or ``assistant`` (ACEBench calls the assistant ``system``);
    ``tools_json`` is the record's function list as JSON text, used as tool-call arguments.

    Raises:
        pytest.skip.Exception: If the ACEBench files are not on this machine.
    """
    root = realdata_dir()
    path = None if root is None else root / "acebench" / "data_all" / "data_zh"
    source = None if path is None else path / "data_normal_multi_turn_user_switch.json"
    source = require_realdata(source, "ACEBench dialogues")
    dialogues: list[tuple[list[tuple[str, str]], str]] = []
    for question, tools in _acebench_lines(source):
        turns: list[tuple[str, str]] = []
        for line in question.splitlines():
            speaker, sep, text = line.partition(": ")
            if sep and speaker in {"user", "system"} and text:
                turns.append(("user" if speaker == "user" else "assistant", text))
        if turns:
            dialogues.append((turns, tools))
        if len(dialogues) == limit:
            break
    return dialogues
