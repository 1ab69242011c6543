"""``threadkeep stats`` never restores archived chats: it counts them without reading them."""

from __future__ import annotations

import asyncio

from threadkeep import ChatStatus, open_archiver, open_store


async def archive_one(url: str, archive_url: str, thread_id: str) -> None:
    async with open_store(url) as store:
        chat = await store.find_chat("importer", thread_id)
        assert chat is not None
        async with open_archiver(store, archive_url) as archiver:
            await archiver.archive_chat(chat.chat_id)


async def status_of(url: str, thread_id: str) -> ChatStatus:
    async with open_store(url) as store:
        chat = await store.find_chat("importer", thread_id)
        assert chat is not None
        return chat.status


def test_stats_counts_archived_chats_without_restoring_them(cli, transcripts, sqlite_url, tmp_path):
    path = transcripts.write("runs.json", [transcripts.record(2), transcripts.record(1)])
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    archive_url = f"file://{tmp_path / 'archive'}"
    asyncio.run(archive_one(sqlite_url, archive_url, "openai:runs.json:0"))

    counts = cli.json("stats", "--json", "--url", sqlite_url)
    assert counts == {"chats": 2, "messages": 5, "tool_calls": 1, "archived_chats": 1}
    human = cli("stats", "--url", sqlite_url).stdout.strip()
    assert (
        human == "2 chats, 5 messages, 1 tool calls (1 archived chats: their messages not counted)"
    )
    assert asyncio.run(status_of(sqlite_url, "openai:runs.json:0")) is ChatStatus.ARCHIVED


def test_a_damaged_bundle_names_the_chat_object_and_what_to_do(
    cli, transcripts, sqlite_url, tmp_path
):
    path = transcripts.write("runs.json", [transcripts.record(2)])
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    archive_url = f"file://{tmp_path / 'archive'}"
    asyncio.run(archive_one(sqlite_url, archive_url, "openai:runs.json:0"))
    (bundle,) = (tmp_path / "archive").rglob("*.tkb")
    data = bytearray(bundle.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 40] = bytes(b ^ 0xFF for b in data[middle : middle + 40])
    bundle.write_bytes(bytes(data))
    chat_id = cli.json("chats", "--json", "--url", sqlite_url)["items"][0]["chat_id"]
    for command in ("history", "restore"):
        result = cli(command, chat_id, "--url", sqlite_url)
        cli.one_line_error(
            result,
            f"chat {chat_id}",
            bundle.name,
            "stays archived",
            "restore that object from a backup",
        )
        assert result.exit_code == 1
    assert asyncio.run(status_of(sqlite_url, "openai:runs.json:0")) is ChatStatus.ARCHIVED
