"""The AG-UI fold on PostgreSQL against raw asyncpg doing the same reads and writes.

Run from the repository root (needs ``THREADKEEP_TEST_POSTGRES_URL``):

    python3 -m uv run python bench/agui_raw_bench.py [--rounds 15] [--reps 3]

Two workloads, one run each per operation, both on a chat created beforehand:

- **short run** (the fold's fixed cost): ``RUN_STARTED``, one text message of one delta,
  ``RUN_FINISHED``;
- **2,000 deltas**: the same with the assistant message streamed as 2,000
  ``TEXT_MESSAGE_CONTENT`` events (``agui_bench.DeltaAgent``).

Clients, interleaved round by round in one process (the order alternating):

- **threadkeep**: ``StorageAgent(write_policy="buffered")`` over ``SqlStore``, the run's
  events consumed as a client would, until its history is stored (``persistence``).
- **raw**: one asyncpg connection with prepared statements doing what a hand-written
  client needs for the same rows: look up the chat by its key, read its messages, then
  (before streaming) the run row with the user message in one statement, consume the same
  event stream joining the deltas, and (after it) the assistant message, the ``input`` step
  and the run's end in one statement. Those two statements are the driver's own
  one-statement commit (``threadkeep_sql._pg_commit``); bodies are encoded the way the
  store encodes them (``Store.prepare``, ``record_body``), inside the timing.

Each round times one operation of each client; the table gives the median wall time per
operation, the median of the per-round ratios (threadkeep / raw) and the median per-round
difference (threadkeep minus raw: what the fold adds per run), per repetition and as the
median of the repetitions. The client CPU time of each operation (``time.process_time``
of this process: the fold's and the driver's Python, not the server's) is given the same
way, less sensitive to other load than wall time. The load average is printed with every
repetition.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from ag_ui.core import BaseEvent, RunAgentInput, TextMessageContentEvent, UserMessage
from agui_bench import DeltaAgent
from sqlalchemy.engine import make_url

from threadkeep import (
    Message,
    MessageStatus,
    Role,
    Run,
    RunStatus,
    Step,
    StepStatus,
    Store,
    open_store,
)
from threadkeep._dedup import chat_deduplication_key
from threadkeep.agui import StorageAgent
from threadkeep.driver import record_body
from threadkeep_sql._pg_append import batch_params
from threadkeep_sql._pg_commit import _step_params, commit_statement
from threadkeep_sql._runner import RawStatement

_FIND = "SELECT chat_id, body FROM chats WHERE dedup_key = $1 AND deleted_at IS NULL"
_CONTEXT = (
    "SELECT seq, body FROM messages WHERE chat_id = $1 AND seq > $2 AND deleted_at IS NULL "
    "ORDER BY seq LIMIT 200"
)


def _compiled(store: Store, **shape: bool) -> RawStatement:
    return RawStatement.compile(commit_statement(**shape), store.driver.db.engine.dialect)  # type: ignore[attr-defined]


class RawClient:
    """The raw asyncpg client (see the module docstring)."""

    def __init__(self, conn: Any, store: Store) -> None:
        self.conn = conn
        self.store = store
        self.begin = _compiled(store, insert=True, messages=True, refs=False, steps=False)
        self.end = _compiled(store, insert=False, messages=True, refs=False, steps=True)

    async def commit(self, raw: RawStatement, params: dict[str, Any]) -> Any:
        return await self.conn.fetchrow(raw.sql, *raw.args(params))

    async def run(self, agent: Any, thread: str, run_id: str) -> None:
        key = chat_deduplication_key("bench", thread, None)
        chat = await self.conn.fetchrow(_FIND, key)
        chat_id = chat["chat_id"]
        await self.conn.fetch(_CONTEXT, chat_id, 0)
        now = datetime.now(UTC)
        run = Run(
            chat_id=chat_id,
            run_id=run_id,
            owner="raw",
            lease_expires_at=now + timedelta(seconds=60),
            created_at=now,
            updated_at=now,
        )
        user = Message(role=Role.USER, content="write me a long answer", agui_id=f"u-{run_id}")
        base = {"chat_id": chat_id, "now": now, "run_id": run_id, "lease": run.lease_expires_at}
        begin = {
            **base,
            "status": "active",
            "updated_at": now,
            "body": record_body(run),
            "revision": 0,
            "created_at": now,
            **batch_params([self.store.prepare(user)], now),
        }
        await self.commit(self.begin, begin)
        parts: list[str] = []
        events: list[BaseEvent] = []
        async for event in agent.run(_input(thread, run_id)):
            events.append(event)  # forwarded to the client
            if type(event) is TextMessageContentEvent:
                parts.append(event.delta)
        end = datetime.now(UTC)
        answer = Message(
            role=Role.ASSISTANT,
            content="".join(parts),
            agui_id="a-r1",
            run_id=run_id,
            status=MessageStatus.COMPLETE,
        )
        step = Step(
            chat_id=chat_id,
            run_id=run_id,
            stack_id="root",
            type="input",
            status=StepStatus.COMPLETED,
            created_at=end,
            updated_at=end,
            seq=2**62,
        )
        ended = run.model_copy(
            update={"status": RunStatus.COMPLETE, "lease_expires_at": None, "updated_at": end}
        )
        marker = f'"seq":{2**62}'
        params = {
            **base,
            "now": end,
            "status": "complete",
            "lease": None,
            "updated_at": end,
            "body": record_body(ended),
            "expected": 0,
            **batch_params([self.store.prepare(answer)], end),
            **_step_params([step], [record_body(step)], marker),
        }
        row = await self.commit(self.end, params)
        assert row is not None


def _input(thread: str, run_id: str) -> RunAgentInput:
    user = UserMessage(id=f"u-{run_id}", content="write me a long answer")
    return RunAgentInput(
        thread_id=thread,
        run_id=run_id,
        messages=[user],
        state={},
        tools=[],
        context=[],
        forwarded_props={},
    )


async def tk_run(store: Store, agent: Any, thread: str, run_id: str) -> None:
    wrapper = StorageAgent(agent, store, user_id="bench", write_policy="buffered")
    async for _event in wrapper.run(_input(thread, run_id)):
        pass
    assert wrapper.persistence is not None
    await wrapper.persistence


async def one_rep(store: Store, conn: Any, deltas: int, rounds: int) -> dict[str, float]:
    agent = DeltaAgent(deltas)
    raw = RawClient(conn, store)
    tk_times: list[float] = []
    raw_times: list[float] = []
    tk_cpu: list[float] = []
    raw_cpu: list[float] = []
    for i in range(rounds + 2):
        threads = [f"b-{uuid.uuid4().hex}", f"b-{uuid.uuid4().hex}"]
        for thread in threads:
            await store.create_chat("bench", thread)
        pair: dict[str, float] = {}
        cpu: dict[str, float] = {}
        order = ["tk", "raw"] if i % 2 else ["raw", "tk"]
        for client, thread in zip(order, threads, strict=True):
            start, start_cpu = time.perf_counter(), time.process_time()
            if client == "tk":
                await tk_run(store, agent, thread, "r1")
            else:
                await raw.run(agent, thread, "r1")
            pair[client] = time.perf_counter() - start
            cpu[client] = time.process_time() - start_cpu
        if i >= 2:  # the first two rounds warm caches and prepared statements
            tk_times.append(pair["tk"])
            raw_times.append(pair["raw"])
            tk_cpu.append(cpu["tk"])
            raw_cpu.append(cpu["raw"])
    ratios = [t / r for t, r in zip(tk_times, raw_times, strict=True)]
    diffs = [t - r for t, r in zip(tk_times, raw_times, strict=True)]
    cpu_diffs = [t - r for t, r in zip(tk_cpu, raw_cpu, strict=True)]
    return {
        "raw_ms": statistics.median(raw_times) * 1000,
        "tk_ms": statistics.median(tk_times) * 1000,
        "ratio": statistics.median(ratios),
        "diff_ms": statistics.median(diffs) * 1000,
        "raw_cpu_ms": statistics.median(raw_cpu) * 1000,
        "tk_cpu_ms": statistics.median(tk_cpu) * 1000,
        "cpu_diff_ms": statistics.median(cpu_diffs) * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--deltas", type=int, nargs="*", default=[1, 2000])
    args = parser.parse_args()
    url = os.environ["THREADKEEP_TEST_POSTGRES_URL"]
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    schema = f"tk_agui_raw_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(dsn)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        async with open_store(url, schema=schema) as store:
            conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
            try:
                for deltas in args.deltas:
                    reps = []
                    for rep in range(args.reps):
                        load = os.getloadavg()
                        result = await one_rep(store, conn, deltas, args.rounds)
                        reps.append(result)
                        print(
                            f"deltas={deltas} rep {rep + 1}: raw {result['raw_ms']:.2f} ms, "
                            f"threadkeep {result['tk_ms']:.2f} ms, ratio "
                            f"{result['ratio']:.2f}x, threadkeep - raw "
                            f"{result['diff_ms']:.2f} ms; CPU raw {result['raw_cpu_ms']:.2f} ms, "
                            f"threadkeep {result['tk_cpu_ms']:.2f} ms, threadkeep - raw "
                            f"{result['cpu_diff_ms']:.2f} ms (load {load[0]:.1f} {load[1]:.1f})"
                        )
                    print(
                        f"deltas={deltas} MEDIAN of {args.reps}: raw "
                        f"{statistics.median(r['raw_ms'] for r in reps):.2f} ms, ratio "
                        f"{statistics.median(r['ratio'] for r in reps):.2f}x, threadkeep - raw "
                        f"{statistics.median(r['diff_ms'] for r in reps):.2f} ms; CPU raw "
                        f"{statistics.median(r['raw_cpu_ms'] for r in reps):.2f} ms, "
                        f"threadkeep - raw "
                        f"{statistics.median(r['cpu_diff_ms'] for r in reps):.2f} ms"
                    )
            finally:
                await conn.close()
    finally:
        await admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
