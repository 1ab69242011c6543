"""Benchmark the AG-UI run fold: one run streaming a 2,000-delta message, per write policy.

Run from the repository root:

    python3 -m uv run python bench/agui_bench.py [--deltas 2000] [--repeat 7]

Each run goes through ``threadkeep.agui.StorageAgent`` (the user input, then the assistant's
message streamed as ``--deltas`` ``TEXT_MESSAGE_CONTENT`` events, folded into ONE record).
For each store (memory, a SQLite file, and PostgreSQL when ``THREADKEEP_TEST_POSTGRES_URL``
is set) and each policy the table gives the store writes of one run (driver write
primitives, counted with ``threadkeep.testing.count_store_writes``; chat creation
excluded), the median wall time of a run, and its ratio to the ``raw`` line: the same two
messages appended with one ``append_messages`` call (the floor any policy pays); then the
median wall time from the start of the run to the first delta the caller receives (the
fixed cost before streaming), and the median CPU time of this process per run (less
sensitive to other load than wall time).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ag_ui.core import (
    BaseEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    UserMessage,
)

from threadkeep import Message, Role, Store, open_store
from threadkeep.agui import StorageAgent
from threadkeep.testing import count_store_writes

POLICIES: list[tuple[str, dict[str, Any]]] = [
    ("incremental", {"write_policy": "incremental"}),
    ("incremental, 256 B flush", {"write_policy": "incremental", "flush_bytes": 256}),
    ("buffered", {"write_policy": "buffered"}),
]


class DeltaAgent:
    """Streams one assistant message (id ``a-r1``) as ``deltas`` small content events.

    The events are built once, so a run's time is the wrapper's, not the agent's.
    """

    def __init__(self, deltas: int) -> None:
        self.pieces = [f"tok{i:04d} " for i in range(deltas)]
        self.events: list[BaseEvent] = [
            TextMessageStartEvent(message_id="a-r1", role="assistant"),
            *(TextMessageContentEvent(message_id="a-r1", delta=p) for p in self.pieces),
            TextMessageEndEvent(message_id="a-r1"),
        ]

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        for event in self.events:
            yield event
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


def run_input(thread: str, run_id: str) -> RunAgentInput:
    user = UserMessage(id=f"u-{run_id}", content="write me a long answer")
    return RunAgentInput(thread_id=thread, run_id=run_id, messages=[user])


async def one_run(
    store: Store, agent: DeltaAgent, options: dict[str, Any]
) -> tuple[float, int, float, float]:
    """Return (seconds, writes, seconds to the first delta, CPU seconds) of one run."""
    thread = f"bench-{uuid.uuid4().hex}"
    await store.create_chat("bench", thread)
    wrapper = StorageAgent(agent, store, user_id="bench", **options)
    first = 0.0
    with count_store_writes(store) as writes:
        start, start_cpu = time.perf_counter(), time.process_time()
        async for event in wrapper.run(run_input(thread, "r1")):
            if not first and isinstance(event, TextMessageContentEvent):
                first = time.perf_counter() - start
        elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    message = await store.get_message_by_agui_id(
        (await store.find_chat("bench", thread)).chat_id,  # type: ignore[union-attr]
        "a-r1",
    )
    assert message is not None
    assert message.content == "".join(agent.pieces)
    return elapsed, writes.total(), first, cpu


async def one_raw(store: Store, agent: DeltaAgent) -> tuple[float, int]:
    """The floor: the run's two final messages in one append."""
    chat = await store.create_chat("bench", f"raw-{uuid.uuid4().hex}")
    final = [
        Message(role=Role.USER, content="write me a long answer", agui_id="u"),
        Message(role=Role.ASSISTANT, content="".join(agent.pieces), agui_id="a"),
    ]
    with count_store_writes(store) as writes:
        start = time.perf_counter()
        await store.append_messages(chat.chat_id, final)
        elapsed = time.perf_counter() - start
    return elapsed, writes.total()


async def bench_store(
    name: str, url: str, options: dict[str, Any], args: argparse.Namespace
) -> list[list[str]]:
    agent = DeltaAgent(args.deltas)
    rows: list[list[str]] = []
    async with open_store(url, **options) as store:
        raw = [await one_raw(store, agent) for _ in range(args.repeat)]
        raw_time = statistics.median(t for t, _ in raw)
        floor = [name, "raw append (floor)", str(raw[0][1]), f"{raw_time * 1000:.2f}", "1.00"]
        rows.append([*floor, "-", "-"])
        for label, policy in POLICIES:
            await one_run(store, agent, policy)  # warm-up
            results = [await one_run(store, agent, policy) for _ in range(args.repeat)]
            median = statistics.median(r[0] for r in results)
            writes = sorted({r[1] for r in results})
            first = statistics.median(r[2] for r in results)
            cpu = statistics.median(r[3] for r in results)
            rows.append(
                [
                    name,
                    label,
                    "/".join(map(str, writes)),
                    f"{median * 1000:.2f}",
                    f"{median / raw_time:.1f}",
                    f"{first * 1000:.2f}",
                    f"{cpu * 1000:.2f}",
                ]
            )
    return rows


async def _pg_schema(url: str, statement: str) -> None:
    import asyncpg
    from sqlalchemy.engine import make_url

    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rows: list[list[str]] = []
    rows += await bench_store("memory", "memory://", {}, args)
    with tempfile.TemporaryDirectory() as directory:
        sqlite = f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
        rows += await bench_store("sqlite", sqlite, {}, args)
    pg = os.environ.get("THREADKEEP_TEST_POSTGRES_URL")
    if pg:
        schema = f"tk_agui_bench_{uuid.uuid4().hex[:8]}"
        await _pg_schema(pg, f'CREATE SCHEMA "{schema}"')
        try:
            rows += await bench_store("postgresql", pg, {"schema": schema}, args)
        finally:
            await _pg_schema(pg, f'DROP SCHEMA "{schema}" CASCADE')
    header = ["store", "policy", "writes/run", "median ms", "x raw", "first delta ms", "cpu ms"]
    print(
        f"One run: user input + 1 assistant message of {args.deltas:,} deltas "
        f"({len(''.join(DeltaAgent(args.deltas).pieces)):,} bytes); median of {args.repeat}."
    )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print(
            "  ".join(
                cell.ljust(w) if i < 2 else cell.rjust(w)
                for i, (cell, w) in enumerate(zip(row, widths, strict=True))
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
