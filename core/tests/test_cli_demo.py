"""``threadkeep demo``: a scripted conversation stored and paged back, idempotently."""

from __future__ import annotations

import pytest

from threadkeep.cli._demo import demo_messages


@pytest.fixture(params=["sqlite", "memory"])
def demo_url(request: pytest.FixtureRequest, sqlite_url: str, memory_url: str) -> str:
    return sqlite_url if request.param == "sqlite" else memory_url


def test_demo_prints_the_conversation_page_by_page(cli, demo_url: str):
    result = cli("demo", "--url", demo_url, "--page-size", "4")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "11 messages stored now, 0 already there" in out
    # 11 messages at 4 per page: three pages, newest first.
    for caption in ("page 1", "#8..#11", "page 2", "#4..#7", "page 3", "#1..#3"):
        assert caption in out
    assert "page 4" not in out
    assert out.index("page 1") < out.index("page 2") < out.index("page 3")
    assert "get_forecast" in out
    assert "thinking: " in out
    assert "result of call_forecast_1" in out


def test_demo_twice_does_not_duplicate(cli, demo_url: str):
    assert cli("demo", "--url", demo_url).exit_code == 0
    again = cli("demo", "--url", demo_url)
    assert again.exit_code == 0, again.output
    assert "0 messages stored now, 11 already there" in again.stdout
    assert cli.json("stats", "--json", "--url", demo_url) == {
        "chats": 1,
        "messages": 11,
        "tool_calls": 2,
    }


def test_demo_stores_linked_tool_results_and_reasoning(cli, demo_url: str):
    cli("demo", "--url", demo_url)
    (chat,) = cli.json("chats", "--json", "--url", demo_url)["items"]
    page = cli.json("history", chat["chat_id"], "--json", "--limit", "200", "--url", demo_url)
    messages = page["items"]
    assert [m["content"] for m in messages] == [m.content for m in demo_messages()]
    calls = {c["agui_id"]: c for m in messages for c in m["tool_calls"]}
    assert set(calls) == {"call_forecast_1", "call_packing_1"}
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_ref"] for m in results] == ["call_forecast_1", "call_packing_1"]
    for result in results:  # each result comes after the message holding its call
        caller = next(
            m
            for m in messages
            if result["tool_call_ref"] in {c["agui_id"] for c in m["tool_calls"]}
        )
        assert caller["seq"] < result["seq"]
    assert [r["content"] for m in messages for r in m["reasonings"]] == [
        "Rain depends on the forecast; check it instead of guessing."
    ]


def test_demo_page_size_is_validated(cli, memory_url: str):
    cli.one_line_error(cli("demo", "--url", memory_url, "--page-size", "0"), "--page-size")


def test_the_next_hint_repeats_page_size_and_quotes_the_url(cli, tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'sp ace.db'}"
    result = cli("demo", "--url", url, "--page-size", "7")
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("Next: threadkeep history ")
    assert last.endswith(f"--url '{url}' --limit 7")
    chat_id = last.split()[3]
    again = cli("history", chat_id, "--url", url, "--limit", "7")
    assert again.exit_code == 0, again.output
    page = cli.json("history", chat_id, "--url", url, "--limit", "7", "--json")
    assert len(page["items"]) == 7


def test_the_next_hint_says_a_memory_store_is_gone(cli, memory_url):
    result = cli("demo", "--url", memory_url)
    last = result.stdout.strip().splitlines()[-1]
    assert "lived in this process only" in last
    assert "Next:" not in last
