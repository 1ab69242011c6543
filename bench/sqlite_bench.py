"""Benchmark threadkeep-sql on SQLite against raw aiosqlite doing the same SQL (bench/README.md).

Run from the repository root (no server needed):

    python3 -m uv run python bench/sqlite_bench.py [--quick] [--reps 3]

One SQLite file in a temporary folder holds a 100,000-message thread and 10,000 chats of
one user (two messages each). Two clients, timed interleaved in rounds (``sql_bench.Line``),
medians per operation and medians of the per-round ratios:

- ``raw``: one aiosqlite connection (WAL, ``synchronous=NORMAL``, as the store opens it),
  running the statements the driver runs, written out by hand, values encoded by hand;
- ``api``: the public ``Store`` call on a SQLite ``SqlStore`` on the same file;
- ``floor`` (reads only): ``raw``, then the rows' bodies validated as models in one
  pydantic-core call (``sql_bench.floor_models``): the least any call returning validated
  models can cost.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import sqlalchemy as sa
from sql_bench import (
    CHATS,
    MESSAGE_COPY_COLUMNS,
    MESSAGES,
    PAGE,
    Line,
    floor_models,
    full_bodies,
    load,
    message_rows,
)

from threadkeep import ChatFilter, Message, MessageFilter
from threadkeep._store_messages import _message_scope
from threadkeep.driver import DriverBase
from threadkeep_sql import SqlStore
from threadkeep_sql._schema import chats, messages

THREAD = 100_000
CHATS_PER_USER = 10_000

RAW_LOCK = (
    "SELECT next_seq FROM chats WHERE chat_id = ? AND deleted_at IS NULL AND status = 'active'"
)
RAW_INSERT = (
    "INSERT INTO messages (chat_id, seq, message_id, agui_id, role, kind, run_id, request_id,"
    " block_id, revision, created_at, updated_at, deleted_at, fingerprint, body)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, NULL, ?, ?)"
)
RAW_BUMP = (
    "UPDATE chats SET next_seq = ?, revision = revision + 1, last_message_at = ?,"
    " updated_at = ? WHERE chat_id = ?"
)
RAW_AGUI = "SELECT seq, fingerprint FROM messages WHERE chat_id = ? AND agui_id = ?"
RAW_PAGE = (
    "SELECT chat_id, seq, revision, created_at, updated_at, deleted_at, body, fingerprint"
    " FROM messages WHERE chat_id = ? AND seq < ? AND deleted_at IS NULL"
    " AND EXISTS (SELECT 1 FROM chats WHERE chat_id = ? AND deleted_at IS NULL"
    " AND status = 'active') ORDER BY seq DESC LIMIT ?"
)
RAW_PREVIEWS = """
SELECT page.seq, page.revision, page.updated_at, page.last_message_at, page.body,
       page.chat_id, n.chat_id, n.seq, n.revision, n.created_at, n.updated_at, n.deleted_at,
       n.body, n.fingerprint
  FROM (SELECT seq, revision, updated_at, last_message_at, body, chat_id, status, deleted_at
          FROM chats WHERE deleted_at IS NULL AND user_id = ? ORDER BY seq DESC LIMIT ?) page
  LEFT JOIN messages n
    ON n.chat_id = page.chat_id AND page.deleted_at IS NULL AND page.status = 'active'
   AND n.seq = (SELECT o.seq FROM messages o WHERE o.chat_id = page.chat_id
                   AND o.deleted_at IS NULL ORDER BY o.seq DESC LIMIT 1)
 ORDER BY page.seq DESC
"""


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


async def raw_connection(path: Path) -> aiosqlite.Connection:
    """One aiosqlite connection configured as the store configures its own."""
    db = await aiosqlite.connect(path, isolation_level=None)
    await db.execute("PRAGMA busy_timeout = 30000")
    await db.execute("PRAGMA journal_mode = WAL")
    await db.execute("PRAGMA synchronous = NORMAL")
    return db


async def load_file(lite: SqlStore, now: datetime) -> tuple[uuid.UUID, str]:
    """Load the thread and the user's chats through the store's engine (executemany)."""
    deep = await lite.create_chat("deep-user", "deep-thread")
    user = "busy-user"
    async with lite.driver.db.transaction() as conn:
        for first in range(1, THREAD + 1, 50_000):
            rows = [
                dict(zip(MESSAGE_COPY_COLUMNS, r, strict=True))
                for r in message_rows(deep.chat_id, first, min(50_000, THREAD + 1 - first), now)
            ]
            await conn.execute(sa.insert(messages), rows)
        bump = sa.update(chats).where(chats.c.chat_id == deep.chat_id)
        await conn.execute(bump.values(next_seq=THREAD + 1))
    for i in range(CHATS_PER_USER):
        await lite.create_chat(user, f"thread-{i}")
    async with lite.driver.db.transaction() as conn:
        ids = (await conn.execute(sa.select(chats.c.chat_id).where(chats.c.user_id == user))).all()
        rows = [
            dict(zip(MESSAGE_COPY_COLUMNS, r, strict=True))
            for (chat_id,) in ids
            for r in message_rows(chat_id, 1, 2, now)
        ]
        await conn.execute(sa.insert(messages), rows)
        bump = sa.update(chats).where(chats.c.user_id == user)
        await conn.execute(bump.values(next_seq=3, last_message_at=now))
    return deep.chat_id, user


async def raw_append(db: aiosqlite.Connection, chat_id: str, batch: list[Message]) -> None:
    """The driver's append in raw aiosqlite: lock, agui ids, insert, bump, commit."""
    now = datetime.now(UTC)
    store_side = DriverBase
    await db.execute("BEGIN IMMEDIATE")
    try:
        async with db.execute(RAW_LOCK, (chat_id,)) as cursor:
            (next_seq,) = await cursor.fetchone()  # type: ignore[misc]
        rows: list[tuple[Any, ...]] = []
        for message in batch:
            async with db.execute(RAW_AGUI, (chat_id, message.agui_id)) as cursor:
                if await cursor.fetchone() is not None:
                    continue
            stamp = _when(now)
            body = store_side.message_body(message)
            fingerprint = store_side.fingerprint(message)
            rows.append(
                (
                    chat_id,
                    next_seq,
                    message.message_id.hex,
                    message.agui_id,
                    "user",
                    "message",
                    None,
                    None,
                    None,
                    stamp,
                    stamp,
                    fingerprint,
                    body,
                )
            )
            next_seq += 1
        await db.executemany(RAW_INSERT, rows)
        await db.execute(RAW_BUMP, (next_seq, _when(now), _when(now), chat_id))
        await db.commit()
    except BaseException:
        await db.rollback()
        raise


async def line_append(
    line: Line, db: aiosqlite.Connection, lite: SqlStore, size: int, reps: int
) -> None:
    raw_chat = (await lite.create_chat("bench", f"raw-{size}")).chat_id.hex
    api_chat = (await lite.create_chat("bench", f"api-{size}")).chat_id

    def batch(i: int) -> list[Message]:
        return [
            Message(role="user", content=f"message {i}-{j}", agui_id=f"a{i}-{j}")
            for j in range(size)
        ]

    async def run_raw(i: int) -> None:
        await raw_append(db, raw_chat, batch(i))

    async def run_api(i: int) -> None:
        if size == 1:
            await lite.append_message(api_chat, batch(i)[0])
        else:
            await lite.append_messages(api_chat, batch(i))

    await line.run({"raw": run_raw, "api": run_api}, reps)


async def line_page(
    line: Line,
    db: aiosqlite.Connection,
    lite: SqlStore,
    chat: uuid.UUID,
    before: int | None,
    reps: int,
) -> None:
    raw_before = 2**62 if before is None else before
    scope = _message_scope(chat, MessageFilter())
    cursor = None if before is None else lite._ctx.encode_cursor(scope, before)

    async def run_raw(_: int) -> None:
        rows = await db.execute_fetchall(RAW_PAGE, (chat.hex, raw_before, chat.hex, PAGE + 1))
        assert len(list(rows)) == PAGE + 1

    args = (chat.hex, raw_before, chat.hex, PAGE + 1)
    full = full_bodies([row[6] for row in await db.execute_fetchall(RAW_PAGE, args)])

    async def run_floor(_: int) -> None:
        rows = await db.execute_fetchall(RAW_PAGE, (chat.hex, raw_before, chat.hex, PAGE + 1))
        assert len([row[6] for row in rows]) == PAGE + 1  # the stored bodies, as before
        assert len(floor_models(full, MESSAGES)) == PAGE + 1  # the same messages, full

    async def run_api(_: int) -> None:
        page = await lite.list_messages(chat, limit=PAGE, cursor=cursor)
        assert len(page.items) == PAGE

    await line.run({"raw": run_raw, "api": run_api, "floor": run_floor}, reps)


async def line_list(
    line: Line, db: aiosqlite.Connection, lite: SqlStore, user: str, reps: int
) -> None:
    chat_filter = ChatFilter(user_id=user)

    async def run_raw(_: int) -> None:
        rows = list(await db.execute_fetchall(RAW_PREVIEWS, (user, PAGE + 1)))
        assert sum(1 for r in rows[:PAGE] if r[6] is not None) == PAGE

    newest = await db.execute_fetchall(RAW_PREVIEWS, (user, PAGE + 1))
    full = full_bodies([r[12] for r in newest if r[12] is not None])

    async def run_floor(_: int) -> None:
        rows = list(await db.execute_fetchall(RAW_PREVIEWS, (user, PAGE + 1)))
        assert len(floor_models([r[4] for r in rows], CHATS)) == PAGE + 1
        assert len([r[12] for r in rows if r[12] is not None]) == len(full)
        last = floor_models(full, MESSAGES)  # the newest messages' full bodies
        assert len(last) == PAGE + 1

    async def run_api(_: int) -> None:
        page = await lite.list_chat_previews(chat_filter, limit=PAGE, preview_chars=100)
        assert sum(1 for p in page.items if p.last_message is not None) == PAGE

    await line.run({"raw": run_raw, "api": run_api, "floor": run_floor}, reps)


def report(lines: list[Line]) -> str:
    out = [
        "| line | raw aiosqlite ms | threadkeep ms | threadkeep / raw | cpu / raw"
        " | floor / raw | floor cpu / raw |"
    ]
    out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for line in lines:
        raw, api = line.median("raw"), line.median("api")
        ratio, cpu = line.ratio("api"), line.ratio("api", cpu=True)
        if raw is None or api is None or ratio is None or cpu is None:
            continue
        floor, floor_cpu = line.ratio("floor"), line.ratio("floor", cpu=True)
        extra = (
            "| - | - |"
            if floor is None or floor_cpu is None
            else (f"| {floor:.2f}x | {floor_cpu:.2f}x |")
        )
        out.append(
            f"| {line.name} | {raw * 1000:.3f} | {api * 1000:.3f} | {ratio:.2f}x | {cpu:.2f}x "
            + extra
        )
    out.append("\nfloor: raw rows + the bodies validated as models in one pydantic-core call")
    out.append(f"at the end: {load()}")
    return "\n".join(out)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the operations")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per line")
    parser.add_argument("--chunk", type=int, default=25, help="operations per turn of a client")
    parser.add_argument(
        "--only",
        choices=["append", "pages", "list"],
        action="append",
        help="run only these lines (repeatable); default all",
    )
    args = parser.parse_args()
    wanted = set(args.only or ["append", "pages", "list"])
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        lite = await SqlStore(f"sqlite+aiosqlite:///{path}").open()
        print(f"at the start: {load()}; loading {THREAD:,} messages, {CHATS_PER_USER:,} chats")
        deep, user = await load_file(lite, datetime.now(UTC))
        db = await raw_connection(path)
        one = Line("SQLite: append 1 message", 2_000 // scale, args.chunk)
        five = Line("SQLite: append a 5-message turn", 1_000 // scale, args.chunk)
        newest = Line("SQLite: newest page of 50, 100k thread", 2_000 // scale, args.chunk)
        deep_page = Line("SQLite: page of 50, 50,000 deep", 2_000 // scale, args.chunk)
        listing = Line("SQLite: newest 50 of 10,000 chats + previews", 500 // scale, args.chunk)
        if "append" in wanted:
            print(f"appends ... ({load()})", flush=True)
            await line_append(one, db, lite, 1, args.reps)
            await line_append(five, db, lite, 5, args.reps)
        if "pages" in wanted:
            print(f"pages ... ({load()})", flush=True)
            await line_page(newest, db, lite, deep, None, args.reps)
            await line_page(deep_page, db, lite, deep, THREAD // 2 + 1, args.reps)
        if "list" in wanted:
            print(f"chat list ... ({load()})", flush=True)
            await line_list(listing, db, lite, user, args.reps)
        print(report([one, five, newest, deep_page, listing]))
        await db.close()
        await lite.close()


if __name__ == "__main__":
    asyncio.run(main())
