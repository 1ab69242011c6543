"""The archive contract on ``file://``, and the archiving lifecycle on memory + file."""

from __future__ import annotations

from pathlib import Path

import pytest

from threadkeep import FileArchive, InvalidArgument
from threadkeep.testing_archive import ArchiveStoreContract
from threadkeep.testing_archive_lifecycle import ArchiveLifecycleContract


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
