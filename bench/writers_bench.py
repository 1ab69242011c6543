"""Concurrent writers: group commit against raw asyncpg, one statement per append (README).

Run from the repository root:

    source /tmp/tk-services.env   # or: eval "$(bash .ci/services/postgres.sh env)"
    python3 -m uv run python bench/writers_bench.py [--writers 8 16 32 64] [--appends N]

Uses the database ``threadkeep_bench`` (a schema made for the run, dropped at the end). For
each number of writers W, W tasks each append ``--appends`` messages, one per call, each to
its own chat, all at once; the wall time until the last append returns is one sample. The
clients, in the same run, their order alternating per repetition:

- ``raw``: W asyncpg connections, each task running the driver's one-statement append
  (``sql_bench.RAW_APPEND_ONE``, prepared) on its own connection: one statement and one
  commit per append, the floor without group commit;
- ``api``: ``SqlStore.append_message`` (validation, encoding, models) with group commit;
- ``api, no group``: the same with group commit switched off (what it was before).

Printed: appends per second, and the median over repetitions of the time ratio to ``raw``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
from sql_bench import RAW_APPEND_ONE, bench_url, dsn, message_body

from threadkeep import Message
from threadkeep_sql import SqlStore
from threadkeep_sql.testing import create_schema, drop_schema


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


async def raw_client(url: str, schema: str, chats: list[uuid.UUID], appends: int) -> float:
    """W connections, one statement per append; return the wall seconds of all appends."""
    settings = {"search_path": schema}
    conns = [await asyncpg.connect(dsn(url), server_settings=settings) for _ in chats]
    try:
        stmts = [await c.prepare(RAW_APPEND_ONE) for c in conns]

        async def writer(w: int) -> None:
            for n in range(appends):
                agui = f"raw-{uuid.uuid4().hex}"
                _, body, fingerprint = message_body(agui, f"writer {w} message {n}")
                now = datetime.now(UTC)
                await stmts[w].fetchval(
                    now, chats[w], agui, uuid.uuid4(), "user", "message", None, None, None,
                    now, fingerprint, body,
                )  # fmt: skip

        start = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(len(chats))))
        return time.perf_counter() - start
    finally:
        for conn in conns:
            await conn.close()


async def api_client(store: SqlStore, chats: list[uuid.UUID], appends: int) -> float:
    async def writer(w: int) -> None:
        for n in range(appends):
            message = Message(
                role="user", agui_id=f"api-{uuid.uuid4().hex}", content=f"writer {w} message {n}"
            )
            await store.append_message(chats[w], message)

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(len(chats))))
    return time.perf_counter() - start


async def run_writers(url: str, schema: str, writers: int, appends: int, reps: int) -> None:
    grouped = SqlStore(url, schema=schema)
    plain = SqlStore(url, schema=schema)
    await grouped.open()
    await plain.open()
    plain._group = None  # group commit off: each append is its own statement
    times: dict[str, list[float]] = {"raw": [], "api": [], "api, no group": []}
    try:
        for rep in range(reps):
            chats = {
                name: [
                    (await grouped.create_chat("bench", f"{name}-{writers}-{rep}-{w}")).chat_id
                    for w in range(writers)
                ]
                for name in times
            }
            clients: list[tuple[str, Callable[[], Awaitable[float]]]] = [
                ("raw", functools.partial(raw_client, url, schema, chats["raw"], appends)),
                ("api", functools.partial(api_client, grouped, chats["api"], appends)),
                (
                    "api, no group",
                    functools.partial(api_client, plain, chats["api, no group"], appends),
                ),
            ]
            shift = rep % len(clients)
            for name, client in clients[shift:] + clients[:shift]:
                times[name].append(await client())
    finally:
        await grouped.close()
        await plain.close()
    total = writers * appends
    print(f"  {writers} writers x {appends} appends ({load()})")
    for name, samples in times.items():
        median = statistics.median(samples)
        ratios = [a / b for a, b in zip(samples, times["raw"], strict=True)]
        shown = f"{statistics.median(ratios):5.2f}x raw" if name != "raw" else ""
        spread = ", ".join(f"{s:.2f}" for s in samples)
        print(f"    {name:<14} {total / median:9,.0f} appends/s  {shown}  [{spread} s]", flush=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--appends", type=int, default=250, help="appends per writer")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(f"start: {load()}", flush=True)
    url = await create_schema(bench_url(), prefix="tk_writers")
    try:
        from sqlalchemy.engine import make_url

        schema = str(make_url(url).query["schema"])
        base = (
            make_url(url).difference_update_query(["schema"]).render_as_string(hide_password=False)
        )
        async with SqlStore(base, schema=schema):  # migrate once
            pass
        for writers in args.writers:
            await run_writers(base, schema, writers, args.appends, args.reps)
    finally:
        await drop_schema(url)
    print(f"end: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
