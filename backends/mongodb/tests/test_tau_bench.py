"""Acceptance: ``threadkeep import`` of the tau-bench airline file on MongoDB equals SQLite.

The same 200 recorded GPT-4o runs are imported through the CLI into an embedded SQLite file
and into a fresh MongoDB database: both report 200 chats, 5,308 messages and 1,164 tool
calls, every chat holds the same messages in the same order with equal bodies (the random ids
each import generates aside), and a second
import into MongoDB creates nothing. The data is read from ``../shared/realdata`` beside the
repository (never copied); without it the test skips.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from threadkeep import Message, open_store
from threadkeep.cli import app
from threadkeep_contract_tests import require_realdata

REPO_ROOT = Path(__file__).resolve().parents[3]
SOURCE = REPO_ROOT.parent / "shared/realdata/tau-bench/historical_trajectories/gpt-4o-airline.json"
EXPECTED = {"chats": 200, "messages": 5308, "tool_calls": 1164}
STORE_ASSIGNED = {"chat_id", "seq", "revision", "created_at", "updated_at", "deleted_at"}
GENERATED_IDS = {"message_id", "tool_call_id", "reasoning_id"}  # random per import


def _comparable(message: Message) -> dict[str, Any]:
    """The message as written, without store-assigned fields and generated ids."""
    body = message.model_dump(mode="json", exclude=STORE_ASSIGNED | {"message_id"})
    for key in ("tool_calls", "reasonings"):
        body[key] = [{k: v for k, v in i.items() if k not in GENERATED_IDS} for i in body[key]]
    return body


def _cli_json(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.stdout)
    return json.loads(result.stdout)


def _import(url: str) -> dict[str, Any]:
    summary: dict[str, Any] = _cli_json(
        "import", str(SOURCE), "--format", "openai", "--json", "--url", url
    )
    return summary


async def _contents(url: str, count: int) -> list[list[dict[str, Any]]]:
    """Return every imported chat's message bodies, oldest first, walking pages of 200."""
    chats: list[list[dict[str, Any]]] = []
    async with open_store(url) as store:
        for index in range(count):
            chat = await store.find_chat("importer", f"openai:{SOURCE.name}:{index}")
            assert chat is not None, index
            messages: list[Message] = []
            cursor = None
            while True:
                page = await store.list_messages(chat.chat_id, limit=200, cursor=cursor)
                messages = page.items + messages
                if not page.has_more:
                    break
                cursor = page.next_cursor
            chats.append([_comparable(m) for m in messages])
    return chats


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No THREADKEEP_* settings from the machine; an empty working directory."""
    for name in ("THREADKEEP_URL", "THREADKEEP_CONFIG", "THREADKEEP_CURSOR_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_tau_bench_import_matches_sqlite(isolated: Path, mongo_db: tuple[str, str]) -> None:
    require_realdata(SOURCE, "tau-bench trajectories")
    records = json.loads(SOURCE.read_text(encoding="utf-8"))
    sqlite_url = f"sqlite+aiosqlite:///{isolated / 'tau.db'}"
    mongo_url, _ = mongo_db

    on_sqlite, on_mongo = _import(sqlite_url), _import(mongo_url)
    for summary in (on_sqlite, on_mongo):
        assert (summary["chats"], summary["messages"], summary["tool_calls"]) == (200, 5308, 1164)
        assert summary["messages_created"] == 5308
    assert _cli_json("stats", "--json", "--url", mongo_url) == EXPECTED
    assert _cli_json("stats", "--json", "--url", sqlite_url) == EXPECTED

    mongo_chats = asyncio.run(_contents(mongo_url, len(records)))
    sqlite_chats = asyncio.run(_contents(sqlite_url, len(records)))
    assert [len(c) for c in mongo_chats] == [len(r["traj"]) for r in records]
    for index, (mongo, sqlite) in enumerate(zip(mongo_chats, sqlite_chats, strict=True)):
        assert mongo == sqlite, f"record {index} differs between MongoDB and SQLite"

    again = _import(mongo_url)
    assert (again["chats_created"], again["messages_created"], again["tool_calls_created"]) == (
        0,
        0,
        0,
    )
    assert _cli_json("stats", "--json", "--url", mongo_url) == EXPECTED
