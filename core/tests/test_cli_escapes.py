"""Terminal control sequences in stored data are printed escaped, never raw: ``history``,
``chats`` (both layouts), ``--json`` and error lines."""

from __future__ import annotations

import asyncio
import re

import pytest

from threadkeep import Message, ToolCall, open_store
from threadkeep.cli._render import visible

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
EVIL = "\x1b[2J\x1b[31mred\x1b[0m bell\x07 cr\rOVER \x9b31m c1\x7f"


def seeded(url: str) -> str:
    async def go() -> str:
        async with open_store(url) as store:
            # Ids with control characters are refused at the API (issue 12); names are
            # display text, stored exactly.
            chat = await store.create_chat("u", "t", name=f"n{EVIL}")
            await store.append_messages(
                chat.chat_id,
                [
                    Message(role="user", content=f"c{EVIL}\nsecond line\tend"),
                    Message(
                        role="assistant",
                        run_id=f"r{EVIL}",
                        tool_calls=[ToolCall(agui_id=f"i{EVIL}", name=f"f{EVIL}", arguments=EVIL)],
                    ),
                ],
            )
            return str(chat.chat_id)

    return asyncio.run(go())


def test_visible_escapes_controls_but_keeps_newline_and_tab() -> None:
    assert visible("a\x1b[31mb\rc\x07\n\td\x9b\x7f\x00") == (
        "a\\x1b[31mb\\rc\\x07\n\td\\x9b\\x7f\\x00"
    )
    assert visible("plain [b]text[/b] ünïcode") == "plain [b]text[/b] ünïcode"


@pytest.mark.parametrize("columns", ["80", "160"])
def test_history_and_chats_print_control_characters_escaped(
    cli, sqlite_url: str, columns: str
) -> None:
    chat_id = seeded(sqlite_url)
    env = {"COLUMNS": columns}
    for args in (
        ("history", chat_id),
        ("chats",),
        ("history", chat_id, "--json"),
        ("chats", "--json"),
    ):
        result = cli(*args, "--url", sqlite_url, env=env)
        assert result.exit_code == 0, result.output
        assert not RAW.search(result.stdout), (args, result.stdout)
    shown = cli("history", chat_id, "--url", sqlite_url, env=env).stdout
    assert "\\x1b[2J\\x1b[31mred" in shown
    assert "second line\tend" in shown or "second line" in shown  # newline and tab kept


def test_an_error_line_escapes_control_characters(cli, tmp_path) -> None:
    path = tmp_path / "bad\x1b[2J.json"
    path.write_text("[1]", encoding="utf-8")
    result = cli("import", str(path), "--format", "openai", "--url", "memory://")
    line = cli.one_line_error(result, "bad\\x1b[2J.json")
    assert not RAW.search(line)
