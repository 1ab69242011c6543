"""The store's tiering component: bring an archived chat back into the hot store, and erase bundles.

Choice (documented in ``docs/archive.md``): reading an archived chat rehydrates it. The
chat's ``archive_ref`` names the bundle; :func:`open_archive` opens the archive driver that
serves the ref's scheme (``archive_class_for``), so no archive configuration is needed to
read. Rehydration restores messages and steps exactly (ids, seq, revision, timestamps,
hidden ones too), then flips the chat back to ``active`` with a compare-and-set; the
bundle stays where it is (the ref is kept, so erasure still finds it) until the chat is
archived again (the object is replaced) or purged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from ._archive._bundle import BundleReader
from ._archive._objects import ArchiveRef
from ._errors import (
    ArchiveError,
    ArchiveIntegrityError,
    BackendUnavailable,
    ChatNotFound,
    Conflict,
)
from ._models import Chat, ChatStatus
from ._registry import archive_class_for
from ._store_core import StoreContext

__all__ = ["erase_bundle", "open_archive", "rehydrate", "restore_bundle"]

_ATTEMPTS = 8
_COUNT_BATCH = 1000


@asynccontextmanager
async def open_archive(root_url: str, **options: Any) -> AsyncIterator[Any]:
    """Open the archive store serving ``root_url``'s scheme, and close it after.

    Raises:
        UnknownDriver: If no installed archive driver serves the scheme.
        BackendUnavailable / ArchiveError: If it cannot be opened.
    """
    archive = archive_class_for(root_url).from_url(root_url, **options)
    await archive.open()
    try:
        yield archive
    finally:
        await archive.close()


async def restore_bundle(ctx: StoreContext, archive: Any, chat_id: UUID, ref: ArchiveRef) -> int:
    """Stream the bundle at ``ref`` into the hot store (idempotent); return messages in it.

    Rows already stored (same ``message_id`` / ``step_id``) are skipped. The stream's
    SHA-256 is checked against ``ref`` at the end.

    Raises:
        ArchiveIntegrityError: If the bundle belongs to another chat, is malformed, or its
            checksum is not the ref's (rows restored so far stay invisible: the chat is
            still archived).
        ArchiveError / BackendUnavailable: If the archive fails.
    """
    reader = BundleReader(archive.get(ref.key), message_model=ctx.records.message_model)
    async for kind, batch in reader.batches():
        if reader.header.get("chat", {}).get("chat_id") != str(chat_id):
            raise ArchiveIntegrityError(f"bundle {ref} does not belong to chat {chat_id}")
        if kind == "messages":
            await ctx.driver.restore_messages(chat_id, batch)
        elif ctx.capabilities.steps:
            await ctx.driver.restore_steps(chat_id, batch)
    if ref.sha256 is not None and reader.sha256 != ref.sha256:
        raise ArchiveIntegrityError(
            f"bundle {ref.object_url} has SHA-256 {reader.sha256}, not the recorded "
            f"{ref.sha256}; it was changed or damaged after archiving"
        )
    return reader.messages + (reader.steps if ctx.capabilities.steps else 0)


async def _hot_rows(ctx: StoreContext, chat_id: UUID) -> int:
    count = 0
    for scan in (
        ctx.driver.scan_messages,
        ctx.driver.scan_steps if ctx.capabilities.steps else None,
    ):
        after = 0
        while scan is not None and (batch := await scan(chat_id, after, _COUNT_BATCH)):
            count += len(batch)
            after = batch[-1].seq or after
    return count


async def rehydrate(ctx: StoreContext, chat: Chat) -> Chat:
    """Bring an archived chat's messages and steps back, then flip it to ``active``.

    Safe against an archiver deleting hot rows at the same time: deletion happens only
    while the chat is archived and bumps its revision (SPI, ``delete_hot_messages``), and
    the flip is a compare-and-set on the revision read after the hot rows were counted
    complete, so it fails (and the restore runs again) if rows went meanwhile.

    Returns:
        The active chat.

    Raises:
        ChatNotFound: If the chat was deleted or purged meanwhile.
        ArchiveError: If the chat has no usable ``archive_ref``.
        ArchiveIntegrityError: If the bundle does not match its ref.
        UnknownDriver: If the archive driver the ref names is not installed.
        Conflict: If the chat kept changing.
        BackendUnavailable: If the archive (or the hot store) fails on the way: the
            message names the chat and its bundle; the chat stays archived, and rows
            restored so far stay invisible (the next read restores the rest, skipping them).
    """
    if not chat.archive_ref:
        raise ArchiveError(f"chat {chat.chat_id} is archived but has no archive_ref")
    ref = ArchiveRef.parse(chat.archive_ref)
    if ref.sha256 is None:
        raise ArchiveIntegrityError(f"archived chat {chat.chat_id} has no checksum in its ref")
    try:
        return await _rehydrate(ctx, chat, ref)
    except BackendUnavailable as exc:  # say what it means for the chat, keep the class
        msg = (
            f"archived chat {chat.chat_id} could not be read back from {ref.object_url}; it "
            f"stays archived and unchanged, read it again once this is fixed: {exc}"
        )
        raise type(exc)(msg) from exc


async def _rehydrate(ctx: StoreContext, chat: Chat, ref: ArchiveRef) -> Chat:
    async with open_archive(ref.root_url) as archive:
        expected: int | None = None
        for _ in range(_ATTEMPTS):
            current = await ctx.driver.get_chat(chat.chat_id)
            if current is None or current.deleted_at is not None:
                raise ChatNotFound(f"no live chat {chat.chat_id}")
            if current.status is not ChatStatus.ARCHIVED:
                return current
            if expected is None or await _hot_rows(ctx, chat.chat_id) != expected:
                expected = await restore_bundle(ctx, archive, chat.chat_id, ref)
                continue  # count again at a revision read after the restore
            active = current.model_copy(
                update={"status": ChatStatus.ACTIVE, "updated_at": ctx.now()}
            )
            stored = await ctx.driver.update_chat(active, current.revision)
            if stored is not None:
                return stored
    raise Conflict(f"chat {chat.chat_id} kept changing during rehydration; try again")


async def erase_bundle(chat: Chat) -> dict[str, int]:
    """Delete the bundle the chat's ``archive_ref`` names; return what it held.

    Returns:
        ``{"bundles": 1, "messages": n, "steps": m}`` (counts from the bundle's metadata),
        or zeros when there was no bundle.

    Raises:
        UnknownDriver / BackendUnavailable / ArchiveError: If the archive cannot be
            reached; nothing of the hot chat has been removed then, so retry.
    """
    counts = {"bundles": 0, "messages": 0, "steps": 0}
    if not chat.archive_ref:
        return counts
    ref = ArchiveRef.parse(chat.archive_ref)
    async with open_archive(ref.root_url) as archive:
        info = await archive.head(ref.key)
        if await archive.delete(ref.key):
            counts["bundles"] = 1
            if info is not None:
                for kind in ("messages", "steps"):
                    value = info.metadata.get(kind, "0")
                    counts[kind] = int(value) if value.isdigit() else 0
    return counts
