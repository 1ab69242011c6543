"""Bulk load of ``Store``: large histories in big batches, on the driver's fastest path.

``append_messages`` is built for live appends (a few messages, one round trip each).
``load_messages`` takes any number of messages (an iterable or an async iterable, consumed
batch by batch, so a million-message history never sits in memory at once) and writes each
batch with the driver's bulk primitive ``load_messages`` (``COPY`` on PostgreSQL, one
multi-row insert on SQLite). A driver without that primitive gets the same batches through
``insert_messages``: the result and the guarantees are the same, only slower.

The guarantees are those of ``append_messages``,
per batch: every message is checked and encoded exactly as an append checks it (validation,
``max_message_bytes``, NaN and infinity, lone surrogates, nesting depth, compaction rules);
a batch is all or nothing; a message whose ``agui_id`` is stored already is not written
again (so a re-run of the same load writes nothing) and one stored with a different payload
fails the batch with ``IdempotencyConflict``.

Messages are encoded by :func:`~threadkeep._encode_bulk.encode_for_load` (the result of
``Store.prepare``, with less work per message), and a caller that checked its messages
already (an importer checks a whole file before writing any of it) hands over what
``Store.prepare`` returned: a :class:`PreparedMessage` is taken as it is, with only the
store's payload limit checked again, so nothing is validated or encoded twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any
from uuid import UUID

from ._boundary_rules import is_compaction
from ._content import PreparedMessage, check_payload_size
from ._encode_bulk import collector_paused, encode_for_load, payload_bytes
from ._errors import CapabilityNotSupported, Conflict, IdempotencyConflict, InvalidArgument
from ._models import Message
from ._plugins import has_commit_observers, notify_messages_committed
from ._store_args import as_count, as_id
from ._store_core import Component
from ._store_messages import MessageInput, _conflict_text, _dedupe_batch

__all__ = ["DEFAULT_LOAD_BATCH", "MAX_LOAD_BATCH", "LoadInput", "LoadOps", "LoadReport"]

LoadInput = MessageInput | PreparedMessage
"""What ``load_messages`` takes as a message: a ``Message``, a mapping of its fields, or
what :meth:`Store.prepare` returned for a message (checked and encoded already)."""

DEFAULT_LOAD_BATCH = 5000
"""Messages per batch of ``load_messages`` when the caller does not say (a count)."""

MAX_LOAD_BATCH = 50_000
"""The largest batch ``load_messages`` accepts: a batch is held in memory and written in
one transaction."""

_YIELD_EVERY = 500
"""Messages encoded between two yields to the event loop while a batch is prepared."""


@dataclass
class LoadReport:
    """What a :meth:`LoadOps.load_messages` call did, in counts.

    Attributes:
        created: Messages written by this call.
        present: Messages whose ``agui_id`` was stored already with the same payload (not
            written again), repeats within one batch included.
        tool_calls_created: Tool calls nested in the created messages.
        tool_calls_present: Tool calls nested in the messages already present.
        batches: Batches written (each one transaction, or one driver call).
    """

    created: int = 0
    present: int = 0
    tool_calls_created: int = 0
    tool_calls_present: int = 0
    batches: int = 0

    @property
    def messages(self) -> int:
        """Messages the call was given (created + present)."""
        return self.created + self.present


class LoadOps(Component):
    """Bulk load (see the module docstring)."""

    async def load_messages(
        self,
        chat_id: UUID | str,
        messages: Iterable[LoadInput] | AsyncIterable[LoadInput],
        *,
        batch_size: int = DEFAULT_LOAD_BATCH,
    ) -> LoadReport:
        """Implement :meth:`threadkeep.Store.load_messages`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        size = as_count(batch_size, "batch_size", minimum=1)
        if size > MAX_LOAD_BATCH:
            raise InvalidArgument(f"batch_size is at most {MAX_LOAD_BATCH}, not {size}")
        if isinstance(messages, str | bytes | Message):
            raise InvalidArgument("messages is an iterable of messages, not one value")
        report = LoadReport()
        writing: asyncio.Future[None] | None = None
        try:
            async with contextlib.aclosing(_batches(messages, size)) as batches:
                while True:
                    try:
                        batch = await anext(batches, None)
                        if batch is None:
                            break
                        prepared = await self._prepare_load(chat_id, batch)
                        await self._before_write(chat_id, prepared, writing)
                    except BaseException:
                        if writing is not None and not writing.done():
                            # Batches are written in order and the first failure is the one
                            # reported: the batch before stands (a failing source of messages
                            # included), or its error replaces this one.
                            await writing
                        raise
                    writing = asyncio.ensure_future(self._load_batch(chat_id, prepared, report))
            if writing is not None:
                await writing
        finally:
            if writing is not None and not writing.done():
                writing.cancel()
                with contextlib.suppress(BaseException):
                    await writing
        return report

    async def _before_write(
        self,
        chat_id: UUID,
        prepared: list[PreparedMessage],
        writing: asyncio.Future[None] | None,
    ) -> None:
        """Check a prepared batch's compaction rules; the batch before is written on return.

        Compaction rules read what is stored before the batch, so a batch holding a
        compaction waits for the batch before (``writing``) before they are checked.
        """
        if writing is not None and any(is_compaction(p.message) for p in prepared):
            await writing
            writing = None
        if writing is None:
            await self._ctx.messages._check_compactions(chat_id, prepared)
        else:  # the batch before, then this one (its rules saw the one before)
            await writing

    async def _prepare_load(self, chat_id: UUID, batch: list[Any]) -> list[PreparedMessage]:
        """Check and encode a batch, yielding to the loop now and then.

        The yields let the batch before this one stream to the database meanwhile: encoding
        (client CPU) overlaps the write (database time).
        """
        # Store is final: its prepare is encode_message, whose result encode_for_load gives.
        prepare: Callable[[Message], PreparedMessage] | None = None
        prepared: list[PreparedMessage] = []
        for start in range(0, len(batch), _YIELD_EVERY):
            with collector_paused():
                self._prepare_chunk(batch[start : start + _YIELD_EVERY], chat_id, prepare, prepared)
            await asyncio.sleep(0)
        return prepared

    def _prepare_chunk(
        self,
        chunk: list[Any],
        chat_id: UUID,
        prepare: Callable[[Message], PreparedMessage] | None,
        prepared: list[PreparedMessage],
    ) -> None:
        """Check and encode ``chunk`` onto ``prepared`` (synchronous: no other task runs).

        A ``Message`` is encoded as it is, not copied: its store-assigned fields are not
        in the body or the fingerprint, and the bulk primitive takes the chat, seq and
        times from its own arguments (a fallback through ``insert_messages`` copies what it
        needs, :func:`_fresh_items`).
        """
        limit = self._ctx.records.max_message_bytes
        for item in chunk:
            kind = type(item)
            if kind is Message and kind.__pydantic_complete__:
                message = item
            elif isinstance(item, PreparedMessage):
                prepared.append(self._adopt_prepared(item))
                continue
            else:
                message = self._coerce_loaded(item, chat_id)
            prepared.append(encode_for_load(message, limit))

    def _adopt_prepared(self, item: PreparedMessage) -> PreparedMessage:
        """A caller's prepared message, as it is (its body holds no store field).

        Raises:
            InvalidArgument: If its fields are not a message, a text and a fingerprint.
            PayloadTooLarge: If its payload is over this store's ``max_message_bytes``.
        """
        message, body, fingerprint = item.message, item.body, item.fingerprint
        if not (isinstance(message, Message) and type(body) is str and _is_digest(fingerprint)):
            msg = "a PreparedMessage in messages must be what Store.prepare returned"
            raise InvalidArgument(msg)
        if payload_bytes(message) > self._ctx.records.max_message_bytes:
            check_payload_size(
                message, self._ctx.records.max_message_bytes
            )  # raises, naming the sizes
        return item

    def _coerce_loaded(self, message: Any, chat_id: UUID) -> Message:
        """``_coerce_message`` without validating a ``Message`` instance a second time.

        A model instance was validated when it was built (its validators ran then), so it
        is taken as it is; mappings are validated. The content checks all run in
        ``encode_for_load`` either way.
        """
        if isinstance(message, Message) and type(message).__pydantic_complete__:
            return message
        return self._ctx.messages._coerce_message(message, chat_id)

    async def _load_batch(
        self, chat_id: UUID, prepared: list[PreparedMessage], report: LoadReport
    ) -> None:
        unique, positions = _distinct(prepared)
        now = self._ctx.now()  # the write's clock: observers see the timestamps it stored
        created = await self._bulk_write(chat_id, unique, now)
        if created is None:
            await self._ctx.chats._require_hot_chat(chat_id)
            now = self._ctx.now()
            created = await self._bulk_write(chat_id, unique, now)
            if created is None:
                raise Conflict(f"chat {chat_id} changed state during the load; try again")
        _count(report, prepared, positions, created)
        report.batches += 1
        if has_commit_observers():
            new = [
                (item, seq) for item, seq in zip(unique, created, strict=True) if seq is not None
            ]
            if new:
                stored = [_as_stored(item, chat_id, seq, now) for item, seq in new]
                notify_messages_committed(self, chat_id, stored)

    async def _bulk_write(
        self, chat_id: UUID, unique: Sequence[PreparedMessage], now: datetime
    ) -> list[int | None] | None:
        """Write one deduplicated batch at ``now``; return each item's new seq (``None``: present).

        The whole result is ``None`` when the chat is not hot (nothing written).

        Uses the driver's
        ``load_messages``; a driver without it (``CapabilityNotSupported``) goes through
        ``insert_messages`` with the checks ``append_messages`` makes.
        """
        try:
            return await self._driver.load_messages(chat_id, unique, now)
        except CapabilityNotSupported:
            pass
        results = await self._driver.insert_messages(chat_id, _fresh_items(unique, chat_id), now)
        if results is None:
            return None
        for item, (stored, created) in zip(unique, results, strict=True):
            if not created and not self._ctx.messages._same_payload(stored, item):
                raise IdempotencyConflict(_conflict_text(stored))
        return [stored.seq if created else None for stored, created in results]


def _distinct(
    prepared: list[PreparedMessage],
) -> tuple[list[PreparedMessage], list[int] | None]:
    """``_dedupe_batch(prepared)``; positions ``None`` when no ``agui_id`` repeats.

    A load's batches rarely repeat an id: one set of the ids (built in C) tells, and
    only a batch with a repeat takes the per-message walk.
    """
    ids = [item.message.agui_id for item in prepared]
    named = set(ids)
    named.discard(None)
    if len(named) == len(ids) - ids.count(None):
        return prepared, None
    return _dedupe_batch(prepared)


def _count(
    report: LoadReport,
    prepared: list[PreparedMessage],
    positions: list[int] | None,
    created: list[int | None],
) -> None:
    """Add a written batch to ``report``: a repeat of a message in the batch is present.

    ``positions`` maps each of ``prepared`` to its entry of ``created`` (``None``: one to
    one, no repeats).
    """
    if positions is None:
        if None not in created:  # all new (a first load)
            report.created += len(prepared)
            report.tool_calls_created += sum(len(p.message.tool_calls) for p in prepared)
            return
        if created.count(None) == len(created):  # all present (a re-run)
            report.present += len(prepared)
            report.tool_calls_present += sum(len(p.message.tool_calls) for p in prepared)
            return
        positions = list(range(len(prepared)))
    counted: set[int] = set()
    for position, index in enumerate(positions):
        calls = len(prepared[position].message.tool_calls)
        if created[index] is not None and index not in counted:
            report.created += 1
            report.tool_calls_created += calls
        else:
            report.present += 1
            report.tool_calls_present += calls
        counted.add(index)


def _fresh_items(items: Sequence[PreparedMessage], chat_id: UUID) -> list[PreparedMessage]:
    """``items`` with each message's store-assigned fields as an append sets them.

    ``insert_messages`` takes messages as ``append_messages`` hands them over (coerced for
    the chat); the bulk path left the caller's messages as they were.
    """
    return [
        item
        if _is_fresh(item.message, chat_id)
        else PreparedMessage(
            message=_for_chat(item.message, chat_id), body=item.body, fingerprint=item.fingerprint
        )
        for item in items
    ]


def _fresh(chat_id: UUID) -> dict[str, Any]:
    """The store-assigned fields of a message about to be appended to ``chat_id``."""
    return {"chat_id": chat_id, "seq": None, "revision": 0, "updated_at": None, "deleted_at": None}


_FRESH_FIELDS = frozenset({"chat_id", "seq", "revision", "updated_at", "deleted_at"})


def _for_chat(message: Message, chat_id: UUID) -> Message:
    """``message.model_copy(update=_fresh(chat_id))``, without its generic steps.

    The copy is shallow, as ``model_copy``'s: the instance's field values, extra fields
    and fields set, with the store-assigned fields replaced (they are fields of every
    ``Message``, never extras). A model with private attributes takes ``model_copy``.
    """
    if message.__pydantic_private__ is not None:
        return message.model_copy(update=_fresh(chat_id))
    cls = type(message)
    copied = cls.__new__(cls)
    fields = message.__dict__.copy()
    fields.update(_fresh(chat_id))
    extra = message.__pydantic_extra__
    object.__setattr__(copied, "__dict__", fields)
    object.__setattr__(copied, "__pydantic_extra__", None if extra is None else dict(extra))
    fields_set = message.__pydantic_fields_set__ | _FRESH_FIELDS
    object.__setattr__(copied, "__pydantic_fields_set__", fields_set)
    object.__setattr__(copied, "__pydantic_private__", None)
    return copied


def _is_fresh(message: Message, chat_id: UUID) -> bool:
    """Whether a message holds the store-assigned fields :func:`_fresh` would give it."""
    fields = message.__dict__
    return (
        fields["chat_id"] == chat_id
        and fields["seq"] is None
        and fields["revision"] == 0
        and fields["updated_at"] is None
        and fields["deleted_at"] is None
    )


def _as_stored(item: PreparedMessage, chat_id: UUID, seq: int, now: datetime) -> Message:
    """The stored form of a message the bulk path wrote (for commit observers)."""
    message = item.message
    update = {"chat_id": chat_id, "seq": seq, "revision": 0, "updated_at": now}
    update["deleted_at"] = None
    update["created_at"] = message.created_at or now
    return message.model_copy(update=update)


async def _batches(
    messages: Iterable[LoadInput] | AsyncIterable[LoadInput], size: int
) -> AsyncGenerator[list[Any]]:
    """Yield lists of at most ``size`` items of ``messages`` (sync or async), in order.

    Raises:
        InvalidArgument: If ``messages`` is neither iterable nor async iterable.
    """
    if isinstance(messages, AsyncIterable):
        batch: list[Any] = []
        async for item in messages:
            batch.append(item)
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch
        return
    try:
        iterator = iter(messages)
    except TypeError as exc:
        kind = type(messages).__name__
        raise InvalidArgument(f"messages is an iterable of messages, not {kind}") from exc
    while True:
        with collector_paused():  # a batch of the caller's messages, built in one go
            chunk = list(islice(iterator, size))
        if not chunk:
            return
        yield chunk


def _is_digest(value: object) -> bool:
    """Whether ``value`` has the form of a fingerprint (64 hex digits of SHA-256)."""
    return type(value) is str and len(value) == 64 and value.isascii() and value.isalnum()
