"""Hash-partitioned per-chat tables (``partitions=N``): layout, pruning, conversion.

The pruning proof is taken from the server: every statement the driver sends to PostgreSQL
during a per-chat workload is captured on the asyncpg connections (``add_query_logger``,
both the SQLAlchemy path and the direct runner), and each one that names a chat
(``chat_id = $n``) is explained with its own arguments, with the planner free to use a
custom plan and again forced to a generic one (the prepared-statement case): its plan may
touch at most one partition of each partitioned table.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from threadkeep import InvalidArgument, Message, Reasoning, ToolCall
from threadkeep_sql import SqlStore
from threadkeep_sql._cli import main, partition_store
from threadkeep_sql._partition import PARTITIONED_TABLES

from .conftest import asyncpg_dsn

PARTITIONS = 8
_NAMES_CHAT = re.compile(r"\bchat_id = \$\d+")


def partitions_in(plan: str) -> dict[str, set[str]]:
    """Return, per partitioned table, the partitions a plan names."""
    return {
        table: set(re.findall(rf"\b{table}_p\d+_of_\d+\b", plan)) for table in PARTITIONED_TABLES
    }


@pytest.fixture
async def captured(pg_schema: tuple[str, str]) -> AsyncIterator[tuple[SqlStore, list[Any]]]:
    """A store with 8 partitions and the (query, args) of every statement it sends."""
    url, schema = pg_schema
    # Statements the driver keeps prepared run through asyncpg's PreparedStatement, which
    # the query logger does not see; with the cache off the same SQL goes through
    # Connection.fetch and is logged. explain() plans each one generic too, as prepared.
    logged = make_url(url).update_query_dict({"statement_cache_size": "0"})
    store = SqlStore(
        logged.render_as_string(hide_password=False), schema=schema, partitions=PARTITIONS
    )
    sent: list[Any] = []

    def log(record: Any) -> None:
        sent.append((record.query, record.args))

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(log)

    await store.open()
    event.listen(store.driver.db.engine.sync_engine, "connect", on_connect)
    await store.driver.db.dispose()  # held connections predate the listener: start afresh
    yield store, sent
    await store.close()


async def explain(url: str, schema: str, query: str, args: Any, *, generic: bool) -> str:
    conn = await asyncpg.connect(asyncpg_dsn(url), server_settings={"search_path": schema})
    try:
        mode = "force_generic_plan" if generic else "auto"
        await conn.execute(f"SET plan_cache_mode = {mode}")
        rows = await conn.fetch(f"EXPLAIN {query}", *(args or ()))
    finally:
        await conn.close()
    return "\n".join(r[0] for r in rows)


async def per_chat_workload(store: SqlStore) -> None:
    """Every per-chat operation of the public API, on one of several chats."""
    chats = [await store.create_chat("u", f"t{i}") for i in range(12)]
    chat = chats[5]
    for other in chats:
        await store.append_message(other.chat_id, Message(role="user", content="x"))
    call = ToolCall(name="f", agui_id="tc")
    await store.append_messages(
        chat.chat_id,
        [
            Message(role="assistant", content="a", agui_id="m1", tool_calls=[call]),
            Message(role="assistant", content="b", reasonings=[Reasoning(content="r")]),
        ],
    )
    await store.append_message(chat.chat_id, Message(role="user", content="c", agui_id="m2"))
    await store.append_message(chat.chat_id, Message(role="user", content="c", agui_id="m2"))
    page = await store.list_messages(chat.chat_id, limit=2)
    await store.list_messages(chat.chat_id, limit=2, cursor=page.next_cursor)
    await store.list_messages(chat.chat_id, message_filter={"roles": ["assistant"]})
    stored = await store.get_message_by_agui_id(chat.chat_id, "m1")
    await store.get_tool_call_by_agui_id(chat.chat_id, "tc")
    await store.update_message(stored.message_id, content="a2")
    await store.delete_messages(chat.chat_id, [stored.message_id])
    await store.compact(chat.chat_id, "summary", page.items[-1].seq)
    await store.context_messages(chat.chat_id)
    await store.begin_run(chat.chat_id, "r1", owner="w", messages=[Message(role="user")])
    await store.end_run(
        chat.chat_id, "r1", owner="w", status="complete", messages=[Message(role="assistant")]
    )
    await store.get_run(chat.chat_id, "r1")
    await store.discard_run(chat.chat_id, "r1")


async def test_new_store_is_partitioned(captured: tuple[SqlStore, list[Any]]) -> None:
    store, _ = captured
    async with store.driver.db.read() as conn:
        for table in PARTITIONED_TABLES:
            rows = await conn.exec_driver_sql(
                f"SELECT count(*) FROM pg_inherits WHERE inhparent = '{table}'::regclass"
            )
            assert rows.scalar() == PARTITIONS, table


async def test_per_chat_statements_touch_one_partition(
    captured: tuple[SqlStore, list[Any]], pg_schema: tuple[str, str]
) -> None:
    store, sent = captured
    await per_chat_workload(store)
    url, schema = pg_schema
    first_args: dict[str, Any] = {}
    for query, args in sent:  # each statement once, with the arguments it was first sent with
        first_args.setdefault(query, args)
    per_chat = [(q, a) for q, a in first_args.items() if _NAMES_CHAT.search(q)]
    checked = 0
    for query, args in per_chat:
        for generic in (False, True):
            plan = await explain(url, schema, query, args, generic=generic)
            touched = partitions_in(plan)
            assert all(len(names) <= 1 for names in touched.values()), (query, plan)
            checked += any(touched.values())
    # Not vacuous: pages, appends' agui checks, lookups, updates and deletes were explained.
    assert checked >= 10, per_chat
    pages = [q for q, _ in per_chat if "ORDER BY messages.seq DESC" in q]
    assert pages, "no message page was sent"


async def test_partitions_option_meets_other_layout(pg_schema: tuple[str, str]) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema) as plain:
        await plain.create_chat("u", "t")
    with pytest.raises(InvalidArgument, match="threadkeep-sql partition"):
        await SqlStore(url, schema=schema, partitions=4).open()


async def test_partition_command_converts_an_existing_store(
    pg_schema: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, schema = pg_schema
    async with SqlStore(url, schema=schema) as plain:
        chat = await plain.create_chat("u", "t")
        call = ToolCall(name="f", agui_id="tc")
        await plain.append_messages(
            chat.chat_id,
            [Message(role="user", content=str(i), agui_id=f"a{i}") for i in range(30)]
            + [Message(role="assistant", content="call", tool_calls=[call])],
        )
        await plain.begin_run(chat.chat_id, "r", owner="w", messages=[Message(role="user")])
        before = [m.content for m in (await plain.list_messages(chat.chat_id, limit=100)).items]
    moved = await partition_store(f"{url}?schema={schema}", 4)
    assert moved["messages"] == len(before)
    assert moved["message_refs"] == 1
    assert moved["runs"] == 1
    async with SqlStore(url, schema=schema, partitions=4) as store:
        page = await store.list_messages(chat.chat_id, limit=100)
        assert [m.content for m in page.items] == before
        stored = await store.get_message_by_agui_id(chat.chat_id, "a3")
        assert stored.content == "3"
        assert (await store.get_tool_call(call.tool_call_id)).tool_call_id == call.tool_call_id
        retry = Message(role="user", content="3", agui_id="a3")
        again = await store.append_message(chat.chat_id, retry)
        assert again.message_id == stored.message_id  # the per-chat agui key still holds
    assert await partition_store(f"{url}?schema={schema}", 4) == {}  # already so: no-op
    # The console script, as documented: threadkeep-sql partition URL --partitions N
    command = partial(asyncio.to_thread, main)  # main runs its own event loop
    assert await command(["partition", f"{url}?schema={schema}", "--partitions", "6"]) == 0
    out = capsys.readouterr().out
    assert f"messages: {len(before)} rows moved into 6 partitions" in out
    assert await command(["partition", "sqlite+aiosqlite:///x.db", "--partitions", "6"]) == 2
    assert await command(["partition", f"{url}?schema={schema}", "--partitions", "1"]) == 2
    async with SqlStore(url, schema=schema, partitions=6) as store:
        assert len((await store.list_messages(chat.chat_id, limit=100)).items) == len(before)
