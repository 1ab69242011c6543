"""The archive section of the contract suite, and fault injection for archive tests.

Two reusable pytest base classes (subclass them and provide the fixtures):

- :class:`ArchiveStoreContract` checks an :class:`threadkeep.typing.ArchiveStore` driver
  (put / get / head / delete / list, create-only and ``if_match`` puts). Fixture
  ``archive``: an open archive store on an empty root.
- :class:`ArchiveLifecycleContract` (in :mod:`threadkeep.testing_archive_lifecycle`)
  checks archiving end to end on a hot store and an archive store.

:class:`FaultyArchive` wraps any archive store (it is not a mock server: every call that
is not faulted goes to the real store) and injects the faults of SPEC section 3,
"Cold archive": a put that succeeds but whose next ``head`` says 404, a timeout after a
write, a failing get, a failing delete.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, ClassVar

import pytest

from ._archive._objects import ArchiveRef, ObjectInfo
from ._errors import ArchiveError, BackendUnavailable, Conflict, InvalidArgument
from .typing import ArchiveStore

__all__ = [
    "FAULTS",
    "ArchiveStoreContract",
    "FaultyArchive",
    "InjectedFault",
    "list_keys",
    "read_object",
]

FAULTS = (
    "head_404_after_put",
    "timeout_after_put",
    "corrupt_put",
    "fail_get",
    "fail_delete",
    "fail_put",
)
"""Faults :class:`FaultyArchive` can inject, each consumed once per arming."""


class InjectedFault(BackendUnavailable):
    """A fault injected by :class:`FaultyArchive` (a ``BackendUnavailable``, as timeouts are)."""


class FaultyArchive:
    """Wrap an archive store and inject armed faults; everything else passes through.

    Args:
        inner: The real archive store (open).

    Example:
        ``faulty = FaultyArchive(archive); faulty.arm("timeout_after_put")`` makes the next
        put store the object and then raise :class:`InjectedFault`.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.schemes = inner.schemes
        self.url = inner.url
        self.armed: Counter[str] = Counter()
        self.fired: Counter[str] = Counter()
        self._hide_next_head = False

    def arm(self, fault: str, times: int = 1) -> None:
        """Make the next ``times`` matching calls fail with ``fault`` (one of :data:`FAULTS`)."""
        if fault not in FAULTS:
            raise InvalidArgument(f"unknown fault {fault!r}; one of {FAULTS}")
        self.armed[fault] += times

    def _take(self, fault: str) -> bool:
        if self.armed[fault] > 0:
            self.armed[fault] -= 1
            self.fired[fault] += 1
            return True
        return False

    async def open(self) -> FaultyArchive:
        """Open the wrapped store."""
        await self.inner.open()
        return self

    async def close(self) -> None:
        """Close the wrapped store."""
        await self.inner.close()

    def ref_for(self, key: str) -> str:
        """As the wrapped store."""
        return str(self.inner.ref_for(key))

    async def put(
        self,
        key: str,
        chunks: AsyncIterable[bytes],
        *,
        metadata: Mapping[str, str],
        if_match: str | None = None,
    ) -> ObjectInfo:
        """Put through, injecting the armed put faults.

        ``fail_put`` fails before writing; ``corrupt_put`` stores the body with one byte
        flipped (its metadata unchanged, as a body that drifted from its checksum);
        ``timeout_after_put`` and ``head_404_after_put`` act after the object is stored.
        """
        if self._take("fail_put"):
            raise InjectedFault(f"injected: put {key} failed before writing")
        if self._take("corrupt_put"):
            chunks = _flip_first_byte(chunks)
        info: ObjectInfo = await self.inner.put(key, chunks, metadata=metadata, if_match=if_match)
        if self._take("head_404_after_put"):
            self._hide_next_head = True
        if self._take("timeout_after_put"):
            raise InjectedFault(f"injected: put {key} timed out after the write")
        return info

    async def head(self, key: str) -> ObjectInfo | None:
        """Head through, unless a put just armed a 404."""
        if self._hide_next_head:
            self._hide_next_head = False
            return None
        info: ObjectInfo | None = await self.inner.head(key)
        return info

    async def get(self, key: str) -> AsyncIterator[bytes]:
        """Get through, or fail midway with ``fail_get``."""
        fail = self._take("fail_get")
        async for chunk in self.inner.get(key):
            if fail:
                raise InjectedFault(f"injected: get {key} failed midway")
            yield chunk

    async def delete(self, key: str) -> bool:
        """Delete through, or fail with ``fail_delete`` (nothing deleted)."""
        if self._take("fail_delete"):
            raise InjectedFault(f"injected: delete {key} failed")
        return bool(await self.inner.delete(key))

    def list(self, prefix: str = "") -> AsyncIterator[ObjectInfo]:
        """List through."""
        listing: AsyncIterator[ObjectInfo] = self.inner.list(prefix)
        return listing


async def _flip_first_byte(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    first = True
    async for chunk in chunks:
        if first and chunk:
            first = False
            yield bytes([chunk[0] ^ 0xFF]) + chunk[1:]
        else:
            yield chunk


async def read_object(archive: Any, key: str) -> bytes:
    """Return an object's whole body (tests only: it is held in memory)."""
    return b"".join([chunk async for chunk in archive.get(key)])


async def list_keys(archive: Any, prefix: str = "") -> list[str]:
    """Return the keys of every object under ``prefix``."""
    return [info.key async for info in archive.list(prefix)]


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        await asyncio.sleep(0)
        yield part


async def _broken(first: bytes) -> AsyncIterator[bytes]:
    yield first
    raise RuntimeError("the producer failed midway")


_KEY = "acme/2026/01/00000000-0000-0000-0000-000000000001.tkb"
_META = {"sha256": "0" * 64, "format": "1", "messages": "3"}


class ArchiveStoreContract:
    """The archive section of the contract: rules every archive driver must show.

    Subclass it and provide an async fixture ``archive`` yielding an open store on an
    empty root. ``large_body_bytes`` sets the size used to cross multipart thresholds.
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
