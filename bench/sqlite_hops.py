"""Thread hops and client CPU per public call on a SQLite file store (bench/README.md).

Run from the repository root (no server needed):

    python3 -m uv run python bench/sqlite_hops.py [--calls 200] [--reps 5]

aiosqlite runs every call of a connection on that connection's own thread; each hand-off
(``aiosqlite.Connection._execute``, through which every aiosqlite call goes) waits for the
thread and then for the event loop, so on a loaded machine hops cost wall time beyond their
CPU. This counts them per public call (a wrapper around ``_execute``) and times the CPU of
this process per call (``time.process_time``, minimum and median of ``--reps`` repetitions
of ``--calls`` calls), for the chat reads, the message reads, an append and a short AG-UI
run (``StorageAgent``, both write policies, on a chat created in the same call: the user
message, one assistant message, ``RUN_FINISHED``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
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

from threadkeep import ChatFilter, Message, Store
from threadkeep.agui import StorageAgent, WritePolicy
from threadkeep_sql import SqlStore

HOPS = [0]
_EXECUTE = aiosqlite.Connection._execute


async def _counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
    HOPS[0] += 1
    return await _EXECUTE(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]


class OneMessageAgent:
    """A run with one short assistant message (the fixed cost of a run, almost no content)."""

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield RunStartedEvent(thread_id=input.thread_id, run_id=input.run_id)
        message_id = f"a-{input.run_id}"
        yield TextMessageStartEvent(message_id=message_id, role="assistant")
        yield TextMessageContentEvent(message_id=message_id, delta="a short answer")
        yield TextMessageEndEvent(message_id=message_id)
        yield RunFinishedEvent(thread_id=input.thread_id, run_id=input.run_id)


async def fill(store: Store) -> dict[str, Any]:
    """A 300-message thread and 60 chats of one user, one message each."""
    chat = await store.create_chat("hops-user", "deep")
    for i in range(0, 300, 50):
        await store.append_messages(
            chat.chat_id,
            [
                Message(role="user", content=f"message number {j}", agui_id=f"m{j}")
                for j in range(i, i + 50)
            ],
        )
    for i in range(60):
        other = await store.create_chat("list-user", f"thread-{i}")
        await store.append_message(other.chat_id, Message(role="user", content=f"hello {i}"))
    page = await store.list_messages(chat.chat_id, limit=50)
    return {"chat": chat, "message": page.items[-1]}


def calls(store: Store, data: dict[str, Any]) -> dict[str, Callable[[int], Awaitable[Any]]]:
    chat = data["chat"]
    chat_id, message = chat.chat_id, data["message"]

    async def append(i: int) -> None:
        await store.append_message(chat_id, Message(role="user", content=f"more {i}"))

    def agui(policy: WritePolicy) -> Callable[[int], Awaitable[None]]:
        async def run(i: int) -> None:
            thread = f"run-{uuid.uuid4().hex}"
            await store.create_chat("agui-user", thread)
            wrapper = StorageAgent(
                OneMessageAgent(), store, user_id="agui-user", write_policy=policy
            )
            user = UserMessage(id=f"u-{i}", content="hello")
            events = wrapper.run(RunAgentInput(thread_id=thread, run_id=f"r{i}", messages=[user]))
            async for _ in events:
                pass

        return run

    return {
        "get_chat": lambda _: store.get_chat(chat_id),
        "find_chat": lambda _: store.find_chat("hops-user", "deep"),
        "list_chats (50)": lambda _: store.list_chats(ChatFilter(user_id="list-user"), limit=50),
        "list_chat_previews (50)": lambda _: store.list_chat_previews(
            ChatFilter(user_id="list-user"), limit=50, preview_chars=100
        ),
        "list_messages (50)": lambda _: store.list_messages(chat_id, limit=50),
        "get_message": lambda _: store.get_message(message.message_id),
        "get_message_by_agui_id": lambda _: store.get_message_by_agui_id(chat_id, "m10"),
        "context_messages": lambda _: store.context_messages(chat_id),
        "append_message": append,
        "AG-UI short run, incremental (+ create_chat)": agui("incremental"),
        "AG-UI short run, buffered (+ create_chat)": agui("buffered"),
    }


async def measure(
    fn: Callable[[int], Awaitable[Any]], n: int, reps: int
) -> tuple[float, float, float]:
    """Return (hops per call, min CPU us per call, median CPU us per call)."""
    await fn(0)  # warm up: compile statements, fill caches
    times: list[float] = []
    hops = 0
    for rep in range(reps):
        HOPS[0] = 0
        start = time.process_time()
        for i in range(n):
            await fn(1 + rep * n + i)
        times.append((time.process_time() - start) / n * 1e6)
        hops = HOPS[0]
    return hops / n, min(times), statistics.median(times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per repetition")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (min and median)")
    parser.add_argument("--only", action="append", help="only calls whose name has this text")
    args = parser.parse_args()
    aiosqlite.Connection._execute = _counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        store = await SqlStore(f"sqlite+aiosqlite:///{Path(tmp) / 'hops.db'}").open()
        data = await fill(store)
        print("| call | thread hops | CPU us, min | CPU us, median |")
        print("| --- | ---: | ---: | ---: |")
        for name, fn in calls(store, data).items():
            if args.only and not any(part in name for part in args.only):
                continue
            n = max(1, args.calls // 10) if name.startswith("AG-UI") else args.calls
            hops, low, mid = await measure(fn, n, args.reps)
            print(f"| {name} | {hops:.1f} | {low:.0f} | {mid:.0f} |", flush=True)
        await store.close()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
