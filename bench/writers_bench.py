"""Concurrent writers: group commit against raw asyncpg, one statement per call (README).

Run from the repository root:

    source /tmp/tk-services.env   # or: eval "$(bash .ci/services/postgres.sh env)"
    python3 -m uv run python bench/writers_bench.py [--writers 8 16 32 64] [--calls N]

Uses the database ``threadkeep_bench`` (a schema made for the run, dropped at the end). For
each line (one message per call, a 5-message turn per call) and each number of writers W,
W tasks each make ``--calls`` calls, each writer to its own chat, all at once; the wall
time until the last call returns is one sample. The clients, in the same run, their order
rotating per repetition:

- ``raw``: W asyncpg connections, each task running the driver's one-statement append
  (``sql_bench.RAW_APPEND_ONE`` / ``RAW_APPEND_BATCH``, prepared) on its own connection:
  one statement and one commit per call, the floor without group commit (each body and
  fingerprint made with ``Store.prepare``, as the store makes them);
- ``api``: ``SqlStore.append_message`` / ``append_messages`` (validation, encoding,
  models) with group commit;
- ``api, no group``: the same with group commit switched off (each call its own
  statement, on a pool of W connections).

Each client's connections are opened (and its statements prepared, by a few warm-up calls)
before its sample and closed after it, so the server holds one client's connections at a
time. Printed per line and W: messages per second
(median sample), the median over repetitions of the time ratio to ``raw``, the latency of
one call (p50 and p99 over every call of every repetition, milliseconds), the client's CPU
per message (microseconds, the whole process: bench loop included) and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import asyncpg
from sql_bench import RAW_APPEND_BATCH, RAW_APPEND_ONE, bench_url, dsn, message_body
from sqlalchemy.engine import make_url

from threadkeep import Message
from threadkeep_sql import SqlStore
from threadkeep_sql.testing import create_schema, drop_schema

CLIENTS = ("raw", "api", "api, no group")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


@dataclass
class Sample:
    """One client's run of W writers: wall and CPU seconds, and each call's latency."""

    wall: float
    cpu: float
    latencies: list[float]


@dataclass
class Results:
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, name: str, sample: Sample) -> None:
        self.samples.setdefault(name, []).append(sample)


Call = Callable[[int, int], Awaitable[None]]  # (writer, call number)


async def timed(writers: int, calls: int, call: Call) -> Sample:
    """Run ``writers`` tasks of ``calls`` calls each at once; time them."""
    latencies: list[float] = []

    async def writer(w: int) -> None:
        for n in range(calls):
            start = time.perf_counter()
            await call(w, n)
            latencies.append(time.perf_counter() - start)

    start, start_cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return Sample(time.perf_counter() - start, time.process_time() - start_cpu, latencies)


def turn(w: int, n: int, size: int, prefix: str) -> list[Message]:
    return [
        Message(
            role="user",
            agui_id=f"{prefix}-{uuid.uuid4().hex}",
            content=f"writer {w} call {n} message {j}",
        )
        for j in range(size)
    ]


async def raw_sample(
    url: str, schema: str, chats: list[uuid.UUID], calls: int, size: int
) -> Sample:
    """W connections, one statement per call."""
    settings = {"search_path": schema}
    conns = [await asyncpg.connect(dsn(url), server_settings=settings) for _ in chats]
    try:
        sql = RAW_APPEND_ONE if size == 1 else RAW_APPEND_BATCH
        stmts = [await c.prepare(sql) for c in conns]

        async def one(w: int, n: int) -> None:
            (message,) = turn(w, n, 1, "raw")
            _, body, fingerprint = message_body(message.agui_id, message.content)
            now = datetime.now(UTC)
            await stmts[w].fetchval(
                now, chats[w], message.agui_id, uuid.uuid4(), "user", "message", None, None,
                None, now, fingerprint, body,
            )  # fmt: skip

        async def batch(w: int, n: int) -> None:
            messages = turn(w, n, size, "raw")
            encoded = [message_body(m.agui_id, m.content) for m in messages]
            now = datetime.now(UTC)
            await stmts[w].fetchval(
                size, now, chats[w], [m.agui_id for m in messages],
                [uuid.uuid4() for _ in messages], ["user"] * size, ["message"] * size,
                [None] * size, [None] * size, [None] * size, [now] * size,
                [fp for _, _, fp in encoded], [body for _, body, _ in encoded],
            )  # fmt: skip

        return await timed(len(chats), calls, one if size == 1 else batch)
    finally:
        for conn in conns:
            await conn.close()


async def api_sample(
    url: str, schema: str, chats: list[uuid.UUID], calls: int, size: int, *, group: bool
) -> Sample:
    pool = 10 if group else len(chats)
    async with SqlStore(url, schema=schema, pool_size=pool) as store:
        if not group:
            store.driver._group = None  # group commit off: each call is its own statement

        async def call(w: int, n: int) -> None:
            if size == 1:
                (message,) = turn(w, n, 1, "api")
                await store.append_message(chats[w], message)
            else:
                await store.append_messages(chats[w], turn(w, n, size, "api"))

        # Connected and prepared before the clock starts, as raw's connections are.
        warm = (await store.create_chat("bench", f"warm-{uuid.uuid4()}")).chat_id
        for _ in range(3):
            await timed(
                len(chats), 1, lambda w, n: store.append_messages(warm, turn(w, n, size, "warm"))
            )
        return await timed(len(chats), calls, call)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run_line(
    url: str, schema: str, writers: int, calls: int, size: int, reps: int
) -> Results:
    results = Results()
    async with SqlStore(url, schema=schema) as store:
        chats = {
            name: [
                [
                    (await store.create_chat("bench", f"{size}-{name}-{writers}-{r}-{w}")).chat_id
                    for w in range(writers)
                ]
                for r in range(reps)
            ]
            for name in CLIENTS
        }
    for rep in range(reps):
        clients: list[tuple[str, Callable[[], Awaitable[Sample]]]] = [
            ("raw", partial(raw_sample, url, schema, chats["raw"][rep], calls, size)),
            ("api", partial(api_sample, url, schema, chats["api"][rep], calls, size, group=True)),
            (
                "api, no group",
                partial(
                    api_sample, url, schema, chats["api, no group"][rep], calls, size, group=False
                ),
            ),
        ]
        shift = rep % len(clients)
        for name, client in clients[shift:] + clients[:shift]:
            results.add(name, await client())
    return results


def report(results: Results, writers: int, calls: int, size: int) -> None:
    messages = writers * calls * size
    what = "1 message" if size == 1 else f"{size}-message turns"
    print(f"  append {what}, {writers} writers x {calls} calls ({load()})")
    raw = results.samples["raw"]
    for name in CLIENTS:
        samples = results.samples[name]
        walls = [s.wall for s in samples]
        ratio = statistics.median(s.wall / r.wall for s, r in zip(samples, raw, strict=True))
        shown = f"{ratio:5.2f}x raw" if name != "raw" else "         "
        latencies = [x for s in samples for x in s.latencies]
        p50, p99 = (percentile(latencies, f) * 1000 for f in (0.5, 0.99))
        cpu = statistics.median(s.cpu for s in samples) / messages * 1e6
        spread = ", ".join(f"{w:.2f}" for w in walls)
        print(
            f"    {name:<14} {messages / statistics.median(walls):8,.0f} msg/s  {shown}  "
            f"p50 {p50:6.1f} ms  p99 {p99:7.1f} ms  cpu {cpu:5.0f} us/msg  [{spread} s]",
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--calls", type=int, default=200, help="calls per writer")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5], help="messages per call")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(f"start: {load()}", flush=True)
    url = await create_schema(bench_url(), prefix="tk_writers")
    try:
        schema = str(make_url(url).query["schema"])
        base = (
            make_url(url).difference_update_query(["schema"]).render_as_string(hide_password=False)
        )
        async with SqlStore(base, schema=schema):  # migrate once
            pass
        for size in args.sizes:
            for writers in args.writers:
                results = await run_line(base, schema, writers, args.calls, size, args.reps)
                report(results, writers, args.calls, size)
    finally:
        await drop_schema(url)
    print(f"end: {load()}")


if __name__ == "__main__":
    asyncio.run(main())
