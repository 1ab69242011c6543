"""The archive contract and the archiving lifecycle on S3, plus error mapping."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from threadkeep import (
    ArchiveError,
    ArchiveRef,
    BackendUnavailable,
    InvalidArgument,
    open_archiver,
    open_store,
)
from threadkeep_contract_tests import ArchiveLifecycleContract, ArchiveStoreContract
from threadkeep_s3 import PART_SIZE, S3Archive


class TestS3Archive(ArchiveStoreContract):
    """``S3Archive`` passes the archive section of the contract (multipart included)."""

    large_body_bytes = 2 * PART_SIZE + (1 << 20)


class TestMemoryWithS3Archive(ArchiveLifecycleContract):
    """The memory driver archiving into S3."""


async def _body() -> AsyncIterator[bytes]:
    yield b"x"


async def test_urls_are_checked() -> None:
    with pytest.raises(InvalidArgument):
        S3Archive("s3://")
    with pytest.raises(InvalidArgument):
        S3Archive("s3://bucket", part_size=1024)


async def test_missing_bucket_is_an_archive_error(s3_url: str) -> None:
    with pytest.raises(ArchiveError, match="bucket does not exist"):
        await S3Archive("s3://threadkeep-no-such-bucket-x/p").open()


async def test_bad_credentials_are_an_archive_error(
    s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
    with pytest.raises(ArchiveError, match="refused"):
        async with S3Archive(s3_url) as archive:  # the bucket may be known: open may pass
            await archive.head("_/2026/01/x.tkb")


async def test_unreachable_endpoint_is_backend_unavailable(
    s3_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiobotocore.config import AioConfig

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    config = AioConfig(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1)
    with pytest.raises(BackendUnavailable):
        await S3Archive(s3_url, config=config).open()


async def test_large_chat_uses_multipart_and_reads_back(s3_url: str) -> None:
    """A bundle over one part is hashed, then uploaded in parts, then verified."""
    import os

    async with open_store("memory://") as store:
        chat = await store.create_chat("u", "big")
        for _ in range(6):
            await store.append_messages(
                chat.chat_id,
                [{"role": "user", "content": os.urandom(3000).hex()} for _ in range(500)],
            )
        async with open_archiver(store, s3_url, single_put_bytes=1 << 20) as archiver:
            result = await archiver.archive_chat(chat.chat_id)
            assert result.size > PART_SIZE
            head = await archiver.archive.head(ArchiveRef.parse(result.archive_ref).key)
            assert head is not None
            assert head.etag.rstrip('"').endswith("-2")  # two parts
            page = await store.list_messages(chat.chat_id, limit=200)
            assert len(page.items) == 200
            await store.erase_user("u")
            assert [i async for i in archiver.archive.list()] == []
