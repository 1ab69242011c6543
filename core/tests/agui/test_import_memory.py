"""``import --format agui`` holds one write batch of runs, not its input (issue 11, "Speed").

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
from threadkeep import open_store
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
    ("layout", "per_run"), [(one_big_file, 1), (run_folders, 2)], ids=["one-file", "folders"]
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
