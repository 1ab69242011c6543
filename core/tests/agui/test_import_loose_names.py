"""Loose recordings of the same file name in different folders are different chats (issue 11).

With ``thread_scope="recording"`` a loose file is keyed by its path under ``PATH``
(``agui:a/run.jsonl:<thread>``); a file directly under ``PATH`` keeps the key it had
before (its file name). Imports before session 25 keyed ``a/run.jsonl`` and
``b/run.jsonl`` alike, by the file name alone: a re-import of such an import finds that
chat and writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from threadkeep import Store
from threadkeep._importers import _agui_files
from threadkeep._importers._agui_bulk import CHAT_PROOF
from threadkeep._importers.agui import import_agui


def run(run_id: str, text: str) -> str:
    events = [
        {"type": "RUN_STARTED", "threadId": "T", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
        {"type": "RUN_FINISHED", "threadId": "T", "runId": run_id},
    ]
    return "".join(json.dumps(e) + "\n" for e in events)


def tree(root: Path) -> Path:
    """``run.jsonl`` at the top and in two folders, one thread id; a turn file in ``c/``."""
    for folder, run_id in (("", "top"), ("a", "ra"), ("b", "rb")):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "run.jsonl").write_text(run(run_id, f"answer {run_id}"))
    (root / "c").mkdir()
    (root / "c" / "X#Turn_01.06.Response.Server.json").write_text(run("rc", "turn"))
    return root


async def keys(store: Store) -> dict[str, int]:
    chats = (await store.list_chats({"user_id": "u"}, limit=50)).items
    found: dict[str, int] = {}
    for chat in chats:
        found[chat.thread_id] = len((await store.list_messages(chat.chat_id)).items)
    return found


async def test_same_file_names_in_different_folders_are_different_chats(
    store: Store, tmp_path: Path
) -> None:
    root = tree(tmp_path / "in")
    report = await import_agui(store, root, user_id="u")
    assert report.chats_created == 4
    assert await keys(store) == {
        "agui:run.jsonl:T": 1,  # directly under PATH: the key it always had
        "agui:a/run.jsonl:T": 1,
        "agui:b/run.jsonl:T": 1,
        "agui:c/X:T": 1,  # the turn suffix cut as before, the folder before it
    }
    again = await import_agui(store, root, user_id="u")
    assert (again.messages_created, again.messages_present, again.chats_present) == (0, 4, 4)
    # A file added later to a folder gets its own chat, not the top-level one's.
    (root / "d").mkdir()
    (root / "d" / "run.jsonl").write_text(run("rd", "late"))
    later = await import_agui(store, root, user_id="u")
    assert (later.chats_created, later.messages_created) == (1, 1)
    assert (await keys(store))["agui:d/run.jsonl:T"] == 1


def _old_names(path: Path, root: Path) -> tuple[str, str, str]:
    """How imports before session 25 named a loose file: by its file name alone."""
    name, label, legacy = _NAMES(path, root)
    pair = _agui_files._pair_of(path)
    if pair is not None and pair[0][1] == _agui_files._FOLDER:
        return name, label, legacy
    return legacy, path.name, legacy


_NAMES = _agui_files._names


async def test_a_re_import_of_an_older_import_of_a_nested_tree_writes_nothing(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "in")
    with monkeypatch.context() as old:  # the older import: one chat for the three run.jsonl
        old.setattr(_agui_files, "_names", _old_names)
        first = await import_agui(store, root, user_id="u")
    for chat in (await store.list_chats({"user_id": "u"})).items:  # its proof, as it wrote it
        proof = {k: v for k, v in chat.metadata[CHAT_PROOF].items() if k != "names"}
        await store.update_chat(chat.chat_id, metadata={**chat.metadata, CHAT_PROOF: proof})
    assert await keys(store) == {"agui:run.jsonl:T": 3, "agui:X:T": 1}
    again = await import_agui(store, root, user_id="u")
    assert (again.messages_created, again.chats_created) == (0, 0)
    assert again.messages_present == first.messages_created == 4
    assert await keys(store) == {"agui:run.jsonl:T": 3, "agui:X:T": 1}
    # A recording changed since goes into the chat it was imported into, as a new run.
    (root / "a" / "run.jsonl").write_text(run("ra", "answer ra, edited"))
    changed = await import_agui(store, root, user_id="u")
    assert (changed.chats_created, changed.messages_created) == (0, 1)
    assert await keys(store) == {"agui:run.jsonl:T": 4, "agui:X:T": 1}
    # And stays there: the chat keeps its older key, so the next re-import of the unchanged
    # tree writes nothing (it split the chat's recordings into three new chats, copying them).
    settled = await import_agui(store, root, user_id="u")
    assert (settled.chats_created, settled.messages_created) == (0, 0)
    assert await keys(store) == {"agui:run.jsonl:T": 4, "agui:X:T": 1}
