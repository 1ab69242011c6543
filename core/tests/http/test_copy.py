"""``threadkeep copy``: the tau-bench import, SQLite -> PostgreSQL, interrupted and resumed.

The copy is killed (SIGKILL) part-way, run again to the end, and then once more: counts and
contents (ids, seqs, timestamps, hidden messages, steps, runs, deletions) end equal, and the
third run copies nothing. Needs ``THREADKEEP_TEST_POSTGRES_URL`` and the real data in
``../shared/realdata`` (skips cleanly without either, unless services are required).
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadkeep import ChatFilter, Message, Step, open_store
from threadkeep_contract_tests import require_service
from threadkeep_sql.testing import create_schema, drop_schema

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE = REPO_ROOT.parent / "shared/realdata/tau-bench/historical_trajectories/gpt-4o-airline.json"
COPY = [sys.executable, "-c", "from threadkeep.cli import main; main()", "copy"]

CUT_AFTER = 21
"""The interrupted copy stops in the chat it writes the 21st batch of messages for."""

# The copy, stopped by its own hand at a point the test chooses: after the CUT_AFTER-th
# ``copy_messages`` batch is stored (tau-bench chats are one batch each, so inside chat
# 21: its messages in, its steps, runs and count check not), it says so on stdout and
# blocks until the test kills it. No race with how fast the machine copies.
_CUT_COPY = f"""
import sys
from threadkeep._store_copy import CopyOps  # what Store.copy_messages delegates to
from threadkeep.cli import main

written = 0
copy_messages = CopyOps.copy_messages

async def stopping(self, chat_id, messages):
    global written
    copied = await copy_messages(self, chat_id, messages)
    written += 1
    if written == {CUT_AFTER}:
        print("cut", flush=True)
        sys.stdin.read()  # blocks the event loop: nothing more is written until the kill
    return copied

CopyOps.copy_messages = stopping
sys.argv[0] = "threadkeep"
main()
"""


@pytest.fixture
def postgres_url() -> Iterator[str]:
    server = require_service("THREADKEEP_TEST_POSTGRES_URL", "PostgreSQL")
    url = asyncio.run(create_schema(server, prefix="tk_copy"))
    try:
        yield url
    finally:
        asyncio.run(drop_schema(url))


async def _extras(url: str) -> None:
    """Add what tau-bench lacks: a run with steps, a hidden message, a deleted chat."""
    async with open_store(url) as store:
        chat = await store.create_chat("ops", "with-run", agent_id="a", tenant_id="t")
        await store.start_run(chat.chat_id, "r1", owner="w")
        await store.append_messages(
            chat.chat_id,
            [
                Message(role="user", content="q", run_id="r1"),
                Message(role="assistant", content="a", run_id="r1"),
            ],
        )
        await store.save_steps(
            [Step(chat_id=chat.chat_id, run_id="r1", stack_id="s1", type="llm", input={"n": 1})]
        )
        await store.finish_run(chat.chat_id, "r1", owner="w", status="complete")
        hidden = await store.append_message(chat.chat_id, Message(role="user", content="oops"))
        await store.delete_messages(chat.chat_id, [hidden.message_id])
        gone = await store.create_chat("ops", "deleted")
        await store.append_message(gone.chat_id, Message(role="user", content="bye"))
        await store.delete_chat(gone.chat_id)


async def _everything(url: str) -> dict[str, Any]:
    """Every chat (deleted included) with its messages, steps and runs, by chat id."""
    found: dict[str, Any] = {}
    async with open_store(url) as store:
        cursor = None
        while True:
            page = await store.list_chats(ChatFilter(deleted="include"), limit=200, cursor=cursor)
            for chat in page.items:
                messages = await store.scan_messages(chat.chat_id, limit=1000)
                steps = await store.scan_steps(chat.chat_id, limit=1000)
                runs = sorted({m.run_id for m in messages if m.run_id})
                found[str(chat.chat_id)] = {
                    "chat": chat.model_dump(mode="json", exclude={"seq", "revision"}),
                    "messages": [m.model_dump(mode="json") for m in messages],
                    "steps": [s.model_dump(mode="json") for s in steps],
                    "runs": [
                        (await store.get_run(chat.chat_id, r)).model_dump(
                            mode="json", exclude={"revision"}
                        )
                        for r in runs
                    ],
                }
            if not page.has_more:
                return found
            cursor = page.next_cursor


async def _chat_count(url: str) -> int:
    async with open_store(url) as store:
        page = await store.list_chats(ChatFilter(deleted="include"), limit=200)
        return len(page.items)


def _interrupted_copy(src: str, dst: str) -> None:
    """Run the copy, SIGKILL it once it has stopped itself inside chat ``CUT_AFTER``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADKEEP_")}
    process = subprocess.Popen(
        [sys.executable, "-c", _CUT_COPY, "copy", src, dst],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], 300)  # a hang guard only
        line = process.stdout.readline() if ready else b""
        assert line == b"cut\n", process.stderr.read() if process.stderr else line
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream:
                stream.close()


def test_copy_sqlite_to_postgresql_interrupted_resumed_and_idempotent(
    cli, sqlite_url, postgres_url
):
    if not SOURCE.is_file():
        pytest.skip(f"real data not present at {SOURCE}")
    cli.json("import", str(SOURCE), "--format", "openai", "--json", "--url", sqlite_url)
    asyncio.run(_extras(sqlite_url))

    _interrupted_copy(sqlite_url, postgres_url)
    part = asyncio.run(_chat_count(postgres_url))
    assert part == CUT_AFTER  # stopped inside chat 21: its messages in, not its check

    resumed = cli.json("copy", sqlite_url, postgres_url, "--json")
    assert resumed["chats"] == 202
    assert resumed["chats_copied"] == 202 - CUT_AFTER  # chat 21 went in before the cut
    # tau-bench's, the run chat's three (one hidden) and the soft-deleted chat's one.
    assert resumed["messages"] == 5308 + 3 + 1
    assert resumed["steps"] == 1
    assert resumed["runs"] == 1

    source, copied = asyncio.run(_everything(sqlite_url)), asyncio.run(_everything(postgres_url))
    assert copied.keys() == source.keys()
    for chat_id, records in source.items():
        assert copied[chat_id] == records, chat_id
    deleted = [r["chat"] for r in copied.values() if r["chat"]["deleted_at"] is not None]
    assert [c["thread_id"] for c in deleted] == ["deleted"]

    again = cli.json("copy", sqlite_url, postgres_url, "--json")
    assert (
        again["chats_copied"],
        again["messages_copied"],
        again["steps_copied"],
        again["runs_copied"],
    ) == (0, 0, 0, 0)
    assert (again["chats"], again["messages"]) == (202, 5312)


async def _seed_deleted(url: str) -> str:
    """A deleted chat with a run, its steps and a hidden message, and a live chat."""
    async with open_store(url) as store:
        gone = await store.create_chat("ops", "deleted")
        await store.start_run(gone.chat_id, "r1", owner="w")
        stored = await store.append_messages(
            gone.chat_id,
            [Message(role="user", content=f"m{i}", run_id="r1") for i in range(450)],
        )
        await store.save_steps(
            [Step(chat_id=gone.chat_id, run_id="r1", stack_id="s", type="llm") for _ in range(3)]
        )
        await store.finish_run(gone.chat_id, "r1", owner="w", status="complete")
        await store.delete_messages(gone.chat_id, [stored[7].message_id])
        await store.delete_chat(gone.chat_id)
        await store.create_chat("ops", "live")
        return str(gone.chat_id)


async def _visible(store: Any, chat_id: str) -> list[Message]:
    found: list[Message] = []
    cursor = None
    while True:
        page = await store.list_messages(chat_id, limit=200, cursor=cursor)
        found += page.items
        if not page.has_more:
            return found
        cursor = page.next_cursor


async def _scanned(store: Any, chat_id: str) -> list[Message]:
    found: list[Message] = []
    while batch := await store.scan_messages(chat_id, after_seq=found[-1].seq if found else 0):
        found += batch
    return found


async def _restored(url: str, chat_id: str) -> dict[str, Any]:
    """Restore the chat and return what every read gives back (visible and scanned)."""
    async with open_store(url) as store:
        chat = await store.restore_chat(chat_id)
        return {
            "chat": chat.model_dump(mode="json", exclude={"seq", "revision", "updated_at"}),
            "visible": [m.model_dump(mode="json") for m in await _visible(store, chat_id)],
            "scanned": [m.model_dump(mode="json") for m in await _scanned(store, chat_id)],
            "steps": [s.model_dump(mode="json") for s in await store.scan_steps(chat_id)],
            "run": (await store.get_run(chat_id, "r1")).model_dump(
                mode="json", exclude={"revision"}
            ),
        }


def test_copy_brings_deleted_chats_with_their_records(cli, tmp_path):
    source = f"sqlite+aiosqlite:///{tmp_path / 'src.db'}"
    target = f"sqlite+aiosqlite:///{tmp_path / 'dst.db'}"
    chat_id = asyncio.run(_seed_deleted(source))
    result = cli.json("copy", source, target, "--json")
    assert (result["chats"], result["messages_copied"], result["steps_copied"]) == (2, 450, 3)
    assert result["runs_copied"] == 1
    assert "deleted_chats" not in result

    async def deleted_here() -> bool:
        async with open_store(target) as store:
            page = await store.list_chats(ChatFilter(deleted="only"), limit=10)
            return [str(c.chat_id) for c in page.items] == [chat_id]

    assert asyncio.run(deleted_here()), "the copy must stay deleted"
    again = cli.json("copy", source, target, "--json")
    assert (again["chats_copied"], again["messages_copied"], again["messages"]) == (0, 0, 450)
    copied, original = (
        asyncio.run(_restored(target, chat_id)),
        asyncio.run(_restored(source, chat_id)),
    )
    assert len(copied["visible"]) == 449
    assert len(copied["scanned"]) == 450
    assert copied == original


def test_copy_resumed_after_a_deleted_chat_went_in_live_marks_it_deleted(cli, tmp_path):
    """Killed after the live insert and part of the rows: the rerun copies the rest, deletes."""
    source = f"sqlite+aiosqlite:///{tmp_path / 'src.db'}"
    target = f"sqlite+aiosqlite:///{tmp_path / 'dst.db'}"
    chat_id = asyncio.run(_seed_deleted(source))

    async def half_copied() -> None:
        async with open_store(source) as src, open_store(target) as dst:
            (chat,) = (await src.list_chats(ChatFilter(deleted="only"), limit=10)).items
            assert await dst.copy_chat(chat.model_copy(update={"deleted_at": None}))
            await dst.copy_messages(chat_id, await src.scan_messages(chat_id, limit=100))
            assert not await dst.copy_deletion(chat.model_copy(update={"deleted_at": None}))

    asyncio.run(half_copied())
    result = cli.json("copy", source, target, "--json")
    assert (result["chats_copied"], result["messages_copied"]) == (1, 350)
    copied, original = (
        asyncio.run(_restored(target, chat_id)),
        asyncio.run(_restored(source, chat_id)),
    )
    assert copied == original
