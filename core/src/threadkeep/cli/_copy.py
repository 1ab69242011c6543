"""``threadkeep copy SRC_URL DST_URL``: every chat, message, step and run, ids and times kept.

Chats are copied oldest first, so the destination lists them in the source's order. Each
record goes through the store's copy API (``Store.copy_chat``, ``copy_messages``,
``copy_steps``, ``copy_run``), which keeps ids, seqs and timestamps and skips what is there
already: an interrupted copy resumes by running it again, and a second run copies nothing.
Archived chats are copied as their archive reference (their bundle stays where it is).
A soft-deleted chat is copied with its records and marked deleted after them, so a restore
in the destination gives back everything.
Memory stays bounded: the chat list is spooled to a temporary file, and records move in
batches of 200. A final check counts every copied chat's records on both sides.
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._errors import RunNotFound
from .._models import Chat, ChatStatus
from .._open import open_store
from .._paging import MAX_PAGE_LIMIT, ChatFilter
from .._store import Store
from ._app import EXIT_USAGE, CliError, JsonOption, print_json, run, stderr_console

__all__ = ["CopyCounts", "copy", "copy_store", "register"]

_BATCH = 200
_OFFSET = struct.Struct(">Q")


@dataclass
class CopyCounts:
    """What a copy found in the source and wrote to the destination (counts)."""

    chats: int = 0
    chats_copied: int = 0
    messages: int = 0
    messages_copied: int = 0
    steps: int = 0
    steps_copied: int = 0
    runs: int = 0
    runs_copied: int = 0


class _ChatSpool:
    """The source's chats on disk (JSON lines plus an offset index), read back oldest first."""

    def __init__(self, folder: Path) -> None:
        self._records: IO[bytes] = (folder / "chats.jsonl").open("w+b")
        self._offsets: IO[bytes] = (folder / "offsets.bin").open("w+b")
        self.count = 0

    def add(self, chat: Chat) -> None:
        self._offsets.write(_OFFSET.pack(self._records.tell()))
        self._records.write(chat.model_dump_json().encode() + b"\n")
        self.count += 1

    def oldest_first(self, model: type[Chat]) -> Any:
        # The walk wrote newest first: read the index backwards.
        for index in reversed(range(self.count)):
            self._offsets.seek(index * _OFFSET.size)
            (offset,) = _OFFSET.unpack(self._offsets.read(_OFFSET.size))
            self._records.seek(offset)
            yield model.model_validate_json(self._records.readline())

    def close(self) -> None:
        self._records.close()
        self._offsets.close()


async def _spool(source: Store, spool: _ChatSpool) -> None:
    every = ChatFilter(deleted="include")
    cursor: str | None = None
    while True:
        page = await source.list_chats(every, limit=MAX_PAGE_LIMIT, cursor=cursor)
        for chat in reversed(page.items):  # newest first, as pages walk
            spool.add(chat)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


async def _batches(scan: Any, chat_id: Any) -> AsyncIterator[list[Any]]:
    """Yield ``scan(chat_id, after_seq=..., limit=200)`` pages (messages or steps) in seq order."""
    after = 0
    while batch := await scan(chat_id, after_seq=after, limit=_BATCH):
        yield batch
        after = batch[-1].seq or after


async def _copy_records(source: Store, target: Store, chat: Chat, counts: CopyCounts) -> set[str]:
    """Copy the chat's messages and steps; return the run ids they name."""
    runs: set[str] = set()
    if chat.status is ChatStatus.ARCHIVED:  # its records are in its bundle
        return runs
    both_steps = source.capabilities.steps and target.capabilities.steps
    kinds: list[tuple[str, Any, Any]] = [("messages", source.scan_messages, target.copy_messages)]
    if both_steps:
        kinds.append(("steps", source.scan_steps, target.copy_steps))
    for kind, scan, write in kinds:
        async for batch in _batches(scan, chat.chat_id):
            setattr(counts, kind, getattr(counts, kind) + len(batch))
            copied = await write(chat.chat_id, batch)
            setattr(counts, f"{kind}_copied", getattr(counts, f"{kind}_copied") + copied)
            runs.update(record.run_id for record in batch if record.run_id)
    return runs


async def _copy_runs(
    source: Store, target: Store, chat: Chat, runs: set[str], counts: CopyCounts
) -> None:
    if not (source.capabilities.steps and target.capabilities.steps):
        return
    for run_id in sorted(runs):
        try:
            record = await source.get_run(chat.chat_id, run_id)
        except RunNotFound:
            continue  # a message may name a run that was never recorded
        counts.runs += 1
        counts.runs_copied += await target.copy_run(record)


async def _count(store: Store, chat: Chat) -> tuple[int, int]:
    """Return the chat's (messages, steps) stored in ``store``."""
    if chat.status is ChatStatus.ARCHIVED:
        return 0, 0
    totals = [0, 0]
    scans: list[Any] = [store.scan_messages]
    if store.capabilities.steps:
        scans.append(store.scan_steps)
    for index, scan in enumerate(scans):
        async for batch in _batches(scan, chat.chat_id):
            totals[index] += len(batch)
    return totals[0], totals[1]


async def _check(source: Store, target: Store, chat: Chat) -> None:
    ours, theirs = await _count(source, chat), await _count(target, chat)
    if not target.capabilities.steps:
        ours = (ours[0], 0)
    if ours != theirs:
        msg = (
            f"count check failed for chat {chat.chat_id}: the source has {ours[0]} messages "
            f"and {ours[1]} steps, the destination {theirs[0]} and {theirs[1]}"
        )
        raise CliError(msg)


async def copy_store(source: Store, target: Store, progress: Any = None) -> CopyCounts:
    """Copy every chat of ``source`` into ``target`` (see the module docstring).

    Args:
        source: The open store to read.
        target: The open store to write.
        progress: Called with ``(done, total)`` chats after each chat, if given.

    Returns:
        The counts found and copied.

    Raises:
        CapabilityNotSupported: If either store lacks the ``archive`` capability.
        Conflict: If a live chat of the destination holds a copied chat's key.
        CliError: If the final count check finds fewer records in the destination.
    """
    counts = CopyCounts()
    with tempfile.TemporaryDirectory(prefix="threadkeep-copy-") as folder:
        spool = _ChatSpool(Path(folder))
        try:
            await _spool(source, spool)
            for chat in spool.oldest_first(source.chat_model):
                counts.chats += 1
                # A deleted chat goes in live and is marked deleted once its records are
                # in (``Store.copy_deletion``); a resumed copy finishes the same way.
                live = chat.model_copy(update={"deleted_at": None})
                counts.chats_copied += await target.copy_chat(live)
                runs = await _copy_records(source, target, chat, counts)
                await _copy_runs(source, target, chat, runs, counts)
                await target.copy_deletion(chat)
                await _check(source, target, chat)
                if progress is not None:
                    progress(counts.chats, spool.count)
        finally:
            spool.close()
    return counts


def copy(
    src_url: Annotated[str, typer.Argument(help="The store to read (any store URL).")],
    dst_url: Annotated[str, typer.Argument(help="The store to write.")],
    as_json: JsonOption = False,
) -> None:
    """Copy every chat, message, step, run and archive reference from one store to another.

    Ids and timestamps are kept; run it again after an interruption to resume (what is
    there already is skipped, so a second run copies nothing). Both drivers need the
    archive capability.
    """
    if src_url == dst_url:
        raise CliError("SRC_URL and DST_URL are the same store", exit_code=EXIT_USAGE)

    async def go() -> CopyCounts:
        async with open_store(src_url) as source, open_store(dst_url) as target:
            console = stderr_console()
            columns = [
                TextColumn("copying"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            ]
            with Progress(*columns, console=console, disable=not console.is_terminal) as bar:
                task = bar.add_task("copy", total=None)
                return await copy_store(
                    source,
                    target,
                    lambda done, total: bar.update(task, completed=done, total=total),
                )

    counts = run(go())
    if as_json:
        print_json(asdict(counts))
        return
    typer.echo(
        f"{counts.chats:,} chats ({counts.chats_copied:,} copied), {counts.messages:,} messages "
        f"({counts.messages_copied:,} copied), {counts.steps:,} steps ({counts.steps_copied:,} "
        f"copied), {counts.runs:,} runs ({counts.runs_copied:,} copied); counts match"
    )


def register(app: typer.Typer) -> None:
    """Add ``copy`` to the root app."""
    app.command(name="copy")(copy)
