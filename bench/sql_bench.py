"""Benchmark threadkeep-sql against raw asyncpg doing the equivalent SQL (see bench/README.md).

Run from the repository root:

    bash .ci/services/postgres.sh start && eval "$(bash .ci/services/postgres.sh env)"
    python3 -m uv run python bench/sql_bench.py [--quick]

Uses the database ``threadkeep_bench`` on the server of ``THREADKEEP_TEST_POSTGRES_URL`` (created
by ``.ci/services/postgres.sh``), in a schema created for the run and dropped afterwards. Every
line is timed for three clients in the same run, interleaved in rounds, repeated, and
reported as the median per operation; ratios are medians of the ratios within a round:

- ``raw``: asyncpg on one connection, executing the SQL the driver sends (the floor);
- ``sql``: the driver's own statements through its connection path (``SqlDriver.db.runner()``:
  on PostgreSQL, compiled once and run on the pooled asyncpg connection), rows fetched but
  not turned into models;
- ``api``: the public ``Store`` call (validation, JSON encoding, fingerprints, pydantic
  models returned) on ``SqlStore``;
- ``floor`` (reads only): raw asyncpg, then the rows' bodies validated as models in one
  pydantic-core call (``TypeAdapter(list[Message]).validate_json`` of the bodies joined as
  one JSON array): the least any call returning validated models can cost.

The SQLite column is the ``api`` call on a SQLite file store (no raw baseline, no target).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import sqlalchemy as sa
from pydantic import TypeAdapter
from sqlalchemy.engine import make_url

from threadkeep import Chat, ChatFilter, Message, MessageFilter, Store
from threadkeep._store_messages import _message_scope
from threadkeep.driver import Records, record_body
from threadkeep.driver import fingerprint as fingerprint_of
from threadkeep.driver import message_body as message_body_of
from threadkeep_sql import SqlStore
from threadkeep_sql._chats import chat_filter_shape
from threadkeep_sql._messages import _NO_SEQ, _PAGE
from threadkeep_sql._pg_append import append_batch, append_one
from threadkeep_sql._previews import previews_statement
from threadkeep_sql._schema import chats, messages

DEEP_THREAD = 1_000_000
DEEP_POSITION = 500_000
CHATS_PER_USER = 10_000
PAGE = 50

# -- raw SQL: what the driver sends, written for asyncpg ------------------------------------

RAW_APPEND_ONE = """
WITH c AS (
    UPDATE chats SET next_seq = next_seq + 1, revision = revision + 1,
           last_message_at = $1, updated_at = $1
     WHERE chat_id = $2 AND deleted_at IS NULL AND status = 'active'
       AND NOT EXISTS (SELECT 1 FROM messages WHERE chat_id = $2 AND agui_id = $3::text)
 RETURNING next_seq - 1 AS first_seq
), m AS (
    INSERT INTO messages (chat_id, seq, message_id, agui_id, role, kind, run_id, request_id,
                          block_id, revision, created_at, updated_at, fingerprint, body)
    SELECT $2, c.first_seq, $4::uuid, $3::text, $5::text, $6::text, $7::text, $8::text,
           $9::text, 0, $10::timestamptz, $1, $11::text, $12::text
      FROM c
    ON CONFLICT (chat_id, agui_id) WHERE agui_id IS NOT NULL DO NOTHING
    RETURNING seq
)
SELECT seq FROM m
"""

RAW_APPEND_BATCH = """
WITH c AS (
    UPDATE chats SET next_seq = next_seq + $1::bigint, revision = revision + 1,
           last_message_at = $2, updated_at = $2
     WHERE chat_id = $3 AND deleted_at IS NULL AND status = 'active'
       AND NOT EXISTS (SELECT 1 FROM messages WHERE chat_id = $3 AND agui_id = ANY($4::text[]))
 RETURNING next_seq - $1::bigint AS first_seq
), m AS (
    INSERT INTO messages (chat_id, seq, message_id, agui_id, role, kind, run_id, request_id,
                          block_id, revision, created_at, updated_at, fingerprint, body)
    SELECT $3, c.first_seq + u.ord - 1, u.message_id, u.agui_id, u.role, u.kind, u.run_id,
           u.request_id, u.block_id, 0, u.created_at, $2, u.fingerprint, u.body
      FROM c, unnest($5::uuid[], $4::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                     $10::text[], $11::timestamptz[], $12::text[], $13::text[])
              WITH ORDINALITY AS u(message_id, agui_id, role, kind, run_id, request_id,
                                   block_id, created_at, fingerprint, body, ord)
)
SELECT first_seq FROM c
"""

RAW_PAGE = """
SELECT chat_id, seq, revision, created_at, updated_at, deleted_at, body, fingerprint
  FROM messages
 WHERE chat_id = $1 AND seq < $2 AND deleted_at IS NULL
   AND EXISTS (SELECT 1 FROM chats WHERE chat_id = $1 AND deleted_at IS NULL
                                     AND status = 'active')
 ORDER BY seq DESC LIMIT $3
"""

RAW_CHAT_PREVIEWS = """
SELECT page.seq, page.revision, page.updated_at, page.last_message_at, page.body, page.chat_id,
       newest.*
  FROM (SELECT seq, revision, updated_at, last_message_at, body, chat_id, status, deleted_at
          FROM chats WHERE deleted_at IS NULL AND user_id = $1
         ORDER BY seq DESC LIMIT $2) AS page
  LEFT JOIN LATERAL (SELECT chat_id, seq, revision, created_at, updated_at, deleted_at,
                            body, fingerprint
                       FROM messages
                      WHERE messages.chat_id = page.chat_id AND messages.deleted_at IS NULL
                        AND page.deleted_at IS NULL AND page.status = 'active'
                      ORDER BY seq DESC LIMIT 1) AS newest ON true
 ORDER BY page.seq DESC
"""


MESSAGES = TypeAdapter(list[Message])
CHATS = TypeAdapter(list[Chat])


def floor_models(bodies: list[str], adapter: TypeAdapter[list[Any]]) -> list[Any]:
    """The bodies validated as models in one pydantic-core call (the ``floor`` client)."""
    return adapter.validate_json("[" + ",".join(bodies) + "]")


_STORE_FIELDS = {"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"}


def full_bodies(bodies: list[str]) -> list[str]:
    """Message bodies as a user of raw pydantic stores them: every field, none left out.

    The store writes lean bodies (``threadkeep._encode_lean``: scalar fields at their
    default left out); the ``floor`` client validates the full ``model_dump_json`` of the
    same messages, made once per line, so the store's format does not lower the floor.
    """
    return [Message.model_validate_json(b).model_dump_json(exclude=_STORE_FIELDS) for b in bodies]


# -- measurement ----------------------------------------------------------------------------

Op = Callable[[int], Awaitable[None]]


@dataclass
class Line:
    """One benchmark line: per-operation seconds of each client, one sample per round.

    A round runs one chunk of operations for every client, back to back, so the samples of
    one round share the machine's load; ratios are taken within a round, then the median
    over rounds is reported.
    """

    name: str
    ops: int
    chunk: int = 25
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def median(self, client: str, *, cpu: bool = False) -> float | None:
        values = (self.cpu if cpu else self.times).get(client)
        return statistics.median(values) if values else None

    def ratio(self, client: str, base: str = "raw", *, cpu: bool = False) -> float | None:
        """Median over rounds of ``client`` / ``base`` (per-operation time or CPU)."""
        samples = self.cpu if cpu else self.times
        if client not in samples or base not in samples:
            return None
        pairs = zip(samples[client], samples[base], strict=True)
        return statistics.median(a / b for a, b in pairs if b > 0)

    async def run(self, clients: dict[str, Op], reps: int) -> None:
        """Time every client on ``ops`` operations per repetition, interleaved in chunks.

        Clients take turns every ``self.chunk`` operations (the order rotates every round), and
        every chunk gives one per-operation sample, so a burst of load from anything else on
        the machine lands on one round and the medians shrug it off.
        """
        chunk = self.chunk
        for rep in range(reps):
            for first in range(0, self.ops, chunk):
                names = list(clients)
                shift = (first // chunk + rep) % len(names)
                for name in names[shift:] + names[:shift]:
                    op = clients[name]
                    start, start_cpu = time.perf_counter(), time.process_time()
                    for i in range(first + rep * self.ops, first + rep * self.ops + chunk):
                        await op(i)
                    wall = (time.perf_counter() - start) / chunk
                    cpu = (time.process_time() - start_cpu) / chunk
                    self.times.setdefault(name, []).append(wall)
                    self.cpu.setdefault(name, []).append(cpu)


def load() -> str:
    """Return the 1-minute load average and the core count, for the printout."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def bench_url() -> str:
    url = os.environ.get("THREADKEEP_TEST_POSTGRES_URL")
    if not url:
        sys.exit(
            "THREADKEEP_TEST_POSTGRES_URL is not set; run: bash .ci/services/postgres.sh start "
            '&& eval "$(bash .ci/services/postgres.sh env)"'
        )
    return make_url(url).set(database="threadkeep_bench").render_as_string(hide_password=False)


def dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def message_body(agui_id: str | None, content: str) -> tuple[Message, str, str]:
    """Return a message, its body and fingerprint as the store would write them."""
    message = Message(role="user", content=content, agui_id=agui_id)
    prepared = Records().prepare(message)  # the same encoding the store uses
    return message, prepared.body, prepared.fingerprint


# -- data loading (COPY) --------------------------------------------------------------------


def chat_row(store: Store, user_id: str, thread_id: str, now: datetime) -> tuple[Any, ...]:
    chat_id = uuid.uuid4()
    body = record_body(
        store.chat_model(
            chat_id=chat_id, user_id=user_id, thread_id=thread_id, created_at=now, updated_at=now
        )
    )
    key = hashlib.sha256(f"chat\0{user_id}\0{thread_id}".encode()).hexdigest()
    return (chat_id, key, user_id, thread_id, "active", "private", 0, 1, 1, now, now, body)


CHAT_COPY_COLUMNS = [
    "chat_id",
    "dedup_key",
    "user_id",
    "thread_id",
    "status",
    "share",
    "revision",
    "next_seq",
    "next_step_seq",
    "created_at",
    "updated_at",
    "body",
]
MESSAGE_COPY_COLUMNS = [
    "chat_id",
    "seq",
    "message_id",
    "role",
    "kind",
    "revision",
    "created_at",
    "updated_at",
    "fingerprint",
    "body",
]


def message_rows(
    chat_id: uuid.UUID, first: int, count: int, now: datetime
) -> list[tuple[Any, ...]]:
    template = Message(role="assistant", content="@CONTENT@", message_id=uuid.UUID(int=0))
    body = message_body_of(template)
    fingerprint = fingerprint_of(template)
    zero = str(uuid.UUID(int=0))
    rows = []
    for seq in range(first, first + count):
        message_id = uuid.uuid4()
        text = body.replace(zero, str(message_id)).replace("@CONTENT@", f"message number {seq}")
        rows.append(
            (chat_id, seq, message_id, "assistant", "message", 0, now, now, fingerprint, text)
        )
    return rows


async def load_deep_thread(raw: asyncpg.Connection, store: Store, now: datetime) -> uuid.UUID:
    row = chat_row(store, "deep-user", "deep-thread", now)
    await raw.copy_records_to_table("chats", records=[row], columns=CHAT_COPY_COLUMNS)
    chat_id = row[0]
    step = 100_000
    for first in range(1, DEEP_THREAD + 1, step):
        rows = message_rows(chat_id, first, step, now)
        await raw.copy_records_to_table("messages", records=rows, columns=MESSAGE_COPY_COLUMNS)
    await raw.execute(
        "UPDATE chats SET next_seq = $2, last_message_at = $3 WHERE chat_id = $1",
        chat_id,
        DEEP_THREAD + 1,
        now,
    )
    return chat_id


async def load_user_chats(raw: asyncpg.Connection, store: Store, now: datetime) -> str:
    user = "busy-user"
    rows = [chat_row(store, user, f"thread-{i}", now) for i in range(CHATS_PER_USER)]
    await raw.copy_records_to_table("chats", records=rows, columns=CHAT_COPY_COLUMNS)
    previews = [m for r in rows for m in message_rows(r[0], 1, 2, now)]
    await raw.copy_records_to_table("messages", records=previews, columns=MESSAGE_COPY_COLUMNS)
    await raw.execute(
        "UPDATE chats SET next_seq = 3, last_message_at = $2 WHERE user_id = $1", user, now
    )
    return user


# -- the lines ------------------------------------------------------------------------------


async def line_append_one(
    line: Line, raw: asyncpg.Connection, store: SqlStore, lite: SqlStore | None, reps: int
) -> None:
    stmt = await raw.prepare(RAW_APPEND_ONE)
    raw_chat = await store.create_chat("bench", "raw-one")
    sql_chat = await store.create_chat("bench", "sql-one")
    api_chat = await store.create_chat("bench", "api-one")

    async def run_raw(i: int) -> None:
        _, body, fp = message_body(f"a{i}", f"message {i}")
        now = datetime.now(UTC)
        await stmt.fetchval(
            now,
            raw_chat.chat_id,
            f"a{i}",
            uuid.uuid4(),
            "user",
            "message",
            None,
            None,
            None,
            now,
            fp,
            body,
        )

    async def run_sql(i: int) -> None:
        prepared = store.driver.prepare(
            Message(role="user", content=f"message {i}", agui_id=f"a{i}")
        )
        async with store.driver.db.runner(write=True) as run:
            await append_one(run, sql_chat.chat_id, prepared, datetime.now(UTC))

    def run_api(target: SqlStore, chat_id: uuid.UUID) -> Op:
        async def op(i: int) -> None:
            await target.append_message(
                chat_id, Message(role="user", content=f"message {i}", agui_id=f"a{i}")
            )

        return op

    clients = {"raw": run_raw, "sql": run_sql, "api": run_api(store, api_chat.chat_id)}
    if lite is not None:
        clients["sqlite"] = run_api(lite, (await lite.create_chat("bench", "one")).chat_id)
    await line.run(clients, reps)


async def line_append_batches(
    line: Line, raw: asyncpg.Connection, store: SqlStore, lite: SqlStore | None, reps: int
) -> None:
    stmt = await raw.prepare(RAW_APPEND_BATCH)
    raw_chat = await store.create_chat("bench", "raw-batch")
    sql_chat = await store.create_chat("bench", "sql-batch")
    api_chat = await store.create_chat("bench", "api-batch")

    def batch(i: int) -> list[Message]:
        return [
            Message(role="user", content=f"message {i}-{j}", agui_id=f"b{i}-{j}") for j in range(5)
        ]

    async def run_raw(i: int) -> None:
        encoded = [message_body(m.agui_id, m.content) for m in batch(i)]
        now = datetime.now(UTC)
        await stmt.fetchval(
            5,
            now,
            raw_chat.chat_id,
            [f"b{i}-{j}" for j in range(5)],
            [uuid.uuid4() for _ in encoded],
            ["user"] * 5,
            ["message"] * 5,
            [None] * 5,
            [None] * 5,
            [None] * 5,
            [now] * 5,
            [fp for _, _, fp in encoded],
            [body for _, body, _ in encoded],
        )

    async def run_sql(i: int) -> None:
        prepared = [store.driver.prepare(m) for m in batch(i)]
        async with store.driver.db.runner(write=True) as run:
            await append_batch(run, sql_chat.chat_id, prepared, datetime.now(UTC))

    def run_api(target: SqlStore, chat_id: uuid.UUID) -> Op:
        async def op(i: int) -> None:
            await target.append_messages(chat_id, batch(i))

        return op

    clients = {"raw": run_raw, "sql": run_sql, "api": run_api(store, api_chat.chat_id)}
    if lite is not None:
        clients["sqlite"] = run_api(lite, (await lite.create_chat("bench", "batch")).chat_id)
    await line.run(clients, reps)


async def line_page(
    line: Line,
    raw: asyncpg.Connection,
    stores: dict[str, tuple[SqlStore, uuid.UUID]],
    before: int | None,
    reps: int,
) -> None:
    stmt = await raw.prepare(RAW_PAGE)
    store, chat_id = stores["api"]
    raw_before = _NO_SEQ if before is None else before
    params = {"chat_id": chat_id, "before": raw_before, "limit": PAGE + 1}

    async def run_raw(_: int) -> None:
        rows = await stmt.fetch(chat_id, raw_before, PAGE + 1)
        assert len(rows) == PAGE + 1

    full = full_bodies([row[6] for row in await stmt.fetch(chat_id, raw_before, PAGE + 1)])

    async def run_floor(_: int) -> None:
        rows = await stmt.fetch(chat_id, raw_before, PAGE + 1)
        assert len([row[6] for row in rows]) == PAGE + 1  # the stored bodies, as before
        assert len(floor_models(full, MESSAGES)) == PAGE + 1  # the same messages, full

    async def run_sql(_: int) -> None:
        async with store.driver.db.runner() as run:
            rows = await run.all(_PAGE, params)
        assert len(rows) == PAGE + 1

    def run_api(target: SqlStore, target_chat: uuid.UUID) -> Op:
        scope = _message_scope(target_chat, MessageFilter())
        cursor = None if before is None else target._ctx.encode_cursor(scope, before)

        async def op(_: int) -> None:
            page = await target.list_messages(target_chat, limit=PAGE, cursor=cursor)
            assert len(page.items) == PAGE
            assert page.has_more

        return op

    clients = {"raw": run_raw, "sql": run_sql, "api": run_api(store, chat_id), "floor": run_floor}
    if "sqlite" in stores:
        clients["sqlite"] = run_api(*stores["sqlite"])
    await line.run(clients, reps)


async def line_chat_list(
    line: Line,
    raw: asyncpg.Connection,
    stores: dict[str, SqlStore],
    user: str,
    reps: int,
) -> None:
    """One query: the newest 50 chats, each with its newest message (``LATERAL``)."""
    stmt = await raw.prepare(RAW_CHAT_PREVIEWS)
    store = stores["api"]
    chat_filter = ChatFilter(user_id=user)
    shape, params = chat_filter_shape(chat_filter, "postgresql")
    params["limit"] = PAGE + 1
    sql_stmt = previews_statement(shape, False)

    async def run_raw(_: int) -> None:
        rows = await stmt.fetch(user, PAGE + 1)
        assert sum(1 for r in rows[:PAGE] if r[6] is not None) == PAGE

    full = full_bodies([r[12] for r in await stmt.fetch(user, PAGE + 1) if r[12] is not None])

    async def run_floor(_: int) -> None:
        rows = await stmt.fetch(user, PAGE + 1)
        found = floor_models([r[4] for r in rows], CHATS)
        assert len([r[12] for r in rows if r[12] is not None]) == len(full)
        last = floor_models(full, MESSAGES)  # the newest messages' full bodies
        assert len(found) == PAGE + 1
        assert len(last) == PAGE + 1

    async def run_sql(_: int) -> None:
        async with store.driver.db.runner() as run:
            rows = await run.all(sql_stmt, params)
        assert sum(1 for r in rows[:PAGE] if r[6] is not None) == PAGE

    def run_api(target: SqlStore) -> Op:
        async def op(_: int) -> None:
            page = await target.list_chat_previews(chat_filter, limit=PAGE, preview_chars=100)
            assert sum(1 for p in page.items if p.last_message is not None) == PAGE

        return op

    clients = {"raw": run_raw, "sql": run_sql, "api": run_api(store), "floor": run_floor}
    if "sqlite" in stores:
        clients["sqlite"] = run_api(stores["sqlite"])
    await line.run(clients, reps)


# -- SQLite loading (no COPY: executemany on the file) --------------------------------------


async def load_sqlite(lite: SqlStore, now: datetime) -> tuple[uuid.UUID, str]:
    deep = await lite.create_chat("deep-user", "deep-thread")
    user = "busy-user"
    async with lite.driver.db.transaction() as conn:
        step = 100_000
        for first in range(1, DEEP_THREAD + 1, step):
            rows = [
                dict(zip(MESSAGE_COPY_COLUMNS, r, strict=True))
                for r in message_rows(deep.chat_id, first, step, now)
            ]
            await conn.execute(sa.insert(messages), rows)
        await conn.execute(
            sa.update(chats).where(chats.c.chat_id == deep.chat_id).values(next_seq=DEEP_THREAD + 1)
        )
    for i in range(CHATS_PER_USER):
        await lite.create_chat(user, f"thread-{i}")
    async with lite.driver.db.transaction() as conn:
        ids = (
            (await conn.execute(sa.select(chats.c.chat_id).where(chats.c.user_id == user)))
            .scalars()
            .all()
        )
        for chat_id in ids:
            rows = [
                dict(zip(MESSAGE_COPY_COLUMNS, r, strict=True))
                for r in message_rows(chat_id, 1, 2, now)
            ]
            await conn.execute(sa.insert(messages), rows)
        await conn.execute(
            sa.update(chats).where(chats.c.user_id == user).values(next_seq=3, last_message_at=now)
        )
    return deep.chat_id, user


# -- report ---------------------------------------------------------------------------------


def report(lines: list[Line], deep: Line, newest: Line) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1000:.3f}"

    def ratio(a: float | None, b: float | None) -> str:
        return "-" if a is None or b is None else f"{a / b:.2f}x"

    def times(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}x"

    head = (
        "line",
        "raw ms",
        "sql ms",
        "sql/raw",
        "api ms",
        "api/raw",
        "floor/raw",
        "sqlite ms",
        "cpu sql/raw",
        "cpu api/raw",
        "cpu floor/raw",
    )
    rows = [head]
    for line in lines:
        raw, sql, api, lite = (line.median(c) for c in ("raw", "sql", "api", "sqlite"))
        rows.append(
            (
                line.name,
                ms(raw),
                ms(sql),
                times(line.ratio("sql")),
                ms(api),
                times(line.ratio("api")),
                times(line.ratio("floor")),
                ms(lite),
                times(line.ratio("sql", cpu=True)),
                times(line.ratio("api", cpu=True)),
                times(line.ratio("floor", cpu=True)),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    out.append("")
    out += [
        f"deep page / newest page ({c}): {ratio(deep.median(c), newest.median(c))}"
        for c in ("raw", "sql", "api", "sqlite")
    ]
    out.append("ms: median wall time per operation; cpu: this process's CPU time per operation")
    out.append("x/raw: median over rounds of the ratio within a round (clients interleaved)")
    out.append("floor: raw rows + the bodies validated as models in one pydantic-core call")
    out.append("targets: at most 1.30x raw on every line; deep/newest <= 1.50x")
    out.append(f"at the end: {load()}")
    return "\n".join(out)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer ops (a smoke run)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per line")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite column")
    parser.add_argument("--chunk", type=int, default=25, help="operations per turn of a client")
    parser.add_argument(
        "--only",
        choices=["append", "batches", "pages", "list"],
        action="append",
        help="run only these lines (repeatable); default all",
    )
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    url = bench_url()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(dsn(url))
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    now = datetime.now(UTC)
    tmp = tempfile.TemporaryDirectory()
    try:
        store = await SqlStore(url, schema=schema).open()
        raw = await asyncpg.connect(dsn(url), server_settings={"search_path": schema})
        lite = None
        if not args.no_sqlite:
            lite = await SqlStore(f"sqlite+aiosqlite:///{Path(tmp.name) / 'bench.db'}").open()
        print(f"at the start: {load()}")
        print(
            f"loading a {DEEP_THREAD:,}-message thread and {CHATS_PER_USER:,} chats ...", flush=True
        )
        deep_chat = await load_deep_thread(raw, store, now)
        user = await load_user_chats(raw, store, now)
        await raw.execute("VACUUM (ANALYZE) chats, messages")  # as autovacuum would
        pages: dict[str, tuple[SqlStore, uuid.UUID]] = {"api": (store, deep_chat)}
        lists: dict[str, SqlStore] = {"api": store}
        if lite is not None:
            lite_deep, lite_user = await load_sqlite(lite, now)
            assert lite_user == user
            pages["sqlite"] = (lite, lite_deep)
            lists["sqlite"] = lite
        chunk = args.chunk
        one = Line("append 10,000 messages one by one", 10_000 // scale, chunk)
        five = Line("append 10,000 messages in batches of 5", 2_000 // scale, chunk)
        newest = Line("read the newest page (50 of 1,000,000)", 2_000 // scale, chunk)
        deep = Line("read a page 500,000 deep (50 of 1,000,000)", 2_000 // scale, chunk)
        listing = Line("list newest 50 of 10,000 chats + previews", 1_000 // scale, chunk)
        reps = max(1, args.reps // (2 if args.quick else 1))
        write_reps = 1 if args.quick else max(1, reps // 2)
        wanted = set(args.only or ["append", "batches", "pages", "list"])
        if "append" in wanted:
            print(f"append one by one ... ({load()})", flush=True)
            await line_append_one(one, raw, store, lite, write_reps)
        if "batches" in wanted:
            print(f"append in batches ... ({load()})", flush=True)
            await line_append_batches(five, raw, store, lite, write_reps)
        if "pages" in wanted:
            print(f"pages ... ({load()})", flush=True)
            await line_page(newest, raw, pages, None, reps)
            await line_page(deep, raw, pages, DEEP_POSITION + 1, reps)
        if "list" in wanted:
            print(f"chat list ... ({load()})", flush=True)
            await line_chat_list(listing, raw, lists, user, reps)
        print()
        lines = [line for line in (one, five, newest, deep, listing) if line.times]
        print(report(lines, deep, newest))
        await raw.close()
        await store.close()
        if lite is not None:
            await lite.close()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()
        tmp.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
