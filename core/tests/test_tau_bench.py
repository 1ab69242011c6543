"""Acceptance: the tau-bench airline transcripts imported through the CLI (issue 2).

200 real GPT-4o runs give exactly 200 chats, 5,308 messages and 1,164 tool calls; every
message's role, content and tool-call arguments equal the source; a second import changes no
count. Runs on SQLite, and on PostgreSQL when ``THREADKEEP_TEST_POSTGRES_URL`` is set (a fresh
schema per run). The data is read from ``../shared/realdata`` beside the repository and never
copied into it; without it the test skips.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadkeep import Message, open_store
from threadkeep_contract_tests import require_realdata, require_service
from threadkeep_sql.testing import create_schema, drop_schema

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT.parent / "shared/realdata/tau-bench/historical_trajectories/gpt-4o-airline.json"
EXPECTED = {"chats": 200, "messages": 5308, "tool_calls": 1164}
POSTGRES_ENV = "THREADKEEP_TEST_POSTGRES_URL"


@pytest.fixture(scope="module")
def source() -> list[dict[str, Any]]:
    require_realdata(SOURCE, "tau-bench trajectories")
    records: list[dict[str, Any]] = json.loads(SOURCE.read_text(encoding="utf-8"))
    return records


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(
    request: pytest.FixtureRequest, sqlite_url: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(url, driver options)`` of an empty store; PostgreSQL gets a fresh schema."""
    if request.param == "sqlite":
        yield sqlite_url, {}
        return
    server = require_service(POSTGRES_ENV, "PostgreSQL")
    url = asyncio.run(create_schema(server, prefix="tk_tau"))
    try:
        yield url, {}
    finally:
        asyncio.run(drop_schema(url))


async def _stored_chats(url: str, options: dict[str, Any], count: int) -> list[list[Message]]:
    """Return every imported chat's messages, oldest first, walking pages of 200."""
    chats: list[list[Message]] = []
    async with open_store(url, **options) as store:
        for index in range(count):
            chat = await store.find_chat("importer", f"openai:{SOURCE.name}:{index}")
            assert chat is not None, index
            pages, cursor = [], None
            while True:
                page = await store.list_messages(chat.chat_id, limit=200, cursor=cursor)
                pages.append(page.items)
                if not page.has_more:
                    break
                cursor = page.next_cursor
            chats.append([m for items in reversed(pages) for m in items])
    return chats


def _assert_equal_to_source(stored: Message, entry: dict[str, Any], where: str) -> None:
    assert stored.role.value == entry["role"], where
    assert stored.content == (entry["content"] or ""), where
    calls = [(c.agui_id, c.name, c.arguments) for c in stored.tool_calls]
    expected = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in entry.get("tool_calls") or []
    ]
    assert calls == expected, where
    assert stored.tool_call_ref == entry.get("tool_call_id"), where


def test_tau_bench_airline_import(cli, source, backend):
    url, options = backend
    first = cli.json("import", str(SOURCE), "--format", "openai", "--json", "--url", url)
    assert (first["chats"], first["messages"], first["tool_calls"]) == (200, 5308, 1164)
    assert first["messages_created"] == 5308
    assert first["tool_calls_created"] == 1164
    assert cli.json("stats", "--json", "--url", url) == EXPECTED

    chats = asyncio.run(_stored_chats(url, options, len(source)))
    for index, (record, messages) in enumerate(zip(source, chats, strict=True)):
        assert len(messages) == len(record["traj"]), index
        for position, (stored, entry) in enumerate(zip(messages, record["traj"], strict=True)):
            _assert_equal_to_source(stored, entry, f"record {index}, message {position}")

    again = cli.json("import", str(SOURCE), "--format", "openai", "--json", "--url", url)
    assert (again["chats_created"], again["messages_created"], again["tool_calls_created"]) == (
        0,
        0,
        0,
    )
    assert (again["chats_present"], again["messages_present"]) == (200, 5308)
    assert cli.json("stats", "--json", "--url", url) == EXPECTED
