"""SQLite storage that goes wrong under an open store: deleted, replaced, full, read-only, damaged.

Each fault is made for real (the file unlinked or renamed over, ``max_page_count`` making
``SQLITE_FULL``, a file the process may not write, pages overwritten) and must give a typed
error whose message fits the fault, with nothing lost, half-written or written where nobody
can read it again (``docs/reliability.md``, "Storage faults").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadkeep import (
    BackendUnavailable,
    Message,
    Step,
    StorageDamaged,
    StorageFull,
    StorageReadOnly,
)
from threadkeep_sql import SqlStore
from threadkeep_sql import _engine as engine_module


def _url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def _contents(store: Any, chat_id: Any) -> list[str]:
    return [m.content for m in (await store.list_messages(chat_id, limit=200)).items]


def _writes(store: Any, chat_id: Any) -> dict[str, Any]:
    """One call of every kind of write: the one-hop paths and the SQLAlchemy transactions."""
    return {
        "append": lambda: store.append_message(chat_id, Message(role="user", content="late")),
        "batch": lambda: store.append_messages(
            chat_id, [Message(role="user", content=f"late {i}") for i in range(3)]
        ),
        "create_chat": lambda: store.create_chat("u", "another"),
        "update_chat": lambda: store.update_chat(chat_id, name="renamed"),
        "save_steps": lambda: store.save_steps(
            [Step(chat_id=chat_id, run_id="r", stack_id="s", type="llm")]
        ),
        "delete_chat": lambda: store.delete_chat(chat_id),
    }


async def test_a_deleted_file_refuses_writes_and_is_never_recreated(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqlStore(_url(path)) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="kept"))
        path.unlink()
        for name, write in _writes(store, chat.chat_id).items():
            with pytest.raises(BackendUnavailable, match="was deleted or moved away") as info:
                await write()
            assert str(path) in str(info.value), name
        assert not path.exists()
        # Reads on a connection to the file the store opened still see what it stored;
        # a new connection is refused (never a new empty database: "no such table").
        held = len(store.driver.db._lite_held)
        found = await asyncio.gather(
            *(_contents(store, chat.chat_id) for _ in range(held + 3)), return_exceptions=True
        )
        refused = [item for item in found if isinstance(item, BaseException)]
        assert refused, "no read took a new connection"
        for item in refused:
            assert isinstance(item, BackendUnavailable), repr(item)
            assert "deleted or moved away" in str(item)
        assert [item for item in found if not isinstance(item, BaseException)] == [["kept"]] * (
            len(found) - len(refused)
        )
        assert not path.exists()


async def test_a_file_replaced_under_the_store_is_not_written_or_read(tmp_path: Path) -> None:
    path, other = tmp_path / "store.db", tmp_path / "other.db"
    async with SqlStore(_url(other)) as elsewhere:
        await elsewhere.create_chat("someone", "else")
    async with SqlStore(_url(path)) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="kept"))
        os.replace(other, path)  # e.g. a backup restored by `mv` while the app runs
        for write in _writes(store, chat.chat_id).values():
            with pytest.raises(BackendUnavailable, match="replaced by another file"):
                await write()
        # Reads never mix in the other file: a held connection reads the store's own
        # file, a new connection to the path is refused.
        found = await asyncio.gather(
            *(store.list_chats() for _ in range(len(store.driver.db._lite_held) + 3)),
            return_exceptions=True,
        )
        for item in found:
            if isinstance(item, BaseException):
                assert isinstance(item, BackendUnavailable), repr(item)
            else:
                assert [c.thread_id for c in item.items] == ["t"]
    async with SqlStore(_url(path)) as reopened:  # reopened: the file now at the path
        assert "else" in [c.thread_id for c in (await reopened.list_chats()).items]


@pytest.mark.parametrize("write", ["append", "batch", "create_chat"])
async def test_a_refused_write_after_a_move_still_leaves_the_moved_file_whole(
    tmp_path: Path, write: str
) -> None:
    """Move the file away, one write refused, close: the moved file holds every message.

    The refused write gives its connection back to the pool, not to the store's held
    ones; close must still checkpoint the old file's WAL through that connection, or the
    moved file lacks what the WAL held and the WAL left at the old path is applied to
    the next file put there (a backup restored with ``mv`` read back as the old store).
    """
    path, moved, backup = tmp_path / "store.db", tmp_path / "moved.db", tmp_path / "backup.db"
    async with SqlStore(_url(backup)) as other:
        await other.create_chat("u", "backup-chat")
    async with SqlStore(_url(path)) as store:
        chat = await store.create_chat("u", "live-chat")
        for i in range(3):
            await store.append_message(chat.chat_id, Message(role="user", content=f"live {i}"))
        os.rename(path, moved)
        with pytest.raises(BackendUnavailable, match="deleted or moved away"):
            await _writes(store, chat.chat_id)[write]()
    wal = tmp_path / "store.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    async with SqlStore(_url(moved)) as reopened:
        found = await reopened.find_chat("u", "live-chat")
        assert found is not None
        assert await _contents(reopened, found.chat_id) == ["live 0", "live 1", "live 2"]
    os.rename(backup, path)
    async with SqlStore(_url(path)) as restored:
        assert [c.thread_id for c in (await restored.list_chats()).items] == ["backup-chat"]


def _limit_pages(monkeypatch: pytest.MonkeyPatch, pages: int) -> None:
    """Every connection the store makes from now on has ``PRAGMA max_page_count = pages``."""
    connect = engine_module._sqlite_connect

    def limited(dbapi_connection: Any, record: Any) -> None:
        connect(dbapi_connection, record)
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA max_page_count = {pages}")
        cursor.close()

    monkeypatch.setattr(engine_module, "_sqlite_connect", limited)


async def test_a_full_disk_is_storage_full_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _limit_pages(monkeypatch, 80)  # SQLITE_FULL for real, at 80 pages of 4 KiB
    async with SqlStore(_url(tmp_path / "store.db")) as store:
        chat = await store.create_chat("u", "t")
        stored, failure = 0, None
        for _ in range(1000):
            batch = [Message(role="user", content=f"{stored + i} " + "x" * 3000) for i in range(4)]
            try:
                await store.append_messages(chat.chat_id, batch)
            except StorageFull as exc:
                failure = exc
                break
            stored += len(batch)
        assert failure is not None, "the disk never filled"
        assert re.search(r"full.*free space", str(failure)), failure
        assert "check that it is running" not in str(failure)
        assert isinstance(failure, BackendUnavailable)
        # The batch that met the full disk is absent, whole; the ones before are intact.
        contents = await _contents(store, chat.chat_id)
        assert [int(text.split()[0]) for text in contents] == list(range(stored))
        with pytest.raises(StorageFull):
            await store.update_chat(chat.chat_id, metadata={"big": "y" * 400_000})
        assert (await store.get_chat(chat.chat_id)).metadata == {}


@contextlib.contextmanager
def _unwritable(path: Path) -> Iterator[None]:
    """Make ``path`` unwritable for this process for real: chmod, or as root ``chattr +i``."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        undo = ["chmod", "644", str(path)]
    else:  # root writes through file modes: the immutable flag stops it
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if made.returncode != 0:
            pytest.skip(f"cannot make a file unwritable as root here: {made.stderr!r}")
        undo = ["chattr", "-i", str(path)]
    try:
        with pytest.raises(PermissionError):
            path.open("ab").close()
        yield
    finally:
        subprocess.run(undo, check=True)


async def test_a_read_only_file_opens_for_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqlStore(_url(path)) as store:
        chat = await store.create_chat("u", "t")
        await store.append_message(chat.chat_id, Message(role="user", content="kept"))
    with _unwritable(path):
        async with SqlStore(_url(path)) as store:
            assert await _contents(store, chat.chat_id) == ["kept"]
            for write in _writes(store, chat.chat_id).values():
                with pytest.raises(StorageReadOnly, match="write permission") as info:
                    await write()
                assert "check that it is running" not in str(info.value)
            assert await _contents(store, chat.chat_id) == ["kept"]


async def test_a_file_with_overwritten_pages_is_storage_damaged(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with SqlStore(_url(path)) as store:
        chat = await store.create_chat("u", "t")
        for i in range(40):
            batch = [Message(role="user", content=f"{i} " + "y" * 1000) for _ in range(5)]
            await store.append_messages(chat.chat_id, batch)
    page = 4096
    with path.open("r+b") as file:  # every page but the header page and the schema's
        size = file.seek(0, os.SEEK_END)
        for number in range(2, size // page):
            file.seek(number * page)
            file.write(b"\xa5" * page)
    with pytest.raises(StorageDamaged, match=r"damaged.*\.recover") as info:
        async with SqlStore(_url(path)) as store:
            await _contents(store, chat.chat_id)
    assert "check that it is running" not in str(info.value)
    assert isinstance(info.value, BackendUnavailable)
