"""Acceptance (issue 7): import real transcripts, archive them all, read them back, erase.

``threadkeep import`` of the tau-bench airline file, then ``threadkeep archive --older-than
0d``, then reading every chat back gives the same messages as before archiving; then
``erase_user`` leaves no trace in either store (checked through the driver's scan
primitives and the archive's listing) and its receipt counts match. Runs on SQLite +
``file://``, and on PostgreSQL + S3 when ``THREADKEEP_TEST_POSTGRES_URL`` and
``THREADKEEP_TEST_S3_URL`` are set. The data is read from ``../shared/realdata``; without it
the test skips.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from threadkeep import ChatFilter, ChatStatus, Store, open_store
from threadkeep._store_tiering import open_archive
from threadkeep_contract_tests import require_realdata, require_service
from threadkeep_sql.testing import create_schema, drop_schema

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE = REPO_ROOT.parent / "shared/realdata/tau-bench/historical_trajectories/gpt-4o-airline.json"
USER = "importer"
CHATS, MESSAGES = 200, 5308


@pytest.fixture(params=["sqlite+file", "postgresql+s3"])
def stores(
    request: pytest.FixtureRequest, sqlite_url: str, tmp_path: Path
) -> Iterator[tuple[str, dict[str, Any], str]]:
    """Yield ``(store url, driver options, archive url)``, all empty."""
    require_realdata(SOURCE, "tau-bench trajectories")
    if request.param == "sqlite+file":
        yield sqlite_url, {}, f"file://{tmp_path / 'archive'}"
        return
    server = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
    s3_root = require_service("THREADKEEP_TEST_S3_URL", "S3")
    archive_url = f"{s3_root.rstrip('/')}/tau-{uuid.uuid4().hex}"
    url = asyncio.run(create_schema(server, prefix="tk_arch"))
    try:
        yield url, {}, archive_url
    finally:
        asyncio.run(drop_schema(url))
        asyncio.run(_empty(archive_url))


async def _empty(archive_url: str) -> None:
    async with open_archive(archive_url) as archive:
        async for info in archive.list():
            await archive.delete(info.key)


async def _read_all(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every chat of the user, by thread id, as its messages' JSON, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    cursor = None
    while True:
        chats = await store.list_chats(ChatFilter(user_id=USER), limit=200, cursor=cursor)
        for chat in chats.items:
            pages, page_cursor = [], None
            while True:
                page = await store.list_messages(chat.chat_id, limit=200, cursor=page_cursor)
                pages.append(page.items)
                if not page.has_more:
                    break
                page_cursor = page.next_cursor
            found[chat.thread_id] = [
                m.model_dump(mode="json") for items in reversed(pages) for m in items
            ]
        if not chats.has_more:
            return found
        cursor = chats.next_cursor


async def _hot_rows(store: Store) -> tuple[dict[ChatStatus, int], int]:
    statuses: dict[ChatStatus, int] = {}
    rows = 0
    for chat in await store.primitives.page_chats(
        ChatFilter(user_id=USER, deleted="include"), None, 1000
    ):
        statuses[chat.status] = statuses.get(chat.status, 0) + 1
        rows += len(await store.primitives.scan_messages(chat.chat_id, 0, 10_000))
    return statuses, rows


async def _keys(archive_url: str) -> list[str]:
    async with open_archive(archive_url) as archive:
        return [info.key async for info in archive.list()]


def test_import_archive_read_back_and_erase(cli, stores) -> None:
    url, options, archive_url = stores
    imported = cli.json("import", str(SOURCE), "--format", "openai", "--json", "--url", url)
    assert (imported["chats"], imported["messages"]) == (CHATS, MESSAGES)

    async def read() -> dict[str, list[dict[str, Any]]]:
        async with open_store(url, **options) as store:
            return await _read_all(store)

    async def back_door() -> tuple[dict[ChatStatus, int], int]:
        async with open_store(url, **options) as store:
            return await _hot_rows(store)

    before = asyncio.run(read())
    assert len(before) == CHATS

    archived = cli.json(
        "archive", "--older-than", "0d", "--archive-url", archive_url, "--url", url, "--json"
    )["archived"]
    assert len(archived) == CHATS
    assert sum(r["messages"] for r in archived) == MESSAGES
    assert asyncio.run(back_door()) == ({ChatStatus.ARCHIVED: CHATS}, 0)
    assert len(asyncio.run(_keys(archive_url))) == CHATS

    assert asyncio.run(read()) == before  # every chat rehydrated on read, equal
    assert asyncio.run(back_door()) == ({ChatStatus.ACTIVE: CHATS}, MESSAGES)

    again = cli.json(
        "archive", "--older-than", "0d", "--url", url, "--json", "--archive-url", archive_url
    )["archived"]
    assert len(again) == CHATS
    assert len(asyncio.run(_keys(archive_url))) == CHATS  # stale objects replaced, not added

    async def erase() -> Any:
        async with open_store(url, **options) as store:
            return await store.erase_user(USER)

    ids = [
        UUID(item[key])
        for messages in before.values()
        for message in messages
        for item, key in [(message, "message_id")]
        + [(call, "tool_call_id") for call in message["tool_calls"]]
    ]

    async def indexed() -> int:
        async with open_store(url, **options) as store:
            return sum([await store.primitives.archived_chat_of(i) is not None for i in ids])

    assert asyncio.run(indexed()) == len(ids)  # every id findable while archived
    receipt = asyncio.run(erase())
    assert receipt.stores["archive"] == {"bundles": CHATS, "messages": MESSAGES, "steps": 0}
    assert receipt.stores["hot"]["chats"] == CHATS
    assert receipt.stores["hot"].get("archived_ids", len(ids)) == len(ids)
    assert asyncio.run(back_door()) == ({}, 0)
    assert asyncio.run(indexed()) == 0
    assert asyncio.run(_keys(archive_url)) == []
