"""PostgreSQL query plans: every hot read is an index walk, pages never sort or offset.

Plans, not timings: with sequential scans disabled for the transaction, each statement the
driver sends must use the named index and, for pages, read in index order (no Sort node), so
a page 500,000 messages deep costs what the first one does. The SQL explained is what the
PostgreSQL runner sends (``_runner.RawStatement``), parameters bound the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from threadkeep import ChatFilter, Message, ToolCall
from threadkeep_sql import SqlStore
from threadkeep_sql._chats import chat_page
from threadkeep_sql._messages import (
    _FIND_NESTED,
    _FIND_NESTED_BY_AGUI,
    _GET_BY_AGUI,
    _LAST_BOUNDARY,
    _PAGE,
)
from threadkeep_sql._runner import RawStatement


async def plan(store: SqlStore, stmt: Any, params: dict[str, Any]) -> str:
    async with store.driver.db.transaction() as conn:
        raw = RawStatement.compile(stmt, conn.dialect)
        await conn.execute(sa.text("ANALYZE"))
        await conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        rows = await conn.exec_driver_sql(f"EXPLAIN {raw.sql}", tuple(raw.args(params)))
        return "\n".join(r[0] for r in rows)


@pytest.fixture
async def pg_store(pg_schema) -> SqlStore:
    url, schema = pg_schema
    store = await SqlStore(url, schema=schema).open()
    yield store
    await store.close()


async def test_hot_reads_use_their_indexes(pg_store: SqlStore) -> None:
    for n in range(20):  # enough rows for the planner to prefer selective indexes
        chat = await pg_store.create_chat("u", f"t{n}")
        await pg_store.append_messages(
            chat.chat_id,
            [
                Message(
                    role="assistant",
                    content=str(i),
                    agui_id=f"a{i}",
                    tool_calls=[ToolCall(name="f", agui_id=f"tc{i}")],
                )
                for i in range(20)
            ],
        )
    for _ in range(10):  # one long chat: 2,000 more messages
        await pg_store.append_messages(
            chat.chat_id, [Message(role="user", content="x") for _ in range(200)]
        )
    call = next(
        m for m in (await pg_store.primitives.scan_messages(chat.chat_id, 0, 5))
    ).tool_calls[0]
    c = {"chat_id": chat.chat_id}
    page = await plan(pg_store, _PAGE, {**c, "before": 1_000, "limit": 51})
    assert "Index Scan Backward using messages_pkey" in page
    assert "Sort" not in page
    assert "Offset" not in page
    by_agui = await plan(pg_store, _GET_BY_AGUI, {**c, "agui_id": "a0"})
    assert "ux_messages_agui" in by_agui
    nested = await plan(pg_store, _FIND_NESTED, {"kind": "tool_call", "item_id": call.tool_call_id})
    assert "ix_message_refs_item" in nested
    nested_agui = await plan(
        pg_store, _FIND_NESTED_BY_AGUI, {**c, "kind": "tool_call", "agui_id": "tc3"}
    )
    assert "ix_message_refs_agui" in nested_agui
    boundary = await plan(pg_store, _LAST_BOUNDARY, c)
    assert "ix_messages_boundary" in boundary
    for text in (page, by_agui, nested, nested_agui, boundary):
        assert "Seq Scan" not in text, text


async def test_chat_list_and_previews_walk_indexes(pg_store: SqlStore) -> None:
    for i in range(5):
        chat = await pg_store.create_chat("u", f"t{i}")
        await pg_store.append_message(chat.chat_id, Message(role="user", content="hi"))
    for before in (None, 10**9):
        listing, params = chat_page(ChatFilter(user_id="u"), "postgresql", before, 51)
        text = await plan(pg_store, listing, params)
        assert "ix_chats_user_seq" in text
        assert "Sort" not in text
    ids = [c.chat_id for c in (await pg_store.list_chats()).items]
    previews = await plan(pg_store, pg_store.driver._last_messages_sql, {"chat_ids": ids})
    assert "messages_pkey" in previews
    assert "Seq Scan" not in previews
