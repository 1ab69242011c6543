"""``threadkeep import``: OpenAI transcripts become chats, idempotently, with one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from threadkeep._importers import IMPORTERS


def history(cli, url: str, thread_id: str) -> list[dict]:
    chats = cli.json("chats", "--json", "--limit", "200", "--url", url)["items"]
    (chat_id,) = [c["chat_id"] for c in chats if c["thread_id"] == thread_id]
    page = cli.json("history", chat_id, "--json", "--limit", "200", "--url", url)
    assert not page["has_more"]
    return page["items"]


def test_import_reports_counts_and_a_second_import_changes_nothing(cli, transcripts, sqlite_url):
    path = transcripts.write("runs.json", [transcripts.record(3), transcripts.record(1, tag="u")])
    first = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.strip() == (
        "imported runs.json: 2 chats (2 new, 0 already present), "
        "18 messages (18 new, 0 already present), 4 tool calls (4 new, 0 already present)"
    )
    again = cli.json("import", str(path), "--format", "openai", "--json", "--url", sqlite_url)
    assert again == {
        "chats": 2,
        "messages": 18,
        "tool_calls": 4,
        "chats_created": 0,
        "chats_present": 2,
        "messages_created": 0,
        "messages_present": 18,
        "tool_calls_created": 0,
        "tool_calls_present": 4,
    }
    assert cli.json("stats", "--json", "--url", sqlite_url) == {
        "chats": 2,
        "messages": 18,
        "tool_calls": 4,
    }


def test_json_lines_traj_and_record_ids(cli, transcripts, sqlite_url):
    records = [
        {"traj": transcripts.record(1)["messages"], "id": "conv-7", "score": 0.5},
        {"messages": transcripts.record(2)["messages"], "id": 12},
        transcripts.record(1)["messages"],  # a bare message list is a record too
    ]
    path = transcripts.write("runs.jsonl", records, jsonl=True)
    report = cli.json("import", str(path), "-f", "openai", "--json", "--url", sqlite_url)
    assert (report["chats"], report["messages"], report["tool_calls"]) == (3, 19, 4)
    threads = {c["thread_id"]: c for c in cli.json("chats", "--json", "--url", sqlite_url)["items"]}
    assert set(threads) == {
        "openai:runs.jsonl:id=conv-7",
        "openai:runs.jsonl:id=12",
        "openai:runs.jsonl:2",
    }
    source = threads["openai:runs.jsonl:id=conv-7"]["metadata"]["source"]
    digest = source.pop("digest")  # the import's proof that the record is stored whole
    assert re.fullmatch("[0-9a-f]{64}", digest)
    assert source.pop("counts") == {"messages": 5, "tool_calls": 1}  # as converted
    assert source == {"format": "openai", "file": "runs.jsonl", "record": 0, "score": 0.5}


def test_same_file_under_another_user_makes_other_chats(cli, transcripts, sqlite_url):
    path = transcripts.write("runs.json", [transcripts.record(1)])
    cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli("import", str(path), "--format", "openai", "--user", "someone", "--url", sqlite_url)
    users = sorted(c["user_id"] for c in cli.json("chats", "--json", "--url", sqlite_url)["items"])
    assert users == ["importer", "someone"]


def test_content_is_kept_exactly(cli, transcripts, sqlite_url):
    tricky = "NUL\x00 CJK 线程 emoji 🧵 [bold]not markup[/bold]\r\n\u2028end"
    messages = [
        {"role": "user", "content": tricky},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look at "},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://x.test/a.png", "detail": "low"},
                },
                {"type": "text", "text": "this 🧵"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
            "name": "alice",
        },
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{ "a" :1 }'},
                },
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    path = transcripts.write("exact.json", [{"messages": messages}])
    assert cli("import", str(path), "--format", "openai", "--url", sqlite_url).exit_code == 0
    stored = history(cli, sqlite_url, "openai:exact.json:0")
    assert stored[0]["content"] == tricky
    assert stored[1]["content"] == "look at this 🧵"
    assert stored[1]["metadata"] == {"openai": {"name": "alice"}, "text_part_lengths": [8, 6]}
    assert stored[1]["parts"] == [
        {
            "type": "image",
            "url": "https://x.test/a.png",
            "data": None,
            "mime_type": None,
            "alt": None,
            "detail": "low",
        },
        {"type": "custom", "name": "input_audio", "value": {"data": "AAAA", "format": "wav"}},
    ]
    assert stored[2]["content"] == ""
    assert stored[2]["metadata"] == {"openai": {"content": None, "refusal": None}}
    calls = [(c["agui_id"], c["name"], c["arguments"]) for c in stored[2]["tool_calls"]]
    assert calls == [("c1", "f", '{ "a" :1 }'), ("c2", "g", "")]
    assert [(m["tool_call_ref"], m["content"]) for m in stored[3:]] == [
        ("c1", "one"),
        ("c2", "two"),
    ]
    assert [m["agui_id"] for m in stored] == [f"openai:{n}" for n in range(5)]


def test_changed_file_conflicts_on_reimport(cli, transcripts, sqlite_url):
    record = transcripts.record(1)
    path = transcripts.write("runs.json", [record])
    cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    record["messages"][1]["content"] = "edited"
    transcripts.write("runs.json", [record])
    result = cli("import", str(path), "--format", "openai", "--url", sqlite_url)
    cli.one_line_error(result, "record 0", "different content")


def test_missing_file_fails_before_touching_the_store(cli):
    result = cli("import", "missing.json", "--format", "openai")
    cli.one_line_error(result, "missing.json", "no such file")
    assert not Path("threadkeep.db").exists()  # the default store was not created


@pytest.mark.parametrize(
    ("content", "needles"),
    [
        ('[{"messages": [}', ("not valid JSON", "line 1")),
        ('{"messages": []}\n{oops\n', ("line 2",)),
        ("", ("empty",)),
        ('[{"role": "user", "content": "hi"}]', ("record 0", "no 'messages' or 'traj'")),
        ('[{"messages": [{"role": "robot"}]}]', ("record 0, message 0", "'robot'")),
        ('[{"messages": [{"role": "user", "content": 5}]}]', ("content is a int",)),
        ('[{"messages": [{"role": "assistant", "tool_calls": [{"id": "x"}]}]}]', ("tool call 0",)),
    ],
)
def test_malformed_files_fail_with_one_line(cli, tmp_path, memory_url, content, needles):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    cli.one_line_error(
        cli("import", str(path), "--format", "openai", "--url", memory_url), *needles
    )


def test_format_is_required_and_unknown_formats_are_named(cli, transcripts, memory_url):
    path = transcripts.write("runs.json", [transcripts.record(1)])
    missing = cli("import", str(path), "--url", memory_url)
    assert missing.exit_code == 2
    cli.one_line_error(missing, "--format")
    cli.one_line_error(
        cli("import", str(path), "--format", "csv", "--url", memory_url),
        "unknown import format 'csv'",
        "agui, auto, claude-code, openai, openhands, swe-agent",
    )


def test_registered_format_without_its_module_fails_with_one_line(
    cli, transcripts, memory_url, monkeypatch
):
    # What `--format agui` does until its importer ships: a clear line, no traceback.
    monkeypatch.setitem(IMPORTERS, "ghost", "threadkeep._importers.ghost:import_ghost")
    path = transcripts.write("runs.json", [transcripts.record(1)])
    result = cli("import", str(path), "--format", "ghost", "--url", memory_url)
    cli.one_line_error(result, "'ghost' importer", "not available")


def test_importer_missing_a_dependency_names_it(
    cli, transcripts, memory_url, monkeypatch, tmp_path
):
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "tk_fake_importer.py").write_text("import tk_not_installed_dependency\n")
    monkeypatch.syspath_prepend(str(module_dir))
    monkeypatch.setitem(IMPORTERS, "fake", "tk_fake_importer:import_fake")
    path = transcripts.write("runs.json", [transcripts.record(1)])
    result = cli("import", str(path), "--format", "fake", "--url", memory_url)
    cli.one_line_error(result, "'tk_not_installed_dependency'")


def test_import_json_report_is_machine_readable(cli, transcripts, memory_url):
    path = transcripts.write("runs.json", [transcripts.record(2)])
    report = cli.json("import", str(path), "--format", "openai", "--json", "--url", memory_url)
    assert json.dumps(report)  # plain JSON types only
    assert report["tool_calls_created"] == 2
