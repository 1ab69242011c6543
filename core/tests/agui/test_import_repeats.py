"""``import --format agui``: files that are not text, and runs repeating the chat's history.

- A file that is not UTF-8 text (a binary blob named ``.json``) inside a folder of
  recordings is skipped with a one-line note, as other files that are not AG-UI are; a run
  folder's ``request.json`` or ``response.jsonl`` that is not text is an error naming it.
- ``--thread-scope thread``: a run's request repeats the chat's history (the prompt the
  first run stored). The repeated message is counted already present, and importing a set
  whose every run is stored writes nothing (the chat's proof of another set stays).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from threadkeep import InvalidArgument, Store
from threadkeep._importers.agui import import_agui
from threadkeep.testing import count_store_writes

BINARY = bytes(range(256)) * 4


def run_folder(root: Path, name: str, run: str, answer: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    prompt = {"id": "msg-1", "role": "user", "content": "hi"}
    (folder / "request.json").write_text(
        json.dumps({"threadId": "t", "runId": run, "messages": [prompt]})
    )
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": answer, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": answer, "delta": f"answer {answer}"},
        {"type": "TEXT_MESSAGE_END", "messageId": answer},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": run},
    ]
    (folder / "response.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


async def test_a_binary_json_file_in_a_folder_is_skipped_with_a_note(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = run_folder(tmp_path / "runs", "r1", "r1", "a1")
    (folder / "screenshot.json").write_bytes(BINARY)
    (tmp_path / "runs" / "blob.jsonl").write_bytes(b'{"a": 1}\n' + BINARY)
    with caplog.at_level(logging.WARNING, logger="threadkeep.import"):
        report = await import_agui(store, tmp_path / "runs", user_id="u")
    assert (report.chats_created, report.messages_created) == (1, 2)
    notes = [r.getMessage() for r in caplog.records]
    assert any("screenshot.json: not an AG-UI file (not UTF-8 text)" in n for n in notes), notes
    assert any("blob.jsonl: not an AG-UI file (not UTF-8 text)" in n for n in notes), notes


@pytest.mark.parametrize("name", ["request.json", "response.jsonl"])
async def test_a_run_folders_binary_request_or_response_is_an_error_naming_it(
    store: Store, tmp_path: Path, name: str
) -> None:
    run_folder(tmp_path / "runs", "r1", "r1", "a1")
    bad = run_folder(tmp_path / "runs", "r2", "r2", "a2") / name
    bad.write_bytes(BINARY)
    with count_store_writes(store) as writes, pytest.raises(InvalidArgument) as caught:
        await import_agui(store, tmp_path / "runs", user_id="u")
    assert str(bad) in str(caught.value)
    assert "not UTF-8 text" in str(caught.value)
    assert dict(writes) == {}


async def test_a_repeated_prompt_is_present_and_a_stored_set_writes_nothing(
    store: Store, tmp_path: Path
) -> None:
    both = tmp_path / "both"
    run_folder(both, "r1", "r1", "a1")
    run_folder(both, "r2", "r2", "a2")  # its request repeats msg-1, which r1 stored
    first = await import_agui(store, both, user_id="u", thread_scope="thread")
    assert (first.chats_created, first.messages_created, first.messages_present) == (1, 3, 1)
    chat = await store.find_chat("u", "t")
    assert chat is not None

    subset = tmp_path / "subset"
    run_folder(subset, "r2", "r2", "a2")
    with count_store_writes(store) as writes:
        again = await import_agui(store, subset, user_id="u", thread_scope="thread")
    assert dict(writes) == {}
    assert (again.chats_present, again.messages_created, again.messages_present) == (1, 0, 2)
    after = await store.find_chat("u", "t")
    assert after is not None
    assert (after.revision, after.metadata) == (chat.revision, chat.metadata)

    with count_store_writes(store) as writes:
        whole = await import_agui(store, both, user_id="u", thread_scope="thread")
    assert dict(writes) == {}
    assert (whole.messages_created, whole.messages_present) == (0, 4)
