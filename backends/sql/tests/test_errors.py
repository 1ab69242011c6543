"""Native errors are mapped to threadkeep's tree in one place; none escape."""

from __future__ import annotations

import asyncio
import gc
import logging
import sqlite3
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from threadkeep import (
    BackendUnavailable,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    Message,
    StorageDamaged,
    StorageFull,
    StorageReadOnly,
    open_store,
)
from threadkeep_sql import SqlDriver, SqlStore, map_native_errors


async def test_postgres_unreachable_is_backend_unavailable() -> None:
    store = SqlStore("postgresql+asyncpg://nobody:secret@127.0.0.1:1/none")
    with pytest.raises(BackendUnavailable, match="database failed") as info:
        await store.open()
    assert not store.is_open
    assert isinstance(info.value.__cause__, BaseException)


async def test_sqlite_in_a_missing_directory_is_backend_unavailable(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}")
    with pytest.raises(BackendUnavailable, match="does not exist"):
        await store.open()


async def test_unhandled_unique_violation_is_conflict(store: SqlStore) -> None:
    chat = await store.create_chat("u", "t")
    first = await store.append_message(chat.chat_id, Message(role="user", content="a"))
    # Same message_id, no agui_id: nothing makes it a retry, so it is a conflict.
    with pytest.raises(Conflict):
        await store.append_message(
            chat.chat_id, Message(message_id=first.message_id, role="user", content="b")
        )
    with pytest.raises(Conflict):
        await store.append_messages(
            chat.chat_id,
            [
                Message(role="user", content="ok"),
                Message(message_id=first.message_id, role="user", content="b"),
            ],
        )
    assert [m.content for m in (await store.list_messages(chat.chat_id)).items] == ["a"]


async def test_restoring_a_chat_whose_key_is_taken_is_conflict(store: SqlStore) -> None:
    old = await store.create_chat("u", "k")
    await store.delete_chat(old.chat_id)
    await store.create_chat("u", "k")
    with pytest.raises(Conflict, match="another live chat holds"):
        await store.restore_chat(old.chat_id)


async def test_failed_batch_writes_nothing_and_leaves_no_transaction_open(
    store: SqlStore,
) -> None:
    chat = await store.create_chat("u", "t")
    await store.append_message(chat.chat_id, Message(role="user", content="a", agui_id="x"))
    batch = [
        Message(role="user", content="new", agui_id="y"),
        Message(role="user", content="different", agui_id="x"),
    ]
    with pytest.raises(IdempotencyConflict):
        await store.append_messages(chat.chat_id, batch)
    assert [m.agui_id for m in (await store.list_messages(chat.chat_id)).items] == ["x"]
    # The connection went back clean: the next writes (which need the write lock) succeed.
    for i in range(3):
        await store.append_message(chat.chat_id, Message(role="user", content=str(i)))
    assert len((await store.list_messages(chat.chat_id)).items) == 4


def test_unknown_scheme_and_bad_options_are_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        SqlStore("mysql://x/y")
    with pytest.raises(InvalidArgument, match="PostgreSQL only"):
        SqlStore("sqlite+aiosqlite:///:memory:", schema="s")


@pytest.mark.parametrize(
    ("native", "expected"),
    [
        (
            sa_exc.IntegrityError(
                "INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed: x")
            ),
            Conflict,
        ),
        (
            sa_exc.IntegrityError(
                "INSERT", {}, sqlite3.IntegrityError("NOT NULL constraint failed")
            ),
            InvalidArgument,
        ),
        (sa_exc.DataError("SELECT", {}, ValueError("bad")), InvalidArgument),
        (
            sa_exc.OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked")),
            BackendUnavailable,
        ),
        (sa_exc.TimeoutError("pool exhausted"), BackendUnavailable),
        (asyncpg.UniqueViolationError("duplicate key"), Conflict),
        (asyncpg.NotNullViolationError("null value"), InvalidArgument),
        (asyncpg.InvalidTextRepresentationError("invalid input syntax"), InvalidArgument),
        (asyncpg.InternalClientError("cannot switch to state 11"), BackendUnavailable),
        (asyncpg.CannotConnectNowError("starting up"), BackendUnavailable),
        (sqlite3.OperationalError("disk I/O error"), BackendUnavailable),
        (ConnectionRefusedError(111, "refused"), BackendUnavailable),
        (TimeoutError(), BackendUnavailable),
    ],
)
def test_native_errors_map_to_the_tree(native: BaseException, expected: type[Exception]) -> None:
    with pytest.raises(expected) as info, map_native_errors():
        raise native
    assert info.value.__cause__ is native


def _sqlite_error(kind: type[sqlite3.Error], text: str, code: int) -> sqlite3.Error:
    error = kind(text)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize(
    ("native", "expected", "advice"),
    [
        (
            sa_exc.OperationalError(
                "INSERT",
                {},
                _sqlite_error(sqlite3.OperationalError, "database or disk is full", 13),
            ),
            StorageFull,
            "free space",
        ),
        (
            _sqlite_error(sqlite3.OperationalError, "attempt to write a readonly database", 8),
            StorageReadOnly,
            "write permission",
        ),
        (  # SQLITE_READONLY_DBMOVED, an extended code: the primary code picks the advice
            _sqlite_error(sqlite3.OperationalError, "attempt to write a readonly database", 1032),
            StorageReadOnly,
            "write permission",
        ),
        (
            _sqlite_error(sqlite3.DatabaseError, "database disk image is malformed", 11),
            StorageDamaged,
            ".recover",
        ),
        (
            _sqlite_error(sqlite3.DatabaseError, "file is not a database", 26),
            StorageDamaged,
            "backup",
        ),
        (
            _sqlite_error(sqlite3.OperationalError, "unable to open database file", 14),
            BackendUnavailable,
            "deleted or moved",
        ),
        (
            _sqlite_error(sqlite3.OperationalError, "database is locked", 5),
            BackendUnavailable,
            "busy timeout",
        ),
        (asyncpg.DiskFullError("could not extend file"), StorageFull, "disk is full"),
        (
            asyncpg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction"),
            StorageReadOnly,
            "primary",
        ),
        (
            asyncpg.QueryCanceledError("canceling statement"),
            BackendUnavailable,
            "statement_timeout",
        ),
        (asyncpg.TooManyConnectionsError("too many clients"), BackendUnavailable, "pool_size"),
        (asyncpg.DataCorruptedError("invalid page"), StorageDamaged, "backup"),
        (asyncpg.IndexCorruptedError("index is corrupted"), StorageDamaged, "REINDEX"),
        (asyncpg.AdminShutdownError("terminating connection"), BackendUnavailable, "shutting down"),
    ],
)
def test_storage_failures_get_advice_that_fits(
    native: BaseException, expected: type[Exception], advice: str
) -> None:
    with pytest.raises(expected) as info, map_native_errors():
        raise native
    assert advice in str(info.value)
    assert "check that it is running" not in str(info.value)
    assert isinstance(info.value, BackendUnavailable) or expected is InvalidArgument
    assert info.value.__cause__ is native


def test_threadkeep_errors_and_others_pass_through() -> None:
    with pytest.raises(IdempotencyConflict), map_native_errors():
        raise IdempotencyConflict("kept")
    with pytest.raises(KeyError), map_native_errors():
        raise KeyError("a bug is not a database error")


async def test_aliases_open_the_same_drivers(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path / 'alias.db'}") as store:
        assert isinstance(store.driver, SqlDriver)
        assert store.driver.db.engine.dialect.driver == "aiosqlite"
        async with store.driver.db.read() as conn:
            mode = (await conn.execute(sa.text("PRAGMA journal_mode"))).scalar()
        assert mode == "wal"
    store = open_store("postgresql://u:p@127.0.0.1:1/db")
    assert isinstance(store.driver, SqlDriver)
    with pytest.raises(BackendUnavailable):
        await store.open()


async def _backend_pids(store: SqlStore) -> set[int]:
    """The server pids of the store's held connections and of one pooled transaction one."""
    pids = {held[1].get_server_pid() for held in store.driver.db._held}
    async with store.driver.db.transaction() as conn:
        pids.add((await conn.execute(sa.text("SELECT pg_backend_pid()"))).scalar_one())
    return pids


async def _terminate(url: str, pids: set[int]) -> None:
    killer = await asyncpg.connect(
        make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    try:
        for pid in pids:
            assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid)
        # pg_terminate_backend only signals: wait (bounded) until the backends have exited,
        # rather than for a fixed time a loaded server may not keep to.
        gone = "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::int[]))"
        for _ in range(1200):
            if await killer.fetchval(gone, list(pids)):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"backends {sorted(pids)} still alive after 60 s")
    finally:
        await killer.close()


async def test_killed_idle_postgres_connections_are_replaced_unseen(
    pg_schema, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 12: after the server kills the pooled connections, the next write and read
    succeed (no ``BackendUnavailable``), and asyncio logs nothing."""
    url, schema = pg_schema
    gc.collect()  # earlier tests' garbage, so none of it is logged inside the window below
    async with SqlStore(url, schema=schema, pool_size=2) as store:
        chat = await store.create_chat("u", "t")
        for round_ in range(3):
            await _terminate(url, await _backend_pids(store))
            await asyncio.sleep(0.2)  # idle: the closed sockets reach the event loop
            with caplog.at_level(logging.ERROR, logger="asyncio"):
                await store.append_message(chat.chat_id, Message(role="user", content=f"{round_}"))
                await store.update_chat(chat.chat_id, name=f"n{round_}")
                assert (await store.get_chat(chat.chat_id)).name == f"n{round_}"
                assert len((await store.list_messages(chat.chat_id)).items) == round_ + 1
            assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


async def test_a_missing_postgres_schema_is_a_clear_error(pg_schema) -> None:
    url, _ = pg_schema
    store = SqlStore(url, schema="tk_no_such_schema")
    with pytest.raises(InvalidArgument, match="does not exist"):
        await store.open()


def test_schema_in_the_url_and_the_option_must_agree() -> None:
    from threadkeep import InvalidArgument
    from threadkeep_sql import SqlStore

    url = "postgresql+asyncpg://u:p@127.0.0.1:1/db?schema=a"
    assert SqlStore(url).driver._schema == "a"
    assert SqlStore(url, schema="a").driver._schema == "a"
    assert "schema" not in SqlStore(url).driver._sa_url.query
    with pytest.raises(InvalidArgument, match="given twice"):
        SqlStore(url, schema="b")
