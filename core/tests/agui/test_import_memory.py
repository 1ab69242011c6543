"""``import --format agui`` holds one write batch of runs, not its input (issue 11, "Speed").

Every layout is streamed (JSON Lines a line at a time, a JSON array an item at a time,
SSE a block at a time), so one file of 800 runs costs what one of 100 does.
The import reads its files in outline first (digests and where each run is), then reads
each run again when it writes it; what it holds at once is one ``load_chats`` batch. So the
peak of Python memory (``tracemalloc``) of an import of eight times as many runs is about
that of the smaller one: a memory bound, not a timing. The batch is made small here
(``WRITE_CHATS``) so that it fills up in the smaller input too. SQLite keeps the stored rows
outside Python's allocator, so they do not count; the in-memory driver would.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

import threadkeep._importers._agui_load as agui_load
from threadkeep import InvalidArgument, open_store
from threadkeep._importers._agui_files import read_recordings, runs_of
from threadkeep._importers.agui import import_agui

SMALL, LARGE = 100, 800
BATCH = 25
"""Chats per ``load_chats`` batch here: the smaller input fills several batches too."""
PADDING = "x" * 30_000  # each answer ~30 KB: a run weighs as in real recordings


def run_events(index: int) -> list[dict[str, object]]:
    thread, run = f"thread-{index}", f"run-{index}"
    message = f"m-{index}"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": f"{index} {PADDING}"},
        {"type": "TEXT_MESSAGE_END", "messageId": message},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]


def one_big_file(root: Path, runs: int) -> Path:
    """One JSON Lines file of ``runs`` runs on their own threads."""
    root.mkdir(parents=True)
    path = root / "events.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for index in range(runs):
            out.writelines(json.dumps(e) + "\n" for e in run_events(index))
    return path


def one_array_file(root: Path, runs: int) -> Path:
    """One JSON array (on one line, as .NET and JS recorders write it) of ``runs`` runs."""
    root.mkdir(parents=True)
    path = root / "events.json"
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for index in range(runs):
            events = run_events(index)
            out.write(("," if index else "") + ",".join(json.dumps(e) for e in events))
        out.write("]")
    return path


def one_sse_file(root: Path, runs: int) -> Path:
    """One server-sent-events file of ``runs`` runs (``id:`` fields and comments too)."""
    root.mkdir(parents=True)
    path = root / "events.sse"
    with path.open("w", encoding="utf-8") as out:
        for index in range(runs):
            out.write(": keep-alive\n\n")
            for number, event in enumerate(run_events(index)):
                out.write(f"id: {index}-{number}\ndata: {json.dumps(event)}\n\n")
    return path


def run_folders(root: Path, runs: int) -> Path:
    """A folder per run: ``request.json`` (the prompt) beside ``response.jsonl``."""
    for index in range(runs):
        folder = root / f"run-{index:05d}"
        folder.mkdir(parents=True)
        prompt = {"id": f"p-{index}", "role": "user", "content": f"prompt {index} {PADDING}"}
        request = {"threadId": "t", "runId": "r", "messages": [prompt]}
        (folder / "request.json").write_text(json.dumps(request))
        events = run_events(index)
        (folder / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return root


async def import_peak(path: Path, database: Path) -> tuple[int, int]:
    """The traced peak (bytes) of importing ``path`` into a new SQLite file, and the messages."""
    async with open_store(f"sqlite+aiosqlite:///{database}") as store:
        tracemalloc.start()
        try:
            report = await import_agui(store, path, user_id="u")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return peak, report.messages_created


@pytest.mark.parametrize(
    ("layout", "per_run"),
    [(one_big_file, 1), (one_array_file, 1), (one_sse_file, 1), (run_folders, 2)],
    ids=["one-file", "one-array", "one-sse", "folders"],
)
async def test_memory_does_not_grow_with_the_number_of_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: Callable[[Path, int], Path],
    per_run: int,
) -> None:
    monkeypatch.setattr(agui_load, "WRITE_CHATS", BATCH)
    await import_peak(layout(tmp_path / "warm", 5), tmp_path / "warm.db")  # imports, caches
    small, small_messages = await import_peak(layout(tmp_path / "s", SMALL), tmp_path / "s.db")
    large, large_messages = await import_peak(layout(tmp_path / "l", LARGE), tmp_path / "l.db")
    assert (small_messages, large_messages) == (SMALL * per_run, LARGE * per_run)
    print(f"peak {small:,} -> {large:,} bytes ({large / small:.2f}x)")
    assert large <= 1.5 * small, (small, large)


async def test_lines_of_hundreds_of_kilobytes_import_whole(tmp_path: Path) -> None:
    """A tool result or answer of 300 KB on one line, among ordinary lines, BOM and CRLF."""
    big = "y" * 300_000
    events = run_events(0)
    events[2] = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m-0", "delta": big}
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(e) + "\r\n" for e in events).encode())
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 'big.db'}") as store:
        report = await import_agui(store, path, user_id="u")
        again = await import_agui(store, path, user_id="u")
        chat = await store.find_chat("u", "agui:big.jsonl:thread-0")
        assert chat is not None
        (message,) = (await store.list_messages(chat.chat_id)).items
    assert (report.messages_created, again.messages_present) == (1, 1)
    assert message.content == big


def test_a_file_changed_between_the_two_reads_is_refused(tmp_path: Path) -> None:
    path = one_big_file(tmp_path / "rec", 2)
    runs = runs_of(read_recordings(path))
    assert [len(run.events()) for run in runs] == [5, 5]
    path.write_text(path.read_text() + json.dumps(run_events(9)[0]) + "\n")
    with pytest.raises(InvalidArgument, match="changed during the import"):
        runs[1].events()
