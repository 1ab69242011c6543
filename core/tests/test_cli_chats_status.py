"""``threadkeep chats`` shows each chat's status; deleted chats say how to bring them back."""

from __future__ import annotations

import asyncio
from uuid import UUID

from rich.console import Console
from rich.table import Table

from threadkeep import Chat, open_store
from threadkeep.cli._render import chats_table


def delete(url: str, chat_id: str) -> None:
    async def go() -> None:
        async with open_store(url) as store:
            await store.delete_chat(UUID(chat_id))

    asyncio.run(go())


def imported(cli, transcripts, url: str) -> list[str]:
    path = transcripts.write("three.json", [transcripts.record(1, tag=str(i)) for i in range(3)])
    assert cli("import", str(path), "--format", "openai", "--url", url).exit_code == 0
    return [c["chat_id"] for c in cli.json("chats", "--json", "--url", url)["items"]]


def test_a_deleted_chat_points_at_restore_and_comes_back(cli, transcripts, sqlite_url):
    chat_id = imported(cli, transcripts, sqlite_url)[0]
    delete(sqlite_url, chat_id)
    history = cli("history", chat_id, "--url", sqlite_url)
    line = cli.one_line_error(history, f"chat {chat_id} was deleted at", "delete is soft")
    assert line.endswith(f"bring it back with: threadkeep restore {chat_id}")
    assert history.exit_code == 1
    listed = cli("chats", "--deleted", "--url", sqlite_url)
    assert chat_id in listed.stdout
    assert "deleted" in listed.stdout
    restored = cli("restore", chat_id, "--url", sqlite_url)
    assert restored.stdout.strip() == f"restored chat {chat_id} (was deleted): now active"
    again = cli("restore", chat_id, "--url", sqlite_url)
    assert "is already active; nothing to restore" in again.stdout
    assert cli("history", chat_id, "--url", sqlite_url).exit_code == 0


def test_an_unknown_chat_says_it_may_have_been_purged(cli, memory_url):
    missing = "00000000-0000-0000-0000-000000000001"
    for command in ("history", "restore"):
        result = cli(command, missing, "--url", memory_url)
        cli.one_line_error(result, f"no chat {missing}", "purge removes deleted chats for good")


def test_the_table_has_a_status_column_and_whole_ids(cli, transcripts, sqlite_url):
    ids = imported(cli, transcripts, sqlite_url)
    delete(sqlite_url, ids[0])
    page = cli.json("chats", "--json", "--deleted", "--url", sqlite_url)
    chats = [Chat.model_validate(c) for c in page["items"]]
    for width in (80, 140):
        console = Console(width=width, record=True)
        console.print(chats_table(chats, width))
        text = console.export_text()
        assert ids[0] in text  # never folded
        assert "deleted" in text
        assert "three.json #0" in text
    assert "status" in text  # the wide layout is a table with headers


def test_long_thread_ids_are_never_folded_at_any_width():
    threads = [
        f"agui:PostRun_WithApprovalRequired_RoundTripsThroughBothWrappers:t{i}" for i in (1, 2)
    ]
    chats = [Chat(user_id="importer-user", thread_id=t, name=f"chat {t[-1]}") for t in threads]
    for width in range(80, 200):
        console = Console(width=width, record=True)
        shown = chats_table(chats, width)
        console.print(shown, soft_wrap=not isinstance(shown, Table))
        lines = console.export_text().splitlines()
        for whole in [*threads, "importer-user", *(str(c.chat_id) for c in chats)]:
            assert any(whole in line for line in lines), (width, whole, lines)
    assert isinstance(chats_table(chats, 200), Table)  # wide enough: still a table
    assert not isinstance(chats_table(chats, 100), Table)
