"""``threadkeep import`` with the native formats: claude-code, swe-agent, openhands, auto."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "importers" / "fixtures"
_PROMPT = '{"type": "user", "uuid": "p", "message": {"role": "user", "content": "hi"}}'


def _copy(tmp_path: Path, name: str) -> Path:
    source = FIXTURES / name
    target = tmp_path / "in" / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return target


def _threads(cli, url: str) -> list[str]:
    chats = cli.json("chats", "--json", "--limit", "200", "--url", url)["items"]
    return sorted(c["thread_id"] for c in chats)


@pytest.mark.parametrize(
    ("fmt", "name", "counts", "threads"),
    [
        (
            "claude-code",
            "claude-code/proj",
            (3, 17, 4),
            ["claude-code:s1", "claude-code:s1#branch-a4", "claude-code:s1/agent-ab12"],
        ),
        (
            "swe-agent",
            "swe-agent",
            (2, 10, 2),
            ["swe-agent:old.traj", "swe-agent:run1/inst-1/inst-1.traj"],
        ),
        ("openhands", "openhands/events.json", (1, 7, 3), ["openhands:events.json"]),
        ("auto", "openhands/events.json", (1, 7, 3), ["openhands:events.json"]),
        ("auto", "claude-code/proj", (3, 17, 4), None),
    ],
)
def test_each_format_imports_once(cli, sqlite_url, tmp_path, fmt, name, counts, threads):
    path = _copy(tmp_path, name)
    first = cli.json("import", str(path), "--format", fmt, "--json", "--url", sqlite_url)
    assert (
        first["chats_created"],
        first["messages_created"],
        first["tool_calls_created"],
    ) == counts
    again = cli.json("import", str(path), "--format", fmt, "--json", "--url", sqlite_url)
    assert (
        again["chats_present"],
        again["messages_present"],
        again["tool_calls_present"],
    ) == counts
    assert again["messages_created"] == 0
    if threads is not None:
        assert _threads(cli, sqlite_url) == threads


def test_a_claude_code_session_reads_back_through_history(cli, memory_url, tmp_path):
    path = _copy(tmp_path, "claude-code/proj") / "s1.jsonl"
    result = cli("import", str(path), "--format", "claude-code", "--url", memory_url)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == (
        "imported s1.jsonl: 3 chats (3 new, 0 already present), "
        "17 messages (17 new, 0 already present), 4 tool calls (4 new, 0 already present)"
    )
    chats = cli.json("chats", "--json", "--url", memory_url)["items"]
    (chat_id,) = [c["chat_id"] for c in chats if c["thread_id"] == "claude-code:s1"]
    items = cli.json("history", chat_id, "--json", "--limit", "200", "--url", memory_url)["items"]
    assert [m["agui_id"] for m in items] == [
        "u1", "msg_1", "r1#0", "r2#0", "msg_3", "u2", "msg_4", "r3#0", "msg_5", "c1", "u4", "msg_6",
    ]  # fmt: skip
    assert items[9]["kind"] == "boundary"


@pytest.mark.parametrize(
    ("fmt", "write", "needles"),
    [
        ("claude-code", ("s.jsonl", _PROMPT + "\n{oops\n"), ("s.jsonl: line 2", "not JSON")),
        ("swe-agent", ("x.traj", '{"info": {}}'), ("x.traj", "no 'history' or 'trajectory'")),
        ("openhands", ("e.json", '[{"id": 0, "action": "run", "args": 3}]'), ("event 0", "args")),
        ("auto", ("n.json", '{"hello": 1}'), ("n.json: cannot tell its format", "--format")),
    ],
)
def test_errors_are_one_line_and_write_nothing(cli, sqlite_url, tmp_path, fmt, write, needles):
    name, text = write
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = cli("import", str(path), "--format", fmt, "--url", sqlite_url)
    assert result.exit_code == 2  # InvalidArgument: bad input, as for --format openai
    cli.one_line_error(result, *needles)
    assert _threads(cli, sqlite_url) == []


def test_openai_refuses_a_folder_and_names_the_formats_that_take_one(cli, memory_url, tmp_path):
    result = cli("import", str(tmp_path), "--format", "openai", "--url", memory_url)
    assert result.exit_code == 2
    cli.one_line_error(result, "is a directory", "--format openai imports one file")
