"""One recording as JSON Lines, a JSON array, SSE or named streams stores the same chats.

The JSON document and SSE layouts are streamed (an item, a block at a time) since session
25; these tests pin that the streamed reading means what the whole-text reading meant: the
same chats and records, the same run split, surrogates and numbers as ``json.loads`` reads
them, and a malformed document refused naming the file and where.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from threadkeep import InvalidArgument, Store
from threadkeep._importers import _jsonstream
from threadkeep._importers.agui import import_agui

LONE = "\ud800"  # a lone surrogate escape: json.loads keeps it, yajl would refuse it


def recording() -> list[dict[str, Any]]:
    """Two runs of one thread: text with surrogates, a tool call and its result, an error."""
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "smile \U0001f600 é"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": f" lone {LONE} end"},
        {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "add"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"n": 123456789012345678901}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "x1", "content": "3"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r1"},
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r2"},
        {"type": "TEXT_MESSAGE_START", "messageId": "a2", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a2", "delta": "half"},
        {"type": "RUN_ERROR", "message": "boom", "code": "E1"},
    ]


def as_lines(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def as_array(events: list[dict[str, Any]]) -> str:
    return json.dumps(events)


def as_pretty_array(events: list[dict[str, Any]]) -> str:
    text = json.dumps(events, indent=2, ensure_ascii=False)  # raw non-ASCII, the lone escaped
    return "\ufeff" + text.replace(LONE, "\\ud800")


def as_sse(events: list[dict[str, Any]]) -> str:
    blocks = [": a comment\nretry: 1000\n"]
    for number, event in enumerate(events):
        text = json.dumps(event, indent=1)  # multi-line data: one data line per JSON line
        data = "".join(f"data: {line}\n" for line in text.split("\n"))
        blocks.append(f"event: {event['type']}\nid: {number}\n{data}")
    return "\r\n".join(blocks).replace("\n", "\r\n") + "\r\ndata: [DONE]\r\n\r\n"


async def stored(store: Store, key: str) -> list[tuple[Any, ...]]:
    chat = await store.find_chat("u", key)
    assert chat is not None, key
    messages = (await store.list_messages(chat.chat_id, limit=100)).items
    rows: list[tuple[Any, ...]] = [
        (
            m.role.value,
            m.content,
            m.agui_id,
            m.run_id,
            m.status.value,
            m.tool_call_ref,
            [(c.agui_id, c.name, c.arguments) for c in m.tool_calls],
        )
        for m in messages
    ]
    for run_id in ("r1", "r2"):
        run = await store.get_run(chat.chat_id, run_id)
        rows.append((run_id, run.status.value))
    return rows


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("events.json", as_array),
        ("pretty.json", as_pretty_array),
        ("events.sse", as_sse),
    ],
)
async def test_every_layout_stores_what_json_lines_stores(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, write: Any
) -> None:
    monkeypatch.setattr(_jsonstream, "_CHUNK", 5)  # every item is cut between reads
    events = recording()
    (tmp_path / "lines").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "lines" / "events.jsonl").write_text(as_lines(events), encoding="utf-8")
    (tmp_path / "other" / name).write_bytes(write(events).encode("utf-8", "surrogatepass"))
    lines = await import_agui(store, tmp_path / "lines", user_id="u")
    other = await import_agui(store, tmp_path / "other", user_id="u")
    assert (other.messages_created, other.tool_calls_created) == (
        lines.messages_created,
        lines.tool_calls_created,
    )
    expected = await stored(store, "agui:events.jsonl:t")
    call = ("c1", "add", '{"n": 123456789012345678901}')
    assert expected == [  # the lone surrogate is stored as U+FFFD (test_surrogates.py)
        ("assistant", "smile \U0001f600 é lone \ufffd end", "a1", "r1", "complete", None, [call]),
        ("tool", "3", "x1", "r1", "complete", "c1", []),
        ("assistant", "half", "a2", "r2", "errored", None, []),
        ("r1", "complete"),
        ("r2", "errored"),
    ]
    assert await stored(store, f"agui:{name}:t") == expected
    again = await import_agui(store, tmp_path / "other", user_id="u")
    assert (again.messages_created, again.messages_present) == (0, other.messages_created)


async def test_named_streams_are_read_a_stream_at_a_time(store: Store, tmp_path: Path) -> None:
    events = recording()
    path = tmp_path / "streams.json"
    path.write_text(json.dumps({"first": events[:10], "second": events[10:]}), encoding="utf-8")
    report = await import_agui(store, path, user_id="u")
    assert report.chats_created == 2
    first = await store.find_chat("u", "agui:streams.json#first:t")
    second = await store.find_chat("u", "agui:streams.json#second:t")
    assert first is not None
    assert second is not None
    assert [m.agui_id for m in (await store.list_messages(second.chat_id)).items] == ["a2"]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (  # one line: the byte offset and the item index locate the error
            '[{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "RAW" "x"}]',
            r"Expecting ',' delimiter at line 1 column 73 \(byte 72, item 1\)",
        ),
        (  # pretty-printed: the line says where
            '[\n {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},\n {"type": "RAW"},\n]',
            r"Expecting value at line 4 column 1 \(byte 77, item 2\)",
        ),
        (  # cut short
            '[{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}, {"type": "RUN_FI',
            r"Unterminated string starting at line 1 column 67 \(byte 66, item 1\)",
        ),
    ],
)
async def test_a_malformed_document_of_events_is_refused_naming_where(
    store: Store, tmp_path: Path, text: str, where: str
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ok.jsonl").write_text(as_lines(recording()))
    (folder / "bad.json").write_text(text)
    with pytest.raises(InvalidArgument, match=rf"bad\.json: {where}; the file is not valid JSON"):
        await import_agui(store, folder, user_id="u")
    assert (await store.list_chats({"user_id": "u"})).items == []


async def test_an_sse_line_that_is_not_utf8_is_refused_naming_it(
    store: Store, tmp_path: Path
) -> None:
    path = tmp_path / "bad.sse"
    good = as_sse(recording()[:3]).encode()
    path.write_bytes(good + b'data: {"type": "RAW", "event": "\xff"}\r\n\r\n')
    with pytest.raises(InvalidArgument, match=r"bad\.sse: line \d+ is not UTF-8 text"):
        await import_agui(store, path, user_id="u")
