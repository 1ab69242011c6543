"""``threadkeep copy``: the tau-bench import, SQLite -> PostgreSQL, interrupted and resumed.

The copy is killed (SIGKILL) part-way, run again to the end, and then once more: counts and
contents (ids, seqs, timestamps, hidden messages, steps, runs, deletions) end equal, and the
third run copies nothing. Needs ``THREADKEEP_TEST_POSTGRES_URL`` and the real data in
``../shared/realdata`` (skips cleanly without either, unless services are required).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("THREADKEEP_")}
    process = subprocess.Popen(
        [*COPY, src, dst], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 300
        while asyncio.run(_chat_count(dst)) < 20:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def test_copy_sqlite_to_postgresql_interrupted_resumed_and_idempotent(
    cli, sqlite_url, postgres_url
):
    if not SOURCE.is_file():
        pytest.skip(f"real data not present at {SOURCE}")
    cli.json("import", str(SOURCE), "--format", "openai", "--json", "--url", sqlite_url)
    asyncio.run(_extras(sqlite_url))

    _interrupted_copy(sqlite_url, postgres_url)
    part = asyncio.run(_chat_count(postgres_url))
    assert 20 <= part < 200  # stopped part-way (listing is capped at 200 a page)

    resumed = cli.json("copy", sqlite_url, postgres_url, "--json")
    assert resumed["chats"] == 202
    assert resumed["chats_copied"] < 202
    # tau-bench's and the run chat's three (one hidden); a soft-deleted chat's messages are
    # hidden from every read, scans included, so it is copied deleted and empty.
    assert resumed["messages"] == 5308 + 3
    assert resumed["steps"] == 1
    assert resumed["runs"] == 1
    assert resumed["deleted_chats"] == 1

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
    assert (again["chats"], again["messages"]) == (202, 5311)


def test_copy_says_that_deleted_chats_arrive_without_their_messages(cli, tmp_path):
    source = f"sqlite+aiosqlite:///{tmp_path / 'src.db'}"
    target = f"sqlite+aiosqlite:///{tmp_path / 'dst.db'}"

    async def seed() -> None:
        async with open_store(source) as store:
            gone = await store.create_chat("ops", "deleted")
            await store.append_message(gone.chat_id, Message(role="user", content="bye"))
            await store.delete_chat(gone.chat_id)
            await store.create_chat("ops", "live")

    asyncio.run(seed())
    result = cli("copy", source, target)
    assert result.exit_code == 0, result.stderr
    assert "1 soft-deleted chats were copied deleted and without their messages" in result.stderr
    again = cli.json("copy", source, target, "--json")
    assert (again["chats"], again["deleted_chats"]) == (2, 1)
