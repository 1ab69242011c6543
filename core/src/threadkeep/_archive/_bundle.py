"""The bundle format (``.tkb``): one chat, streamed both ways in bounded memory.

A bundle is gzip-compressed (stdlib ``zlib``, header mtime 0, so the same chat state gives
the same bytes) UTF-8 JSON lines::

    {"format": "threadkeep-bundle", "version": 1, "chat": {...}}        header
    {"t": "m", "m": {...message, every field...}}                        seq order, hidden too
    {"t": "s", "s": {...step...}}                                        seq order
    {"t": "end", "messages": N, "steps": M}                              trailer

Messages keep ``message_id``, ``seq``, ``revision``, timestamps and ``deleted_at``; steps keep
``step_id`` and ``seq``, so a restore puts back exactly what was there. The SHA-256 of the
compressed bytes is recorded in the object metadata and in the chat's ``archive_ref``.

Memory: a writer holds one scan batch (adapted to about ``BATCH_BYTES`` of JSON) plus
zlib's window; a reader holds one restore batch of at most ``BATCH_BYTES`` (or one message
when a single message is larger) plus one download chunk.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from .._content import dump_json, load_json
from .._errors import ArchiveIntegrityError
from .._models import Chat, Message
from .._runs import Step

if TYPE_CHECKING:
    from .._store import Store

__all__ = [
    "BATCH_BYTES",
    "BATCH_ITEMS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "BundleReader",
    "BundleStats",
    "write_bundle",
]

FORMAT_NAME = "threadkeep-bundle"
FORMAT_VERSION = 1
"""Readers accept versions up to this one and refuse newer ones (upgrade threadkeep)."""

BATCH_BYTES = 1 << 20
"""Target JSON bytes per scan or restore batch (models take several times more)."""

BATCH_ITEMS = 500
"""Most records per scan or restore batch."""

_FIRST_SCAN = 64
_MAX_SCAN = BATCH_ITEMS
_LEVEL = 6
_INFLATE_STEP = 1 << 20


@dataclass
class BundleStats:
    """Counts and checksum of a written bundle (filled in as the stream is consumed)."""

    messages: int = 0
    steps: int = 0
    size: int = 0
    sha256: str = ""


def _next_limit(batch_bytes: int, count: int) -> int:
    if count == 0:
        return _MAX_SCAN
    per_item = max(1, batch_bytes // count)
    return max(1, min(_MAX_SCAN, BATCH_BYTES // per_item))


_Scan = Callable[..., Awaitable[Sequence[Any]]]
"""``store.scan_messages`` or ``store.scan_steps``: ``(chat_id, *, after_seq, limit)``."""


async def _batches(
    scan: _Scan,
    chat_id: UUID,
    encode: Callable[[Any], str],
) -> AsyncIterator[tuple[list[Any], list[str]]]:
    """Yield scanned batches with their encoded lines, sizing each scan to ~BATCH_BYTES."""
    after, limit = 0, _FIRST_SCAN
    while batch := list(await scan(chat_id, after_seq=after, limit=limit)):
        lines = [encode(item) for item in batch]
        yield batch, lines
        if len(batch) < limit:
            return
        after = batch[-1].seq or after
        limit = _next_limit(sum(map(len, lines)), len(lines))


async def write_bundle(
    store: Store,
    chat: Chat,
    stats: BundleStats,
    on_messages: Callable[[list[Message]], Awaitable[None]] | None = None,
) -> AsyncIterator[bytes]:
    """Yield the compressed bundle of ``chat`` from the store's hot rows, streamed.

    Args:
        store: The hot store (capability ``archive``).
        chat: The chat snapshot written in the header (its revision is what the bundle
            reflects).
        stats: Filled with counts, size and SHA-256 when the stream ends.
        on_messages: Awaited with each scanned batch (the archiver indexes ids with it).

    Raises:
        CapabilityNotSupported: If the store cannot scan hot rows.
    """
    compressor = zlib.compressobj(_LEVEL, zlib.DEFLATED, 31)
    digest = hashlib.sha256()
    stats.messages = stats.steps = stats.size = 0

    def emit(line: str) -> bytes:
        out = compressor.compress(line.encode("utf-8") + b"\n")
        digest.update(out)
        stats.size += len(out)
        return out

    header = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    yield emit(dump_json({**header, "chat": chat.model_dump(mode="json")}))
    async for batch, lines in _batches(store.scan_messages, chat.chat_id, _message_line):
        if on_messages is not None:
            await on_messages(batch)
        stats.messages += len(batch)
        yield b"".join(emit(line) for line in lines)
    if store.capabilities.steps:
        async for steps, lines in _batches(store.scan_steps, chat.chat_id, _step_line):
            stats.steps += len(steps)
            yield b"".join(emit(line) for line in lines)
    yield emit(dump_json({"t": "end", "messages": stats.messages, "steps": stats.steps}))
    tail = compressor.flush()
    digest.update(tail)
    stats.size += len(tail)
    stats.sha256 = digest.hexdigest()
    yield tail


class BundleReader:
    """Decode a bundle stream into its header, message batches and step batches.

    Iterate :meth:`batches` once; afterwards :attr:`sha256` is the stream's checksum and
    the trailer's counts have been checked.

    Raises (while iterating):
        ArchiveIntegrityError: If the stream is not a bundle, has a newer format version,
            is truncated, or its counts disagree with its trailer.
    """

    def __init__(
        self, chunks: AsyncIterable[bytes], *, message_model: type[Message] = Message
    ) -> None:
        self._chunks = chunks
        self._message_model = message_model
        self.header: dict[str, Any] = {}
        self.sha256 = ""
        self.messages = 0
        self.steps = 0

    async def _lines(self) -> AsyncIterator[bytes]:
        decompressor = zlib.decompressobj(31)
        digest = hashlib.sha256()
        pending = b""
        try:
            async for chunk in self._chunks:
                digest.update(chunk)
                data = chunk
                while data:
                    # max_length bounds what one compressed chunk may expand to in memory
                    pending += decompressor.decompress(data, _INFLATE_STEP)
                    data = decompressor.unconsumed_tail
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        yield line
            pending += decompressor.flush()
        except zlib.error as exc:
            raise ArchiveIntegrityError(
                f"bundle is not valid gzip (damaged, or not a threadkeep bundle): {exc}"
            ) from exc
        if not decompressor.eof or pending:
            raise ArchiveIntegrityError("bundle is truncated; it was not written completely")
        self.sha256 = digest.hexdigest()

    def _check_header(self, record: Any) -> None:
        if not isinstance(record, dict) or record.get("format") != FORMAT_NAME:
            raise ArchiveIntegrityError("object is not a threadkeep bundle (no header line)")
        version = record.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            msg = (
                f"bundle format version {version} is newer than {FORMAT_VERSION}; "
                "upgrade threadkeep to read it"
            )
            raise ArchiveIntegrityError(msg)
        self.header = record

    async def batches(self) -> AsyncIterator[tuple[str, list[Any]]]:
        """Yield ``("messages", [Message...])`` and ``("steps", [Step...])`` batches."""
        kind, batch_bytes, ended = "", 0, False
        batch: list[Any] = []
        async for line in self._lines():
            record = _decode(line)
            if not self.header:
                self._check_header(record)
                continue
            tag = record.get("t") if isinstance(record, dict) else None
            if ended or tag not in ("m", "s", "end"):
                raise ArchiveIntegrityError(f"unexpected bundle record {str(tag)[:20]!r}")
            if tag == "end":
                ended = self._check_trailer(record)
                continue
            item_kind = "messages" if tag == "m" else "steps"
            full = batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_ITEMS
            if batch and (item_kind != kind or full):
                yield kind, batch
                batch, batch_bytes = [], 0
            kind = item_kind
            batch.append(self._item(tag, record))
            batch_bytes += len(line)
        if batch:
            yield kind, batch
        if not ended:
            raise ArchiveIntegrityError("bundle has no trailer; it was not written completely")

    def _item(self, tag: str, record: dict[str, Any]) -> Message | Step:
        try:
            if tag == "m":
                self.messages += 1
                return self._message_model.model_validate(record["m"])
            self.steps += 1
            return Step.model_validate(record["s"])
        except (KeyError, ValueError) as exc:
            raise ArchiveIntegrityError(f"bundle holds an invalid record: {exc}") from exc

    def _check_trailer(self, record: dict[str, Any]) -> bool:
        if record.get("messages") != self.messages or record.get("steps") != self.steps:
            msg = (
                f"bundle trailer counts {record.get('messages')}/{record.get('steps')} "
                f"but it holds {self.messages}/{self.steps}"
            )
            raise ArchiveIntegrityError(msg)
        return True


def _decode(line: bytes) -> Any:
    try:
        return load_json(line)
    except ValueError as exc:
        raise ArchiveIntegrityError("bundle holds a line that is not JSON") from exc


def _message_line(message: Message) -> str:
    return dump_json({"t": "m", "m": message.model_dump(mode="json")})


def _step_line(step: Step) -> str:
    return dump_json({"t": "s", "s": step.model_dump(mode="json")})
