"""``threadkeep archive`` and ``threadkeep restore``."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import pytest
import typer

from threadkeep import ChatStatus, Message, open_store
from threadkeep.cli._archive import parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30d", timedelta(days=30)),
        ("0d", timedelta(0)),
        ("12h", timedelta(hours=12)),
        ("90m", timedelta(minutes=90)),
        ("2w", timedelta(weeks=2)),
        ("1.5h", timedelta(hours=1.5)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "d", "-1d", "3y", "1 d 2h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_duration(text)


async def _seed(url: str) -> list[UUID]:
    async with open_store(url) as store:
        ids = []
        for i in range(3):
            chat = await store.create_chat("cli-user", f"t{i}")
            await store.append_messages(
                chat.chat_id, [Message(role="user", content=f"hello {i}.{j}") for j in range(4)]
            )
            ids.append(chat.chat_id)
        return ids


async def _statuses(url: str, ids: list[UUID]) -> list[ChatStatus]:
    async with open_store(url) as store:
        return [(await store.primitives.get_chat(i)).status for i in ids]  # type: ignore[union-attr]


def test_archive_needs_an_archive_url(cli, memory_url) -> None:
    result = cli("archive", "--older-than", "0d", "--url", memory_url)
    cli.one_line_error(result, "THREADKEEP_ARCHIVE_URL")


def test_bad_duration_is_a_usage_error(cli, memory_url) -> None:
    result = cli("archive", "--older-than", "soon", "--url", memory_url)
    assert result.exit_code == 2
    assert "not a duration" in result.stderr


def test_archive_history_restore(cli, memory_url, tmp_path: Path) -> None:
    ids = asyncio.run(_seed(memory_url))
    env = {"THREADKEEP_ARCHIVE_URL": f"file://{tmp_path / 'cold'}"}
    result = cli("archive", "--older-than", "1d", "--url", memory_url, env=env)
    assert result.exit_code == 0, result.stderr
    assert "archived 0 chat(s)" in result.stdout
    result = cli("archive", "--older-than", "0d", "--limit", "2", "--url", memory_url, env=env)
    assert "archived 2 chat(s): 8 message(s)" in result.stdout
    assert asyncio.run(_statuses(memory_url, ids)).count(ChatStatus.ARCHIVED) == 2
    done = cli.json(
        "archive",
        "--older-than",
        "0d",
        "--url",
        memory_url,
        "--json",
        "--archive-url",
        f"file://{tmp_path / 'cold'}",
    )
    assert len(done["archived"]) == 1
    page = cli.json("history", str(ids[0]), "--url", memory_url, "--json")
    assert [m["content"] for m in page["items"]] == [f"hello 0.{j}" for j in range(4)]
    restored = cli.json("restore", str(ids[1]), "--url", memory_url, "--json")
    assert restored["status"] == "active"
    assert asyncio.run(_statuses(memory_url, ids)) == [
        ChatStatus.ACTIVE,
        ChatStatus.ACTIVE,
        ChatStatus.ARCHIVED,
    ]
