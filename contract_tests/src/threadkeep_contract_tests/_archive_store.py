"""The archive section of the contract: rules every archive driver must show.

:class:`ArchiveStoreContract` checks an :class:`threadkeep.typing.ArchiveStore` driver (put /
get / head / delete / list, create-only and ``if_match`` puts) through the ``archive``
fixture that :class:`ArchiveFixtures` builds from the driver's ``archive_factory``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from threadkeep import ArchiveError, ArchiveRef, Conflict, InvalidArgument, ObjectInfo
from threadkeep.testing_archive import list_keys, read_object
from threadkeep.typing import ArchiveStore

from ._archive_base import ArchiveFixtures

__all__ = ["ArchiveStoreContract"]


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        await asyncio.sleep(0)
        yield part


async def _broken(first: bytes) -> AsyncIterator[bytes]:
    yield first
    raise RuntimeError("the producer failed midway")


_KEY = "acme/2026/01/00000000-0000-0000-0000-000000000001.tkb"
_META = {"sha256": "0" * 64, "format": "1", "messages": "3"}


class ArchiveStoreContract(ArchiveFixtures):
    """The archive section of the contract: rules every archive driver must show.

    Subclass it and provide a fixture ``archive_factory`` (see :class:`ArchiveFixtures`)
    building unopened archive stores on one empty root. ``large_body_bytes`` sets the size
    used to cross multipart thresholds.
    """

    large_body_bytes: ClassVar[int] = 13 << 20

    async def test_satisfies_protocol(self, archive: Any) -> None:
        """The driver is an ``ArchiveStore`` and serves its URL's scheme."""
        assert isinstance(archive, ArchiveStore)
        assert archive.url.partition("://")[0] in archive.schemes

    async def test_put_head_get_round_trip(self, archive: Any) -> None:
        """A put stores the concatenated chunks with their metadata, read back exactly."""
        body = [b"\x1f\x8b", bytes(range(256)) * 10, b"", b"tail\x00"]
        info = await archive.put(_KEY, _chunks(*body), metadata=_META)
        assert info.key == _KEY
        assert info.size == sum(map(len, body))
        head = await archive.head(_KEY)
        assert head is not None
        assert (head.size, head.etag, head.metadata) == (info.size, info.etag, _META)
        assert await read_object(archive, _KEY) == b"".join(body)

    async def test_put_is_create_only(self, archive: Any) -> None:
        """A second put at the key raises ``Conflict`` and leaves the first object."""
        await archive.put(_KEY, _chunks(b"first"), metadata=_META)
        with pytest.raises(Conflict):
            await archive.put(_KEY, _chunks(b"second"), metadata={"sha256": "1" * 64})
        assert await read_object(archive, _KEY) == b"first"
        head = await archive.head(_KEY)
        assert head is not None
        assert head.metadata == _META

    async def test_concurrent_create_only_puts_one_wins(self, archive: Any) -> None:
        """Of racing create-only puts exactly one succeeds; the object is the winner's."""
        bodies = [f"writer-{i}".encode() * 1000 for i in range(6)]
        results = await asyncio.gather(
            *(archive.put(_KEY, _chunks(b), metadata=_META) for b in bodies),
            return_exceptions=True,
        )
        winners = [i for i, r in enumerate(results) if isinstance(r, ObjectInfo)]
        assert len(winners) == 1, results
        assert all(isinstance(r, Conflict) for r in results if not isinstance(r, ObjectInfo))
        assert await read_object(archive, _KEY) == bodies[winners[0]]

    async def test_if_match_replaces_only_that_etag(self, archive: Any) -> None:
        """``if_match`` replaces the object with that etag; a stale etag is a ``Conflict``."""
        first = await archive.put(_KEY, _chunks(b"v1"), metadata=_META)
        second = await archive.put(_KEY, _chunks(b"v2"), metadata=_META, if_match=first.etag)
        assert second.etag != first.etag
        assert await read_object(archive, _KEY) == b"v2"
        with pytest.raises(Conflict):
            await archive.put(_KEY, _chunks(b"v3"), metadata=_META, if_match=first.etag)
        assert await read_object(archive, _KEY) == b"v2"

    async def test_if_match_on_missing_object_conflicts(self, archive: Any) -> None:
        """``if_match`` never creates an object."""
        with pytest.raises(Conflict):
            await archive.put(_KEY, _chunks(b"x"), metadata=_META, if_match='"nope"')
        assert await archive.head(_KEY) is None

    async def test_large_streamed_body(self, archive: Any) -> None:
        """A body larger than one part streams in and out intact (multipart on S3)."""
        block = os.urandom(1 << 20)
        count = self.large_body_bytes // len(block)
        digest = hashlib.sha256(block * count).hexdigest()
        info = await archive.put(_KEY, _chunks(*([block] * count)), metadata=_META)
        assert info.size == len(block) * count
        seen = hashlib.sha256()
        async for chunk in archive.get(_KEY):
            seen.update(chunk)
        assert seen.hexdigest() == digest

    async def test_failed_put_leaves_nothing(self, archive: Any) -> None:
        """A put whose producer fails leaves no object (and no listed debris)."""
        with pytest.raises(RuntimeError):
            await archive.put(_KEY, _broken(os.urandom(1 << 20)), metadata=_META)
        assert await archive.head(_KEY) is None
        assert await list_keys(archive) == []

    async def test_failed_replace_keeps_the_old_object(self, archive: Any) -> None:
        """A replacing put whose producer fails leaves the previous object whole."""
        first = await archive.put(_KEY, _chunks(b"keep me"), metadata=_META)
        with pytest.raises(RuntimeError):
            await archive.put(_KEY, _broken(b"half"), metadata=_META, if_match=first.etag)
        assert await read_object(archive, _KEY) == b"keep me"

    async def test_missing_object(self, archive: Any) -> None:
        """``head`` says ``None``, ``get`` raises ``ArchiveError``, ``delete`` says ``False``."""
        assert await archive.head(_KEY) is None
        with pytest.raises(ArchiveError):
            await read_object(archive, _KEY)
        assert await archive.delete(_KEY) is False

    async def test_delete_is_idempotent(self, archive: Any) -> None:
        """``delete`` removes the object once and then reports it gone."""
        await archive.put(_KEY, _chunks(b"x"), metadata=_META)
        assert await archive.delete(_KEY) is True
        assert await archive.head(_KEY) is None
        assert await archive.delete(_KEY) is False
        assert await list_keys(archive) == []

    async def test_list_by_prefix_in_key_order(self, archive: Any) -> None:
        """``list`` yields every object under a prefix, in key order, with sizes."""
        keys = ["b/2026/01/2.tkb", "a/2026/02/1.tkb", "a/2026/01/3.tkb", "ab/2026/01/4.tkb"]
        for key in keys:
            await archive.put(key, _chunks(key.encode()), metadata=_META)
        assert await list_keys(archive) == sorted(keys)
        assert await list_keys(archive, "a/") == ["a/2026/01/3.tkb", "a/2026/02/1.tkb"]
        sizes = {info.key: info.size async for info in archive.list()}
        assert sizes == {key: len(key) for key in keys}

    @pytest.mark.parametrize("key", ["", "/abs.tkb", "a/../b.tkb", "a//b.tkb", "a/.hidden"])
    async def test_bad_keys_are_refused(self, archive: Any, key: str) -> None:
        """Keys that could escape the root or hide as temporaries raise ``InvalidArgument``."""
        with pytest.raises(InvalidArgument):
            await archive.put(key, _chunks(b"x"), metadata=_META)
        with pytest.raises(InvalidArgument):
            await archive.head(key)

    async def test_ref_names_the_object(self, archive: Any) -> None:
        """``ref_for`` is root URL + key, and parses back to the same root and key."""
        ref = ArchiveRef.parse(archive.ref_for(_KEY) + "#sha256=" + "a" * 64)
        assert ref.root_url.rstrip("/") == archive.url.rstrip("/")
        assert ref.key == _KEY
