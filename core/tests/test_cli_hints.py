"""The "older:" line under a page is a command that can be pasted as it is."""

from __future__ import annotations

import shlex

from threadkeep import Page
from threadkeep.cli._read import more_hint


def next_command(result) -> list[str]:
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("older: threadkeep "), line
    return shlex.split(line.removeprefix("older: threadkeep "))


def test_the_chats_hint_repeats_url_limit_and_user(cli, transcripts, sqlite_url):
    path = transcripts.write("five.json", [transcripts.record(0, tag=str(i)) for i in range(5)])
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    first = cli("chats", "--user", "importer", "--limit", "2", "--url", sqlite_url)
    args = next_command(first)
    assert args[:7] == ["chats", "--user", "importer", "--url", sqlite_url, "--limit", "2"]
    seen = 0
    while True:  # follow the hints to the oldest page
        result = cli(*args)
        assert result.exit_code == 0, result.stderr
        seen += 1
        if result.stdout.strip().endswith("(no older items)"):
            break
        args = next_command(result)
    assert seen == 2  # pages 2 and 3 of 2 + 2 + 1


def test_the_history_hint_repeats_url_and_limit(cli, transcripts, sqlite_url):
    path = transcripts.write("one.json", [transcripts.record(3)])
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    chat_id = cli.json("chats", "--json", "--url", sqlite_url)["items"][0]["chat_id"]
    args = next_command(cli("history", chat_id, "--limit", "5", "--url", sqlite_url))
    assert args[:6] == ["history", chat_id, "--url", sqlite_url, "--limit", "5"]
    assert cli(*args).exit_code == 0


def test_a_password_in_the_url_is_masked():
    page: Page[object] = Page(items=[], next_cursor="abc.def", has_more=True)
    url = "postgresql+asyncpg://tk:s3cret@db.example:5432/app"
    hint = more_hint(["chats"], page, url=url, limit=50).plain
    assert "s3cret" not in hint
    assert (
        "--url 'postgresql+asyncpg://tk:***@db.example:5432/app' --limit 50 --cursor abc.def"
        in hint
    )
    assert "password hidden" in hint
