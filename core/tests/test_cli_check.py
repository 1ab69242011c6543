"""``threadkeep check`` lists every damaged row of a store and changes nothing (issue 12)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from uuid import UUID

from threadkeep import Message, Step, open_store


def _seed(url: str) -> tuple[UUID, UUID, list[int]]:
    async def go() -> tuple[UUID, UUID, list[int]]:
        async with open_store(url) as store:
            one = await store.create_chat("u", "one")
            two = await store.create_chat("u", "two")
            stored = await store.append_messages(
                one.chat_id, [Message(role="user", content=f"m{i}") for i in range(5)]
            )
            await store.append_message(two.chat_id, Message(role="user", content="fine"))
            return one.chat_id, two.chat_id, [m.seq or 0 for m in stored]

    return asyncio.run(go())


def _damage(path: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(sql, args)
        conn.commit()


def test_check_lists_every_damaged_row(cli, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    url = f"sqlite+aiosqlite:///{path}"
    one, two, seqs = _seed(url)
    clean = cli("check", "--url", url)
    assert clean.exit_code == 0, clean.output
    assert "0 damaged rows" in clean.stdout
    update = "UPDATE messages SET {} = ? WHERE chat_id = ? AND seq = ?"
    _damage(path, update.format("body"), "not json {", one.hex, seqs[1])
    _damage(path, update.format("created_at"), "not-a-date", one.hex, seqs[3])
    _damage(path, "UPDATE chats SET body = ? WHERE chat_id = ?", "[1]", two.hex)
    before = path.read_bytes()
    result = cli("check", "--url", url, "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = {(d["kind"], d["chat_id"], d["seq"], d["column"]) for d in report["damaged"]}
    assert ("message", str(one), seqs[1], "body") in found
    assert ("message", str(one), seqs[3], "created_at") in found
    assert any(kind == "chat" and column == "body" for kind, _, _, column in found)
    assert len(found) == 3
    assert report["messages"] == 3  # the other three of chat one; chat two was unreadable
    assert path.read_bytes() == before, "check wrote to the store"
    text = cli("check", "--url", url)
    assert text.exit_code == 1
    assert f"chat={one} seq={seqs[1]} column=body" in text.stdout
    assert "3 damaged rows" in text.stdout


def test_check_lists_damaged_steps(cli, tmp_path: Path) -> None:
    """Steps are stored rows too: a damaged one is listed, and the scan goes past it."""
    path = tmp_path / "store.db"
    url = f"sqlite+aiosqlite:///{path}"

    async def seed() -> tuple[UUID, list[Step]]:
        async with open_store(url) as store:
            chat = await store.create_chat("u", "steps")
            steps = await store.save_steps(
                [Step(chat_id=chat.chat_id, stack_id="s", type="tool") for _ in range(5)]
            )
            return chat.chat_id, steps

    chat_id, steps = asyncio.run(seed())
    update = "UPDATE steps SET body = ? WHERE step_id = ?"
    _damage(path, update, "not json {", steps[1].step_id.hex)
    _damage(path, update, "[1]", steps[3].step_id.hex)
    result = cli("check", "--url", url, "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = [(d["kind"], d["chat_id"], d["seq"]) for d in report["damaged"]]
    assert found == [("step", str(chat_id), steps[1].seq), ("step", str(chat_id), steps[3].seq)]
    assert report["steps"] == 3, "the healthy steps around the damaged ones were not all read"
