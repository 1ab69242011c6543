"""Fault injection and small readers for archive tests; importable without pytest.

The archive contracts (``ArchiveStoreContract``, ``ArchiveLifecycleContract``) live with
the store contract in ``threadkeep-contract-tests``.

:class:`FaultyArchive` wraps any archive store (it is not a mock server: every call that
is not faulted goes to the real store) and injects the faults an object store
really has: a put that succeeds but whose next ``head`` says 404, a timeout after a
write, a failing get, a failing delete.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

from ._archive._objects import ObjectInfo
from ._errors import BackendUnavailable, InvalidArgument

__all__ = [
    "FAULTS",
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
