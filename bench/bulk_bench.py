"""Bulk load and import against the raw driver's bulk insert, in the same run (bench/README.md).

Run from the repository root:

    source /tmp/tk-services.env   # or: eval "$(bash .ci/services/postgres.sh env)"
    python3 -m uv run python bench/bulk_bench.py [--messages N] [--only load|import]

Uses the database ``threadkeep_bench`` on the server of ``THREADKEEP_TEST_POSTGRES_URL``, in a
schema created for the run and dropped afterwards (SQLite: a temporary file per repetition).
Each line runs ``--reps`` times (default 3), the clients alternating in order; the median
wall time is printed, with messages per second, the ratio to the raw client of the same
repetition (median of the per-repetition ratios) and the client's CPU seconds:

- load: ``Store.load_messages`` of N messages (default 1,000,000) into one chat, against raw
  asyncpg ``copy_records_to_table`` of the same rows (bodies and fingerprints encoded before
  the clock starts: the floor) on PostgreSQL, and against raw ``sqlite3`` ``executemany`` on
  SQLite; once per input shape of ``--inputs`` (``message``: a generator of ``Message``s,
  ``dict``: a generator of plain dicts), each into its own chat; then the re-run of the
  same load (everything present: writes nothing). Each client's CPU is printed per
  message too (``time.process_time``, microseconds);
- import: ``threadkeep import`` (the importer function, as the CLI calls it) of an
  OpenAI-format JSON Lines file and of an AG-UI event file, first import and re-import,
  against the raw bulk insert of the same number of message rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from sql_bench import MESSAGE_COPY_COLUMNS, bench_url
from sql_bench import dsn as sql_dsn
from sqlalchemy.engine import make_url

from threadkeep import Message, Store, open_store
from threadkeep._importers.agui import import_agui
from threadkeep._importers.openai import import_openai
from threadkeep.driver import Records
from threadkeep_sql.testing import create_schema, drop_schema

COLUMNS = (*MESSAGE_COPY_COLUMNS[:3], "agui_id", *MESSAGE_COPY_COLUMNS[3:])
"""The ``messages`` columns a raw load writes: ``sql_bench``'s, with the ``agui_id``."""


def load() -> str:
    """Return the load averages and core count, for the printout."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def dsn(url: str) -> str:
    """The asyncpg DSN of a store URL (its ``?schema=`` left out)."""
    return sql_dsn(make_url(url).difference_update_query(["schema"]).render_as_string(False))


def history(count: int, prefix: str = "m") -> Iterator[Message]:
    """``count`` short messages with deterministic ``agui_id``s (a re-run finds them all)."""
    for n in range(count):
        role = "assistant" if n % 2 else "user"
        yield Message(role=role, agui_id=f"{prefix}{n}", content=f"message number {n} " * 4)


def history_dicts(count: int, prefix: str = "m") -> Iterator[dict[str, Any]]:
    """:func:`history` as plain dicts (the same fields; ``load_messages`` builds the models)."""
    for n in range(count):
        role = "assistant" if n % 2 else "user"
        yield {"role": role, "agui_id": f"{prefix}{n}", "content": f"message number {n} " * 4}


INPUTS: dict[str, Callable[[int], Iterator[Any]]] = {"message": history, "dict": history_dicts}
"""The input shapes a load can be given (``--inputs``)."""


def raw_rows(chat_id: uuid.UUID, count: int) -> list[tuple[Any, ...]]:
    """The rows ``load_messages`` writes for ``history(count)``, encoded as the store would.

    The rows are frozen out of the cyclic garbage collector (``gc.freeze``): they are the
    bench's own data, kept alive while the clients run, and a million of them would
    otherwise be traversed by every full collection the threadkeep client triggers.
    """
    now = datetime.now(UTC)
    rows = []
    for seq, message in enumerate(history(count), start=1):
        prepared = Records().prepare(message.model_copy(update={"chat_id": chat_id}))
        rows.append(
            (
                chat_id,
                seq,
                message.message_id,
                message.agui_id,
                message.role.value,
                "message",
                0,
                now,
                now,
                prepared.fingerprint,
                prepared.body,
            )
        )
    gc.collect()
    gc.freeze()
    return rows


@dataclass
class Line:
    """Wall seconds per client, one sample per repetition."""

    name: str
    messages: int
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, list[float]] = field(default_factory=dict)
    server: dict[str, list[float]] = field(default_factory=dict)

    def add(
        self, client: str, seconds: float, cpu: float | None = None, server: float | None = None
    ) -> None:
        self.times.setdefault(client, []).append(seconds)
        if cpu is not None:
            self.cpu.setdefault(client, []).append(cpu)
        if server is not None:
            self.server.setdefault(client, []).append(server)

    def ratio(self, client: str, base: str) -> float | None:
        if client not in self.times or base not in self.times:
            return None
        pairs = zip(self.times[client], self.times[base], strict=False)
        return statistics.median(a / b for a, b in pairs if b > 0)

    def report(self, base: str = "raw") -> None:
        print(f"  {self.name} ({self.messages:,} messages)")
        for client, samples in self.times.items():
            median = statistics.median(samples)
            rate = self.messages / median if median else float("inf")
            ratio = self.ratio(client, base) if client != base else None
            shown = f"{ratio:6.2f}x {base}" if ratio is not None else ""
            spread = ", ".join(f"{s:.2f}" for s in samples)
            cpu = self.cpu.get(client)
            used = ""
            if cpu:
                per = statistics.median(cpu) / self.messages * 1e6
                used = f"  client CPU {statistics.median(cpu):.2f} s ({per:.1f} us/msg)"
            server = self.server.get(client)
            if server:
                per = statistics.median(server) / self.messages * 1e6
                used += f"  server CPU {statistics.median(server):.2f} s ({per:.1f} us/msg)"
            print(
                f"    {client:<22} {median:9.2f} s {rate:12,.0f} msg/s  {shown}  [{spread}]{used}",
                flush=True,
            )


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await action()
    return time.perf_counter() - start


async def timed_cpu(action: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds (the client's share) of ``action``."""
    cpu = time.process_time()
    seconds = await timed(action)
    return seconds, time.process_time() - cpu


_TICK = os.sysconf("SC_CLK_TCK")


def backend_seconds(pid: int) -> float:
    """CPU seconds (user + system) a PostgreSQL backend process has used so far.

    Read from ``/proc/<pid>/stat``: the server runs on this machine in every run here.
    """
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _local_ports() -> set[int]:
    """The local TCP ports of this process's sockets (``/proc/self/fd``, ``/proc/net``)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                parts = line.split()
                if parts[9] in inodes:
                    ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


async def server_seconds(url: str) -> dict[int, float]:
    """CPU seconds so far of each backend connected from this process (the store's pool)."""
    conn = await asyncpg.connect(dsn(url))
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1::int[]) "
            "AND pid <> pg_backend_pid()",
            sorted(_local_ports()),
        )
    finally:
        await conn.close()
    found = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):
            found[pid] = backend_seconds(pid)
    return found


async def timed_server(
    action: Callable[[], Awaitable[Any]], url: str
) -> tuple[float, float, float]:
    """:func:`timed_cpu`, and the server's CPU seconds for it.

    ``action`` returns the seconds itself (a client with its own connection, closed when
    it ends), or the CPU of the backends connected from this process before and after it
    is taken (a store's pooled connections).
    """
    before = await server_seconds(url)
    cpu = time.process_time()
    start = time.perf_counter()
    result = await action()
    seconds, used = time.perf_counter() - start, time.process_time() - cpu
    if isinstance(result, float):
        return seconds, used, result
    after = await server_seconds(url)
    return seconds, used, sum(value - before.get(pid, 0.0) for pid, value in after.items())


# -- bulk load ------------------------------------------------------------------------------


async def pg_raw_copy(url: str, rows: list[tuple[Any, ...]], batch: int) -> float:
    """Raw asyncpg: the chat row, then COPY of every row in batches, one transaction each.

    Returns the CPU seconds its server backend used for it (read before it disconnects).
    """
    conn = await asyncpg.connect(dsn(url), server_settings={"search_path": _schema(url)})
    before = backend_seconds(conn.get_server_pid())
    try:
        chat_id = rows[0][0]
        await conn.execute(
            "INSERT INTO chats (chat_id, dedup_key, user_id, thread_id, status, share, body) "
            "VALUES ($1, $2, 'raw', $3, 'active', 'private', '{}')",
            chat_id,
            uuid.uuid4().hex,
            str(chat_id),
        )
        for start in range(0, len(rows), batch):
            async with conn.transaction():
                part = rows[start : start + batch]
                await conn.copy_records_to_table("messages", records=part, columns=COLUMNS)
        return backend_seconds(conn.get_server_pid()) - before
    finally:
        await conn.close()


def sqlite_raw_insert(path: str, rows: list[tuple[Any, ...]], batch: int) -> None:
    """Raw sqlite3: executemany of the same rows, one transaction per batch."""
    conn = sqlite3.connect(path)
    try:
        marks = ", ".join("?" for _ in COLUMNS)
        sql = f"INSERT INTO messages ({', '.join(COLUMNS)}) VALUES ({marks})"
        for start in range(0, len(rows), batch):
            with conn:
                part = [
                    (
                        r[0].hex,
                        *r[1:2],
                        r[2].hex,
                        *r[3:7],
                        r[7].isoformat(),
                        r[8].isoformat(),
                        *r[9:],
                    )
                    for r in rows[start : start + batch]
                ]
                conn.executemany(sql, part)
    finally:
        conn.close()


def _schema(url: str) -> str:
    return str(make_url(url).query["schema"])


async def line_load(
    count: int, reps: int, batch: int, sqlite: bool, rerun: bool, inputs: list[str]
) -> list[Line]:
    base = bench_url()
    pg, pg_again = Line("PostgreSQL load", count), Line("PostgreSQL re-run", count)
    lite, lite_again = Line("SQLite load", count), Line("SQLite re-run", count)
    rows = raw_rows(uuid.uuid4(), count)  # built once: each repetition has its own schema
    for rep in range(reps):
        url = await create_schema(base, prefix="tk_bulk")
        try:
            async with open_store(url) as store:  # migrates the schema
                steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                    ("raw COPY", functools.partial(pg_raw_copy, url, rows, batch))
                ]
                chats = {}
                for shape in inputs:
                    chats[shape] = (await store.create_chat("bench", f"load {shape}")).chat_id
                    load = functools.partial(_load, store, chats[shape], count, shape)
                    steps.append((f"load_messages ({shape})", load))
                await _run_steps(pg, steps, rep, "PostgreSQL", url)
                del steps
                if rerun:
                    for shape, chat_id in chats.items():
                        load = functools.partial(_load, store, chat_id, count, shape)
                        sample = await timed_server(load, url)
                        pg_again.add(f"load_messages ({shape})", *sample)
        finally:
            await drop_schema(url)
        if sqlite:
            await _sqlite_load(lite, lite_again, count, rep, batch, inputs)
    del rows
    lines = [pg, pg_again] if rerun else [pg]
    return lines + ([lite, lite_again] if sqlite else [])


async def _load(store: Store, chat_id: uuid.UUID, count: int, shape: str = "message") -> None:
    report = await store.load_messages(chat_id, INPUTS[shape](count))
    assert report.messages == count, report


async def _run_steps(
    line: Line,
    steps: list[tuple[str, Callable[[], Awaitable[Any]]]],
    rep: int,
    what: str,
    url: str | None = None,
) -> None:
    """Time each step once, in an order that alternates with the repetition.

    With ``url`` (PostgreSQL) the server's CPU for each step is measured too.
    """
    for name, action in steps if rep % 2 == 0 else steps[::-1]:
        print(f"    rep {rep + 1}: {what} {name} ... {load()}", flush=True)
        if url is None:
            seconds, cpu = await timed_cpu(action)
            server = None
        else:
            seconds, cpu, server = await timed_server(action, url)
        line.add(name, seconds, cpu, server)
        shown = "" if server is None else f", server CPU {server:.2f} s"
        print(
            f"    rep {rep + 1}: {what} {name}: {seconds:.2f} s (client CPU {cpu:.2f} s{shown})",
            flush=True,
        )


async def _sqlite_load(
    lite: Line, again: Line, count: int, rep: int, batch: int, inputs: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "bench.db")
        async with open_store(f"sqlite+aiosqlite:///{path}") as store:
            raw_chat = await store.create_chat("bench", "raw")
            rows = raw_rows(raw_chat.chat_id, count)
            raw = functools.partial(asyncio.to_thread, sqlite_raw_insert, path, rows, batch)
            steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [("raw executemany", raw)]
            chats = {}
            for shape in inputs:
                chats[shape] = (await store.create_chat("bench", f"load {shape}")).chat_id
                load = functools.partial(_load, store, chats[shape], count, shape)
                steps.append((f"load_messages ({shape})", load))
            await _run_steps(lite, steps, rep, "SQLite")
            for shape, chat_id in chats.items():
                load = functools.partial(_load, store, chat_id, count, shape)
                again.add(f"load_messages ({shape})", *await timed_cpu(load))


# -- import ---------------------------------------------------------------------------------


def openai_file(folder: Path, chats: int, per_chat: int) -> Path:
    """An OpenAI-format JSON Lines file: ``chats`` records of ``per_chat`` messages."""
    path = folder / "history.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for c in range(chats):
            messages: list[dict[str, Any]] = []
            for n in range(per_chat):
                if n % 4 == 2:
                    call = {"id": f"call-{c}-{n}", "type": "function"}
                    call["function"] = {"name": "lookup", "arguments": json.dumps({"q": n})}
                    messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                elif n % 4 == 3:
                    messages.append(
                        {"role": "tool", "tool_call_id": f"call-{c}-{n - 1}", "content": f"r{n}"}
                    )
                else:
                    role = "user" if n % 4 == 0 else "assistant"
                    messages.append({"role": role, "content": f"chat {c} message {n} " * 4})
            out.write(json.dumps({"id": f"conv-{c}", "messages": messages}) + "\n")
    return path


def agui_file(folder: Path, runs: int, per_run: int) -> Path:
    """An AG-UI JSON Lines event file: ``runs`` runs on their own threads, text messages."""
    path = folder / "events.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for r in range(runs):
            events: list[dict[str, Any]] = [
                {"type": "RUN_STARTED", "threadId": f"thread-{r}", "runId": f"run-{r}"}
            ]
            for n in range(per_run):
                mid = f"msg-{r}-{n}"
                events += [
                    {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": f"run {r} {n} "},
                    {"type": "TEXT_MESSAGE_END", "messageId": mid},
                ]
            events.append({"type": "RUN_FINISHED", "threadId": f"thread-{r}", "runId": f"run-{r}"})
            out.writelines(json.dumps(e) + "\n" for e in events)
    return path


async def line_import(reps: int, sqlite: bool, chats: int, per_chat: int) -> list[Line]:
    base = bench_url()
    total = chats * per_chat
    runs, per_run = max(1, total // 20), 20
    lines: list[Line] = []
    with tempfile.TemporaryDirectory() as folder:
        openai_path = openai_file(Path(folder), chats, per_chat)
        agui_path = agui_file(Path(folder), runs, per_run)
        targets = ["postgresql"] + (["sqlite"] if sqlite else [])
        for target in targets:
            oa = Line(f"{target}: import --format openai", total)
            ag = Line(f"{target}: import --format agui", runs * per_run)
            for rep in range(reps):
                await _import_rep(base, target, Path(folder), rep, oa, ag, openai_path, agui_path)
            lines += [oa, ag]
    return lines


async def _import_rep(
    base: str,
    target: str,
    folder: Path,
    rep: int,
    oa: Line,
    ag: Line,
    openai_path: Path,
    agui_path: Path,
) -> None:
    url = (
        await create_schema(base, prefix="tk_import")
        if target == "postgresql"
        else f"sqlite+aiosqlite:///{folder / f'import-{rep}.db'}"
    )
    try:
        async with open_store(url) as store:
            for line in (oa, ag):
                chat = await store.create_chat("bench", f"raw {line.name}")
                chat_id = uuid.uuid4() if target == "postgresql" else chat.chat_id
                rows = raw_rows(chat_id, line.messages)
                if target == "postgresql":
                    line.add(
                        "raw COPY", await timed(functools.partial(pg_raw_copy, url, rows, 5000))
                    )
                else:
                    db = str(make_url(url).database)
                    insert = functools.partial(asyncio.to_thread, sqlite_raw_insert, db, rows, 5000)
                    line.add("raw executemany", await timed(insert))
            print(f"    rep {rep + 1} {target}: imports ... {load()}", flush=True)
            imports = ((oa, import_openai, openai_path), (ag, import_agui, agui_path))
            for line, importer, path in imports:
                run = functools.partial(importer, store, path, user_id="importer")
                for name in ("first import", "re-import"):
                    line.add(name, *await timed_cpu(run))
    finally:
        if target == "postgresql":
            await drop_schema(url)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages to bulk-load")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=5000, help="messages per batch")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument("--no-rerun", action="store_true", help="load: skip the PostgreSQL re-run")
    parser.add_argument("--only", choices=["load", "import"], action="append")
    parser.add_argument(
        "--inputs",
        default="message,dict",
        help="load: comma-separated input shapes (message, dict)",
    )
    parser.add_argument("--chats", type=int, default=200, help="import: records in the file")
    parser.add_argument("--per-chat", type=int, default=100, help="import: messages per record")
    args = parser.parse_args()
    only = set(args.only or ["load", "import"])
    print(f"start: {load()}", flush=True)
    lines: list[Line] = []
    if "import" in only:
        lines += await line_import(args.reps, not args.no_sqlite, args.chats, args.per_chat)
    if "load" in only:
        inputs = [shape for shape in args.inputs.split(",") if shape]
        unknown = set(inputs) - set(INPUTS)
        if unknown:
            parser.error(f"unknown --inputs {sorted(unknown)}; known: {sorted(INPUTS)}")
        lines += await line_load(
            args.messages, args.reps, args.batch, not args.no_sqlite, not args.no_rerun, inputs
        )
    print(f"\nresults (median of {args.reps}; end: {load()})")
    for line in lines:
        line.report(base="raw COPY" if "raw COPY" in line.times else "raw executemany")


if __name__ == "__main__":
    asyncio.run(main())
