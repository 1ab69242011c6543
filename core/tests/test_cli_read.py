"""``threadkeep chats`` / ``history`` / ``stats``: JSON shape, walking pages, limits, cursors."""

from __future__ import annotations

from typing import Any

import pytest

PAGE_KEYS = {"items", "next_cursor", "has_more"}


@pytest.fixture
def two_chats(cli, transcripts, sqlite_url: str) -> dict[str, Any]:
    """Import two chats: one of 253 messages (63 tool calls), one of 9 (2 tool calls)."""
    path = transcripts.write(
        "two.json", [transcripts.record(63, tag="a"), transcripts.record(2, tag="b")]
    )
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    chats = cli.json("chats", "--json", "--url", sqlite_url)["items"]
    by_thread = {c["thread_id"]: c["chat_id"] for c in chats}
    return {
        "url": sqlite_url,
        "long": by_thread["openai:two.json:0"],
        "short": by_thread["openai:two.json:1"],
    }


def walk(cli, url: str, *args: str) -> list[dict[str, Any]]:
    """Follow next_cursor from the newest page to the oldest; return the pages."""
    pages, cursor = [], None
    while True:
        extra = ("--cursor", cursor) if cursor else ()
        page = cli.json(*args, "--json", "--url", url, *extra)
        assert set(page) == PAGE_KEYS
        pages.append(page)
        if not page["has_more"]:
            assert page["next_cursor"] is None
            return pages
        cursor = page["next_cursor"]
        assert isinstance(cursor, str)
        assert cursor


def test_chats_json_shape(cli, two_chats):
    page = cli.json("chats", "--json", "--url", two_chats["url"])
    assert set(page) == PAGE_KEYS
    assert page["has_more"] is False
    assert page["next_cursor"] is None
    assert [c["thread_id"] for c in page["items"]] == ["openai:two.json:0", "openai:two.json:1"]
    for chat in page["items"]:
        assert {"chat_id", "user_id", "thread_id", "created_at", "metadata"} <= set(chat)
        assert chat["user_id"] == "importer"


def test_history_json_items_are_messages(cli, two_chats):
    page = cli.json("history", two_chats["short"], "--json", "--url", two_chats["url"])
    assert set(page) == PAGE_KEYS
    roles = [m["role"] for m in page["items"]]
    assert roles == ["system"] + ["user", "assistant", "tool", "assistant"] * 2
    assistant_call = page["items"][2]
    assert assistant_call["content"] == ""
    assert assistant_call["tool_calls"][0]["arguments"] == '{"n": 0}'
    assert page["items"][3]["tool_call_ref"] == assistant_call["tool_calls"][0]["agui_id"]


def test_walking_history_by_7_returns_every_message_once_in_order(cli, two_chats):
    url, chat_id = two_chats["url"], two_chats["long"]
    pages = walk(cli, url, "history", chat_id, "--limit", "7")
    assert all(1 <= len(p["items"]) <= 7 for p in pages)
    assert len(pages) == -(-253 // 7)
    # Pages run newest to oldest; items inside a page oldest to newest.
    walked = [m for page in reversed(pages) for m in page["items"]]
    seqs = [m["seq"] for m in walked]
    assert len(walked) == 253
    assert len(set(seqs)) == 253
    assert seqs == sorted(seqs)
    assert [m["metadata"].get("openai", {}).get("name") for m in walked if m["role"] == "tool"] == [
        "lookup"
    ] * 63
    assert walked[0]["content"] == "system a"
    assert walked[-1]["content"] == "answer a 62"


def test_limit_above_200_is_capped(cli, two_chats):
    page = cli.json(
        "history", two_chats["long"], "--limit", "500", "--json", "--url", two_chats["url"]
    )
    assert len(page["items"]) == 200
    assert page["has_more"] is True


def test_limit_zero_fails_with_one_line(cli, two_chats):
    for command in (("history", two_chats["long"]), ("chats",)):
        result = cli(*command, "--limit", "0", "--url", two_chats["url"])
        cli.one_line_error(result, "limit")


def test_cursor_from_another_chat_fails_with_one_line(cli, two_chats):
    url = two_chats["url"]
    page = cli.json("history", two_chats["long"], "--limit", "5", "--json", "--url", url)
    result = cli("history", two_chats["short"], "--cursor", page["next_cursor"], "--url", url)
    cli.one_line_error(result, "cursor")
    chats_cursor = cli("chats", "--cursor", page["next_cursor"], "--url", url)
    cli.one_line_error(chats_cursor, "cursor")


def test_altered_cursor_fails_with_one_line(cli, two_chats):
    url = two_chats["url"]
    cursor = cli.json("history", two_chats["long"], "--limit", "5", "--json", "--url", url)[
        "next_cursor"
    ]
    altered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
    cli.one_line_error(
        cli("history", two_chats["long"], "--cursor", altered, "--url", url), "cursor"
    )


def test_cursor_works_across_cli_invocations(cli, two_chats):
    # Each invocation opens the store anew; the stored secret makes cursors survive.
    pages = walk(cli, two_chats["url"], "chats", "--limit", "1")
    assert [p["items"][0]["thread_id"] for p in pages] == ["openai:two.json:1", "openai:two.json:0"]


def test_chats_filter_by_user(cli, two_chats):
    assert cli.json("chats", "--user", "nobody", "--json", "--url", two_chats["url"])["items"] == []
    assert (
        len(cli.json("chats", "--user", "importer", "--json", "--url", two_chats["url"])["items"])
        == 2
    )


def test_stats(cli, two_chats):
    url = two_chats["url"]
    assert cli.json("stats", "--json", "--url", url) == {
        "chats": 2,
        "messages": 262,
        "tool_calls": 65,
    }
    assert cli("stats", "--url", url).stdout.strip() == "2 chats, 262 messages, 65 tool calls"


def test_history_table_output_has_a_copyable_cursor(cli, two_chats):
    result = cli("history", two_chats["short"], "--limit", "3", "--url", two_chats["url"])
    assert result.exit_code == 0
    (hint,) = [line for line in result.stdout.splitlines() if line.startswith("older:")]
    cursor = hint.split("--cursor ")[1]
    follow = cli(
        "history", two_chats["short"], "--limit", "3", "--cursor", cursor, "--url", two_chats["url"]
    )
    assert follow.exit_code == 0, follow.stderr


def test_unknown_chat_and_malformed_id_fail_with_one_line(cli, two_chats):
    url = two_chats["url"]
    cli.one_line_error(cli("history", "00000000-0000-4000-8000-000000000000", "--url", url), "chat")
    result = cli("history", "not-a-uuid", "--url", url)
    assert result.exit_code == 2
    cli.one_line_error(result, "UUID")
