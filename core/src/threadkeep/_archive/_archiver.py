"""``Archiver``: move chats to cold storage and back.

``archive_chat`` runs these steps; each can be re-run after a crash at any point:

1. ``pending``: record where the bundle goes (``archive_ref`` without a checksum, on the
   still-active chat, compare-and-set), so erasure finds any object written from now on.
2. ``written``: stream the bundle (scan -> compress -> upload) create-only to its key. An
   object already there with the same SHA-256 is this chat state's bundle from an earlier
   run: it is reused. One with another SHA-256 is stale (the chat is active, so nothing
   references it): it is replaced with ``if_match`` on its etag, only after re-reading the
   chat at the bundle's revision.
3. ``verified``: ``head`` the object (metadata SHA-256 and size) and re-read it whole,
   hashing. A bad object is left for the next attempt to replace.
4. ``flipped``: ``update_chat(archived, archive_ref=url#sha256=...)`` with
   ``expected_revision`` = the revision the bundle was written from: a chat that changed
   meanwhile is not flipped, and the attempt starts again.
5. ``rows_deleted``: delete hot messages and steps, only while the chat is archived at
   the revision seen (``delete_archived_rows``, atomic in drivers that override it).

Until step 4 the hot rows are the truth and reads never touch the object; from step 4 on
the object is verified and referenced, and reads rehydrate from it.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from .._errors import (
    ArchiveIntegrityError,
    CapabilityNotSupported,
    ChatNotFound,
    Conflict,
)
from .._models import Chat, ChatStatus, Message
from .._paging import ChatFilter
from .._store import Store
from .._store_args import as_count, as_cutoff
from .._store_tiering import open_archive
from ._bundle import FORMAT_VERSION, BundleStats, write_bundle
from ._objects import ArchiveRef, ObjectInfo, bundle_key

__all__ = ["ArchiveResult", "Archiver"]

_log = logging.getLogger("threadkeep.archive")

SINGLE_PUT_BYTES = 8 << 20
"""Bundles up to this many compressed bytes are buffered and sent in one put."""

_ATTEMPTS = 6
_IDLE_PAGE = 100


class ArchiveResult(BaseModel):
    """What ``archive_chat`` did to one chat.

    Attributes:
        chat_id: The chat.
        archive_ref: Its bundle, ``url#sha256=hex``.
        messages: Messages in the bundle (hidden ones included).
        steps: Steps in the bundle.
        size: Compressed bytes.
        reused: Whether an identical object from an earlier run was kept.
        deleted_rows: Hot rows this call deleted (messages + steps).
    """

    chat_id: UUID
    archive_ref: str
    messages: int = 0
    steps: int = 0
    size: int = 0
    reused: bool = False
    deleted_rows: int = 0


class Archiver:
    """Archive chats of ``store`` into ``archive`` and bring them back.

    Args:
        store: An open hot store whose driver declares the ``archive`` capability.
        archive: An open :class:`threadkeep.typing.ArchiveStore` (``file://``, ``s3://``).
        single_put_bytes: Bundles up to this size (bytes, compressed) are written with one
            put from memory; larger ones are hashed in a first streaming pass and uploaded
            (multipart on S3) in a second, so memory stays bounded.

    Raises:
        CapabilityNotSupported: If the store's driver cannot archive.
    """

    def __init__(
        self, store: Store, archive: Any, *, single_put_bytes: int = SINGLE_PUT_BYTES
    ) -> None:
        if not store.capabilities.archive:
            msg = f"{type(store.driver).__name__} does not declare the 'archive' capability"
            raise CapabilityNotSupported(msg)
        self.store = store
        self.archive = archive
        self.single_put_bytes = single_put_bytes
        self._index_ids = True
        self._failed_etags: set[str] = set()  # objects that failed verification: never reuse

    async def _checkpoint(self, step: str, chat_id: UUID) -> None:
        """Called after each step of ``archive_chat`` (tests inject crashes here)."""

    # -- archive_chat ----------------------------------------------------------------------

    async def archive_chat(self, chat_id: UUID) -> ArchiveResult:
        """Move one live chat to the archive; see the module docstring for the steps.

        Idempotent: on an archived chat it only finishes (verifies the object, deletes any
        hot rows left). A re-run after a crash or fault at any step finishes the job with
        exactly one object at the chat's key.

        Returns:
            What was done.

        Raises:
            ChatNotFound: If the chat does not exist or is deleted.
            Conflict: If the chat kept changing (messages arriving) over every attempt.
            ArchiveIntegrityError: If an archived chat's object is missing or differs from
                its ref (hot rows, if any, are kept).
            BackendUnavailable / ArchiveError: If the archive or store fails; re-run.
        """
        for _ in range(_ATTEMPTS):
            chat = await self.store.get_chat(chat_id)
            if chat.status is ChatStatus.ARCHIVED:
                return await self._finish(chat)
            result = await self._attempt(chat)
            if result is not None:
                return result
        raise Conflict(f"chat {chat_id} kept changing while it was being archived; try later")

    async def _attempt(self, chat: Chat) -> ArchiveResult | None:
        snapshot = await self._mark_pending(chat)
        if snapshot is None:
            return None
        await self._checkpoint("pending", chat.chat_id)
        assert snapshot.archive_ref is not None
        ref = ArchiveRef.parse(snapshot.archive_ref)
        written = await self._write(snapshot, ref.key)
        if written is None:
            return None
        stats, reused = written
        await self._checkpoint("written", chat.chat_id)
        if not await self._verify(ref.key, stats.sha256, stats.size):
            return None
        await self._checkpoint("verified", chat.chat_id)
        final = ArchiveRef(ref.root_url, ref.key, stats.sha256)
        archived = snapshot.model_copy(
            update={
                "status": ChatStatus.ARCHIVED,
                "archive_ref": str(final),
                "updated_at": self.store.now(),
            }
        )
        flipped = await self.store.primitives.update_chat(archived, snapshot.revision)
        if flipped is None:
            if (
                await self.store.primitives.get_chat(chat.chat_id) is None
            ):  # purged: nobody refers to it
                await self.archive.delete(ref.key)
                raise ChatNotFound(f"chat {chat.chat_id} was removed while being archived")
            return None
        await self._checkpoint("flipped", chat.chat_id)
        result = await self._finish(flipped)
        return result.model_copy(update={"reused": reused, "size": stats.size})

    async def _mark_pending(self, chat: Chat) -> Chat | None:
        key = bundle_key(chat)
        if chat.archive_ref:
            old = ArchiveRef.parse(chat.archive_ref)
            if old.root_url.rstrip("/") == self.archive.url.rstrip("/"):
                return chat  # the key is sticky: a later tenant change does not move it
            key = old.key
        pending = chat.model_copy(update={"archive_ref": self.archive.ref_for(key)})
        stored = await self.store.primitives.update_chat(pending, chat.revision)
        if stored is not None and chat.archive_ref:
            await self._drop_foreign(ArchiveRef.parse(chat.archive_ref))
        return stored

    async def _drop_foreign(self, old: ArchiveRef) -> None:
        """Delete a stale bundle of an active chat left in another archive (best effort)."""
        try:
            async with open_archive(old.root_url) as archive:
                await archive.delete(old.key)
        except Exception:  # noqa: BLE001 - best effort, the chat no longer names it
            _log.warning("could not delete stale bundle %s", old.object_url, exc_info=True)

    async def _index(self, chat_id: UUID, messages: list[Message]) -> None:
        if not self._index_ids:
            return
        ids = [m.message_id for m in messages]
        for message in messages:
            ids += [c.tool_call_id for c in message.tool_calls]
            ids += [r.reasoning_id for r in message.reasonings]
        try:
            await self.store.primitives.index_archived_ids(chat_id, ids)
        except CapabilityNotSupported:
            self._index_ids = False
            _log.warning(
                "%s keeps no archived-id index: get_message by id will not find archived "
                "chats until they are read by chat",
                type(self.store.driver).__name__,
            )

    async def _write(self, chat: Chat, key: str) -> tuple[BundleStats, bool] | None:
        stats = BundleStats()
        spool: bytearray | None = bytearray()
        index = functools.partial(self._index, chat.chat_id)
        async for chunk in write_bundle(self.store, chat, stats, index):
            if spool is not None:
                spool += chunk
                if len(spool) > self.single_put_bytes:
                    spool = None  # too big to buffer: a second streaming pass uploads it
        existing = await self.archive.head(key)
        trusted = existing is not None and existing.etag not in self._failed_etags
        if existing is not None and trusted and existing.sha256 == stats.sha256:
            return stats, True
        metadata = _metadata(chat, stats)
        body = _slices(spool) if spool is not None else self._second_pass(chat)
        if existing is None:
            try:
                await self.archive.put(key, body, metadata=metadata)
            except Conflict:
                return None  # someone wrote meanwhile: look again
            return stats, False
        return await self._replace(
            chat=chat, key=key, existing=existing, body=body, metadata=metadata, stats=stats
        )

    async def _replace(
        self,
        *,
        chat: Chat,
        key: str,
        existing: ObjectInfo,
        body: AsyncIterator[bytes],
        metadata: dict[str, str],
        stats: BundleStats,
    ) -> tuple[BundleStats, bool] | None:
        current = await self.store.primitives.get_chat(chat.chat_id)
        if current is None or current.revision != chat.revision:
            return None  # our bundle is stale, or the chat is archived by someone else
        try:
            await self.archive.put(key, body, metadata=metadata, if_match=existing.etag)
        except Conflict:
            return None
        _log.info("replaced stale bundle %s of chat %s", key, chat.chat_id)
        return stats, False

    async def _second_pass(self, chat: Chat) -> AsyncIterator[bytes]:
        async for chunk in write_bundle(self.store, chat, BundleStats()):
            yield chunk

    async def _verify(self, key: str, sha256: str, size: int) -> bool:
        info = await self.archive.head(key)
        if info is None or info.sha256 != sha256 or info.size != size:
            _log.warning("bundle %s did not verify (head: %s); retrying", key, info)
            return False
        digest, seen = hashlib.sha256(), 0
        async for chunk in self.archive.get(key):
            digest.update(chunk)
            seen += len(chunk)
        if seen == size and digest.hexdigest() == sha256:
            return True
        _log.warning("bundle %s does not match its metadata; it will be replaced", key)
        self._failed_etags.add(info.etag)
        return False

    async def _finish(self, chat: Chat) -> ArchiveResult:
        assert chat.archive_ref is not None
        ref = ArchiveRef.parse(chat.archive_ref)
        info = await self.archive.head(ref.key)
        if info is None or info.sha256 != ref.sha256:
            msg = (
                f"archived chat {chat.chat_id}: its bundle {ref.object_url} is missing or "
                "differs from its ref; hot rows are kept"
            )
            raise ArchiveIntegrityError(msg)
        deleted = await self._delete_rows(chat)
        await self._checkpoint("rows_deleted", chat.chat_id)
        return ArchiveResult(
            chat_id=chat.chat_id,
            archive_ref=str(ref),
            messages=int(info.metadata.get("messages", 0)),
            steps=int(info.metadata.get("steps", 0)),
            size=info.size,
            deleted_rows=deleted,
        )

    async def _delete_rows(self, chat: Chat) -> int:
        """Delete hot rows while the chat is archived at the revision seen; return count."""
        for _ in range(_ATTEMPTS):
            counts = await self.store.primitives.delete_archived_rows(chat.chat_id, chat.revision)
            if counts is not None:
                return sum(counts.values())
            current = await self.store.primitives.get_chat(chat.chat_id)
            if current is None or current.status is not ChatStatus.ARCHIVED:
                return 0  # purged, or rehydrated by a reader meanwhile: its rows stay
            if current.archive_ref != chat.archive_ref:
                return 0  # archived again by another archiver, which deletes
            chat = current
        raise Conflict(f"chat {chat.chat_id} kept changing while its hot rows were deleted")

    # -- policy and restore ----------------------------------------------------------------

    async def archive_idle(
        self,
        older_than: timedelta,
        *,
        limit: int | None = None,
        progress: Callable[[ArchiveResult], Any] | None = None,
    ) -> list[ArchiveResult]:
        """Archive every live, active chat idle for longer than ``older_than``.

        Idle means its last message (or its creation, if it has none) is older than
        ``now - older_than`` (``ChatFilter(idle_before=..., status=active)``).

        Args:
            older_than: How long a chat must have been idle (``timedelta(0)``: all).
            limit: Archive at most this many chats (default: all).
            progress: Called with each result as it completes.

        Returns:
            The results, in the order archived.

        Raises:
            InvalidArgument: If ``older_than`` is not a ``timedelta``, is negative or
                reaches back before year 1, or ``limit`` is not an integer of at least 1.
            As :meth:`archive_chat` for the first chat that fails (earlier ones stay done).
        """
        cutoff = as_cutoff(self.store.now(), older_than, "older_than")
        if limit is not None:
            limit = as_count(limit, "limit", minimum=1)
        chat_filter = ChatFilter(status=ChatStatus.ACTIVE, idle_before=cutoff)
        results: list[ArchiveResult] = []
        before: int | None = None  # keyset walk: each chat is visited once, newest first
        while limit is None or len(results) < limit:
            size = _IDLE_PAGE if limit is None else min(_IDLE_PAGE, limit - len(results))
            batch = await self.store.primitives.page_chats(chat_filter, before, size)
            if not batch:
                break
            before = batch[-1].seq
            for chat in batch:
                result = await self.archive_chat(chat.chat_id)
                results.append(result)
                if progress is not None:
                    progress(result)
        return results

    async def count_idle(self, older_than: timedelta) -> int:
        """Return how many live, active chats ``archive_idle(older_than)`` would take.

        Raises:
            InvalidArgument: As :meth:`archive_idle` for ``older_than``.
        """
        cutoff = as_cutoff(self.store.now(), older_than, "older_than")
        chat_filter = ChatFilter(status=ChatStatus.ACTIVE, idle_before=cutoff)
        count, before = 0, None
        while batch := await self.store.primitives.page_chats(chat_filter, before, 200):
            count += len(batch)
            before = batch[-1].seq
        return count

    async def restore_chat(self, chat_id: UUID) -> Chat:
        """Undelete the chat if deleted, and rehydrate it if archived (explicit restore).

        Raises:
            As :meth:`threadkeep.Store.restore_chat`, plus the errors of rehydration.
        """
        return await self.store.restore_chat(chat_id)

    async def rehydrate(self, chat_id: UUID) -> Chat:
        """Bring an archived chat back into the hot store; a hot chat is returned as is."""
        chat = await self.store.get_chat(chat_id)
        if chat.status is ChatStatus.ARCHIVED:
            chat = await self.store.restore_chat(chat_id)  # live: restoring rehydrates only
        return chat


def _metadata(chat: Chat, stats: BundleStats) -> dict[str, str]:
    return {
        "sha256": stats.sha256,
        "format": str(FORMAT_VERSION),
        "chat-id": str(chat.chat_id),
        "chat-revision": str(chat.revision),
        "messages": str(stats.messages),
        "steps": str(stats.steps),
    }


async def _slices(data: bytearray, size: int = 1 << 20) -> AsyncIterator[bytes]:
    """Yield a spooled body in 1 MiB copies (one full copy would double the spool)."""
    for start in range(0, len(data), size):
        yield bytes(data[start : start + size])
