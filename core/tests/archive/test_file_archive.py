"""The archive contract on ``file://``, and the archiving lifecycle on memory + file."""

from __future__ import annotations

import errno
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from threadkeep import (
    ArchiveError,
    Archiver,
    BackendUnavailable,
    Conflict,
    FileArchive,
    InvalidArgument,
    Store,
    open_archiver,
)
from threadkeep_contract_tests import ArchiveLifecycleContract, ArchiveStoreContract


class TestFileArchive(ArchiveStoreContract):
    """``FileArchive`` passes the archive section of the contract."""


class TestMemoryWithFileArchive(ArchiveLifecycleContract):
    """The memory driver archiving into a local directory."""


def test_file_urls_are_checked() -> None:
    with pytest.raises(InvalidArgument):
        FileArchive("file://host/path")
    with pytest.raises(InvalidArgument):
        FileArchive("s3://bucket")


async def test_objects_survive_reopen_and_leave_no_temporaries(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"

    async def body():  # type: ignore[no-untyped-def]
        yield b"x" * 10

    async with FileArchive(url) as archive:
        await archive.put("a/2026/01/x.tkb", body(), metadata={"sha256": "1" * 64})
    async with FileArchive(url) as archive:
        head = await archive.head("a/2026/01/x.tkb")
        assert head is not None
        assert head.size == 10
    assert _files(tmp_path) == ["x.tkb"]


def _files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file())


async def _body():  # type: ignore[no-untyped-def]
    yield b"hello"


async def _read(archive: FileArchive, key: str) -> bytes:
    return b"".join([chunk async for chunk in archive.get(key)])


async def test_get_maps_every_os_error_into_the_tree(tmp_path: Path, monkeypatch) -> None:
    key = "a/2026/01/x.tkb"
    async with FileArchive(f"file://{tmp_path}") as archive:
        await archive.put(key, _body(), metadata={})
        assert await _read(archive, key) == b"hello"
        with pytest.raises(ArchiveError, match="no archive object"):
            await _read(archive, "a/2026/01/missing.tkb")

        # A directory where the object was: ArchiveError, not a raw IsADirectoryError.
        (tmp_path / key).unlink()
        (tmp_path / key).mkdir()
        with pytest.raises(ArchiveError, match="Is a directory"):
            await _read(archive, key)
        (tmp_path / key).rmdir()
        await archive.put(key, _body(), metadata={})

        def failing(error: OSError):  # type: ignore[no-untyped-def]
            def open_(self: Path, *args, **kwargs):  # type: ignore[no-untyped-def]
                raise error

            return open_

        monkeypatch.setattr(Path, "open", failing(PermissionError(errno.EACCES, "denied")))
        with pytest.raises(ArchiveError, match="denied"):
            await _read(archive, key)
        monkeypatch.setattr(Path, "open", failing(OSError(errno.EIO, "I/O error")))
        with pytest.raises(BackendUnavailable, match="I/O error"):
            await _read(archive, key)


async def test_a_root_that_is_a_file_is_an_archive_error(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    with pytest.raises(ArchiveError, match="is a file, not a directory") as caught:
        await FileArchive(f"file://{a_file}").open()
    assert not isinstance(caught.value, Conflict)
    with pytest.raises(ArchiveError, match="is below a file, not a directory"):
        await FileArchive(f"file://{a_file}/inside").open()


@pytest.mark.parametrize(
    "arguments",
    [
        {"older_than": 30},
        {"older_than": "30d"},
        {"older_than": None},
        {"older_than": timedelta(days=-1)},
        {"older_than": timedelta(days=999999)},
        {"older_than": timedelta(0), "limit": 0},
        {"older_than": timedelta(0), "limit": "1"},
    ],
    ids=repr,
)
async def test_archive_idle_arguments_are_checked(
    store: Store, archive: FileArchive, arguments: dict[str, Any]
) -> None:
    """Bad ``older_than``/``limit`` raise ``InvalidArgument`` (no TypeError/OverflowError)."""
    chat = await store.create_chat("u-idle", "t-idle")
    archiver = Archiver(store, archive)
    with pytest.raises(InvalidArgument):
        await archiver.archive_idle(**arguments)
    with pytest.raises(InvalidArgument):
        await archiver.count_idle(arguments["older_than"] if "limit" not in arguments else -1)
    assert (await store.get_chat(chat.chat_id)).status == "active"


@pytest.mark.parametrize("url", [5, b"file:///tmp/x", ["file:///tmp/x"]], ids=repr)
async def test_open_archiver_refuses_a_url_that_is_not_text(store: Store, url: object) -> None:
    """``open_archiver`` raises ``InvalidArgument`` for a non-``str`` URL (no AttributeError)."""
    with pytest.raises(InvalidArgument, match="archive_url must be a str"):
        async with open_archiver(store, url):  # type: ignore[arg-type]
            pass
