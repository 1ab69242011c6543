"""``--format auto``: each format is told apart by its content; nothing matching is an error."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from threadkeep import InvalidArgument
from threadkeep._importers.auto import detect_format, import_auto

FIXTURES = Path(__file__).parent / "fixtures"
USER = "u"
AGUI_EVENTS = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hello"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claude-code/proj/s1.jsonl", "claude-code"),
        ("claude-code/proj/s1/subagents/agent-ab12.jsonl", "claude-code"),
        ("openai/legacy.json", "openai"),
        ("openai/responses.jsonl", "openai"),
        ("swe-agent/old.traj", "swe-agent"),
        ("openhands/events.json", "openhands"),
    ],
)
def test_fixtures_are_detected(name, expected):
    assert detect_format(FIXTURES / name) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n".join(json.dumps(e) for e in AGUI_EVENTS), "agui"),
        ('data: {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}\n\n', "agui"),
        (json.dumps({"threadId": "t", "runId": "r", "messages": [], "tools": []}), "agui"),
        (json.dumps({"stream-a": AGUI_EVENTS}), "agui"),
        (json.dumps([{"messages": [{"role": "user", "content": "hi"}]}]), "openai"),
        (json.dumps([[{"role": "user", "content": "hi"}]]), "openai"),
        (json.dumps({"traj": []}), "openai"),
        (json.dumps({"history": [{"role": "system", "content": "x"}]}), "swe-agent"),
        (
            json.dumps({"instance_id": "i", "history": [{"id": 0, "action": "message"}]}),
            "openhands",
        ),
        (json.dumps({"type": "summary", "summary": "s", "leafUuid": "u"}), "claude-code"),
        (json.dumps({"history": [[{"id": 1, "action": "run"}, {"id": 2}]]}), "openhands"),
        (json.dumps({"hello": "world"}), None),
        ("just text", None),
        ("", None),
    ],
)
def test_shapes_are_detected(tmp_path, text, expected):
    path = tmp_path / "file.txt"
    path.write_text(text, encoding="utf-8")
    assert detect_format(path) == expected


async def test_a_file_matching_nothing_is_a_clear_error(store, tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}', encoding="utf-8")
    with pytest.raises(InvalidArgument) as caught:
        await import_auto(store, path, user_id=USER)
    text = str(caught.value)
    assert "notes.json: cannot tell its format" in text
    assert "--format (agui, claude-code, openai, openhands, swe-agent)" in text


async def test_a_mixed_folder_imports_each_file_as_its_format(store, reader, tmp_path, caplog):
    folder = tmp_path / "mixed"
    for name in ("claude-code/proj", "openai/legacy.json", "openhands/events.json"):
        source = FIXTURES / name
        target = folder / source.name
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    (folder / "run.traj").write_bytes((FIXTURES / "swe-agent/old.traj").read_bytes())
    (folder / "README.txt").write_text("not a transcript", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="threadkeep.import"):
        report = await import_auto(store, folder, user_id=USER)
    assert report.chats_created == 6
    assert await reader.threads(store, USER) == [
        "claude-code:s1",
        "claude-code:s1#branch-a4",
        "claude-code:s1/agent-ab12",  # read with its session, not as a file of its own
        "openai:legacy.json:id=legacy-1",
        "openhands:events.json",
        "swe-agent:run.traj",
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "README.txt: not a known transcript format; skipped"
    ]
    again = await import_auto(store, folder, user_id=USER)
    assert (again.chats_created, again.messages_created) == (0, 0)


async def test_a_folder_of_one_format_is_imported_as_that_format(store, reader, fixture_copy):
    await import_auto(store, fixture_copy("swe-agent"), user_id=USER)
    # The same keys as --format swe-agent on the folder: paths inside it.
    assert await reader.threads(store, USER) == [
        "swe-agent:old.traj",
        "swe-agent:run1/inst-1/inst-1.traj",
    ]


async def test_a_folder_with_nothing_known_is_an_error(store, tmp_path):
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="holds no file of a known format"):
        await import_auto(store, tmp_path, user_id=USER)


def test_a_one_line_document_is_told_by_its_first_item_only(tmp_path: Path) -> None:
    """The sample is read an item at a time: what follows the first item is not read whole."""
    event = json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    path = tmp_path / "events.json"
    path.write_text("[" + event + ", " + '"' + "x" * (2 << 20))  # an unterminated 2 MB string
    assert detect_format(path) == "agui"
    streams = tmp_path / "streams.json"
    streams.write_text(
        json.dumps({"a": [json.loads(event)] * 3, "b": [json.loads(event)]}, indent=1)
    )
    assert detect_format(streams) == "agui"
