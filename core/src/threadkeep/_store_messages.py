"""Message operations of ``Store``: append (idempotent), read, update, hide, page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from ._batch import same_payload
from ._boundary_rules import boundary_cut, check_compactions, is_compaction
from ._content import MAX_NESTING_DEPTH, PreparedMessage, validate_model
from ._corrupt import collecting, window
from ._errors import (
    CapabilityNotSupported,
    Conflict,
    IdempotencyConflict,
    InvalidArgument,
    MessageNotFound,
)
from ._models import (
    ActionPart,
    Boundary,
    CustomPart,
    ErrorPart,
    FilePart,
    ImagePart,
    Message,
    MessageInput,
    Reasoning,
    ToolCall,
)
from ._paging import DEFAULT_PAGE_LIMIT, MessageFilter, Page, Viewer
from ._plugins import notify_messages_committed
from ._rows import MESSAGE_COLUMNS
from ._store_args import as_id, as_ids, as_items, as_model, as_str
from ._store_chats import _seq, page_of
from ._store_core import Component

__all__ = ["IMMUTABLE_MESSAGE_FIELDS", "MessageInput", "MessageOps"]

IMMUTABLE_MESSAGE_FIELDS = frozenset(
    {
        "message_id",
        "chat_id",
        "agui_id",
        "seq",
        "revision",
        "created_at",
        "updated_at",
        "deleted_at",
        "kind",
        "boundary",
    }
)
"""Fields ``update_message`` refuses to change."""

_CAS_ATTEMPTS = 16
_NO_FILTER = MessageFilter()  # frozen: one instance serves every unfiltered page
_NO_FILTER_DATA = _NO_FILTER.model_dump(mode="json")


class MessageOps(Component):
    """Message operations: ordered, idempotent appends; reads, pages, updates, hiding."""

    def _coerce_message(self, message: object, chat_id: UUID) -> Message:
        if isinstance(message, Message):
            # Keep nested subclass fields (serialize_as_any, which costs about as much as
            # the dump itself); without nested subclasses the plain dump is the same.
            data = message.model_dump(serialize_as_any=not _plain_records(message))
        elif isinstance(message, Mapping):
            data = dict(message)
        else:
            msg = f"a message is a Message or a mapping, not {type(message).__name__}"
            raise InvalidArgument(msg)
        data["chat_id"] = chat_id
        for field in ("seq", "updated_at", "deleted_at"):
            data.pop(field, None)
        data["revision"] = 0
        model = type(message) if isinstance(message, Message) else self._ctx.records.message_model
        return validate_model(model, data)

    def _prepare_batch(
        self, chat_id: UUID, messages: Sequence[MessageInput]
    ) -> list[PreparedMessage]:
        items = as_items(messages, "messages")
        return [self._ctx.records.prepare(self._coerce_message(m, chat_id)) for m in items]

    async def append_message(self, chat_id: UUID | str, message: MessageInput) -> Message:
        """Implement :meth:`threadkeep.Store.append_message`."""
        (stored,) = await self.append_messages(chat_id, [message])
        return stored

    async def append_messages(
        self, chat_id: UUID | str, messages: Sequence[MessageInput]
    ) -> list[Message]:
        """Implement :meth:`threadkeep.Store.append_messages`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        prepared = self._prepare_batch(chat_id, messages)
        if not prepared:
            return []
        await self._check_compactions(chat_id, prepared)
        unique, positions = _dedupe_batch(prepared)
        results = await self._driver.insert_messages(chat_id, unique, self._ctx.now())
        if results is None:
            await self._ctx.chats._require_hot_chat(chat_id)
            results = await self._driver.insert_messages(chat_id, unique, self._ctx.now())
            if results is None:
                raise Conflict(f"chat {chat_id} changed state during the append; try again")
        for item, (stored, created) in zip(unique, results, strict=True):
            if not created and not self._same_payload(stored, item):
                raise IdempotencyConflict(_conflict_text(stored))
        results = self._as_message_model(chat_id, unique, results)
        created_messages = [stored for stored, created in results if created]
        if created_messages:
            notify_messages_committed(self, chat_id, created_messages)
        return [results[i][0] for i in positions]

    def _as_message_model(
        self,
        chat_id: UUID,
        items: Sequence[PreparedMessage],
        results: list[tuple[Message, bool]],
    ) -> list[tuple[Message, bool]]:
        """Return ``results`` with every message of the store's ``message_model`` class.

        A driver may hand back the caller's own object (a copy of the ``Message`` given),
        while a read rebuilds the stored body as ``message_model``: the append returns what
        a read of it gives, on every driver. Nothing to do in the usual case (the input
        is of the store's class), so the check is one type comparison per message.
        """
        model = self._ctx.records.message_model
        if all(type(stored) is model for stored, _ in results):
            return results
        return [
            (
                stored if type(stored) is model else self._rebuilt(chat_id, item, stored, created),
                created,
            )
            for item, (stored, created) in zip(items, results, strict=True)
        ]

    def _rebuilt(
        self, chat_id: UUID, item: PreparedMessage, stored: Message, created: bool
    ) -> Message:
        """``stored`` rebuilt as a read rebuilds it: from the body just written when new."""
        body = item.body if created else stored.model_dump_json(exclude=set(MESSAGE_COLUMNS))
        return self._ctx.records.message_from_row(
            body,
            chat_id=chat_id,
            seq=stored.seq or 0,
            revision=stored.revision,
            created_at=stored.created_at,
            updated_at=stored.updated_at,
            deleted_at=stored.deleted_at,
        )

    async def _check_compactions(self, chat_id: UUID, prepared: list[PreparedMessage]) -> None:
        """Hold compaction boundaries in the batch to ``compact``'s rules (no-op without one).

        Raises:
            InvalidArgument: See :func:`check_compactions`.
            ChatNotFound: If the chat does not exist or is deleted.
        """
        batch = [item.message for item in prepared]
        if not any(is_compaction(message) for message in batch):
            return
        page = await self.list_messages(chat_id, limit=1)
        newest = page.items[-1].seq if page.items else None
        last = await self._driver.last_boundary(chat_id)
        cut = 0 if last is None else boundary_cut(last)
        try:
            check_compactions(chat_id, batch, newest, cut)
        except InvalidArgument:
            # A retry of a stored boundary is not held to the rules (it writes nothing):
            # look for stored agui_ids only now, on the rare refused path.
            wanted = {m.agui_id for m in batch if is_compaction(m) and m.agui_id is not None}
            retries = await self._stored_agui_ids(chat_id, wanted)
            if not retries:
                raise
            check_compactions(chat_id, batch, newest, cut, retries)

    async def _stored_agui_ids(self, chat_id: UUID, agui_ids: set[str]) -> frozenset[str]:
        """Return which of ``agui_ids`` the chat stores, visible or hidden.

        Hidden messages are found with the archive scan where the driver has it.
        """
        found = set()
        for agui_id in agui_ids:
            if await self._driver.get_message_by_agui_id(chat_id, agui_id) is not None:
                found.add(agui_id)
        missing = agui_ids - found
        after = 0
        try:
            while missing and (batch := await self._driver.scan_messages(chat_id, after, 500)):
                found |= missing & {m.agui_id for m in batch}
                missing -= found
                after = batch[-1].seq or after
        except CapabilityNotSupported:
            pass  # no scan: a hidden stored boundary is checked like a new one
        return frozenset(found)

    def _same_payload(self, stored: Message, item: PreparedMessage) -> bool:
        """Whether a retry equals the stored message (:func:`threadkeep.driver.same_payload`)."""
        return same_payload(stored, item)

    async def get_message(self, message_id: UUID | str) -> Message:
        """Implement :meth:`threadkeep.Store.get_message`."""
        self._ctx.require_open()
        message_id = as_id(message_id, "message_id")
        message = await self._driver.get_message(message_id)
        if message is None and await self._ctx.chats._rehydrate_holder(message_id):
            message = await self._driver.get_message(message_id)
        if message is None:
            raise MessageNotFound(f"no visible message {message_id}")
        return message

    async def get_message_by_agui_id(self, chat_id: UUID | str, agui_id: str) -> Message | None:
        """Implement :meth:`threadkeep.Store.get_message_by_agui_id`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        agui_id = as_str(agui_id, "agui_id")
        message = await self._driver.get_message_by_agui_id(chat_id, agui_id)
        if message is None and await self._ctx.chats._rehydrate_if_archived(chat_id):
            message = await self._driver.get_message_by_agui_id(chat_id, agui_id)
        return message

    async def update_message(self, message_id: UUID | str, /, **changes: Any) -> Message:
        """Implement :meth:`threadkeep.Store.update_message`."""
        message_id = as_id(message_id, "message_id")
        frozen = set(changes) & IMMUTABLE_MESSAGE_FIELDS
        if frozen:
            raise InvalidArgument(f"cannot change {sorted(frozen)} of a message")
        return await self._rewrite_message(message_id, lambda m: {**m.model_dump(), **changes})

    async def _rewrite_message(self, message_id: UUID, edit: Any) -> Message:
        self._ctx.require_open()
        for _ in range(_CAS_ATTEMPTS):
            current = await self.get_message(message_id)
            updated = validate_model(type(current), edit(current))
            stored = await self._driver.replace_message(
                self._ctx.records.prepare(updated), current.revision, self._ctx.now()
            )
            if stored is not None:
                return stored
        raise Conflict(f"message {message_id} kept changing under concurrent writers")

    async def delete_messages(self, chat_id: UUID | str, message_ids: Sequence[UUID | str]) -> int:
        """Implement :meth:`threadkeep.Store.delete_messages`."""
        chat_id = as_id(chat_id, "chat_id")
        ids = as_ids(message_ids, "message_ids")
        await self._ctx.chats._require_hot_chat(chat_id)
        return await self._driver.hide_messages(chat_id, ids, self._ctx.now())

    async def list_messages(
        self,
        chat_id: UUID | str,
        *,
        limit: int = DEFAULT_PAGE_LIMIT,
        cursor: str | None = None,
        message_filter: MessageFilter | Mapping[str, Any] | None = None,
        viewer: Viewer | Mapping[str, Any] | None = None,
    ) -> Page[Message]:
        """Implement :meth:`threadkeep.Store.list_messages`."""
        self._ctx.require_open()
        chat_id = as_id(chat_id, "chat_id")
        message_filter = (
            _NO_FILTER
            if message_filter is None
            else as_model(MessageFilter, message_filter, "message_filter")
        )
        size = self._ctx.page_limit(limit)
        scope = _message_scope(chat_id, message_filter)
        before = self._ctx.decode_cursor(cursor, scope)
        if viewer is not None:
            await self._ctx.chats.get_chat(chat_id, viewer=viewer)
        with collecting(self._ctx.corrupt_records) as skipped:
            rows = await self._driver.page_messages(chat_id, message_filter, before, size + 1)
            if rows is None:
                await self._ctx.chats._require_hot_chat(chat_id)
                rows = await self._driver.page_messages(chat_id, message_filter, before, size + 1)
        page, corrupt, has_more, last = window(rows or [], skipped, size, _seq)
        next_cursor = None
        if has_more:
            assert last is not None
            next_cursor = self._ctx.encode_cursor(scope, last)
        return page_of(Message, page[::-1], next_cursor, has_more, corrupt)

    async def get_last_messages(self, chat_ids: Sequence[UUID | str]) -> dict[UUID, Message]:
        """Implement :meth:`threadkeep.Store.get_last_messages`."""
        self._ctx.require_open()
        ids = as_ids(chat_ids, "chat_ids")
        if not ids:
            return {}
        with collecting(self._ctx.corrupt_records):  # "skip": a damaged preview is left out
            return await self._driver.last_messages(list(dict.fromkeys(ids)))


_PLAIN_PARTS = frozenset({ImagePart, FilePart, ActionPart, ErrorPart, CustomPart})
_TOOL_CALL = frozenset({ToolCall})
_REASONING = frozenset({Reasoning})
_BOUNDARY = frozenset({Boundary})
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_records(message: Message) -> bool:
    """Whether ``model_dump`` of ``message`` gives what ``serialize_as_any=True`` gives.

    They differ only where a value is of a subclass of its field's type: a nested record
    of a subclass, or a model (whose fields might hold subclasses) inside a free-form
    value (``metadata``, extra fields, ``ActionPart.payload``, ``CustomPart.value``).
    ``True`` when every nested record is of its declared class and every free-form value
    is plain JSON data (anything else: ``False``, and the caller dumps as before).
    """
    if type(message) is not Message or not _plain_extras(message):
        return False
    if message.metadata and not _plain_data(message.metadata):
        return False
    nested: list[tuple[Any, frozenset[type]]] = [
        *((call, _TOOL_CALL) for call in message.tool_calls),
        *((reasoning, _REASONING) for reasoning in message.reasonings),
        *((part, _PLAIN_PARTS) for part in message.parts),
    ]
    if message.boundary is not None:
        nested.append((message.boundary, _BOUNDARY))
    for record, classes in nested:
        if type(record) not in classes or not _plain_extras(record):
            return False
        free = getattr(record, "payload", None) if type(record) is ActionPart else None
        free = getattr(record, "value", None) if type(record) is CustomPart else free
        if free is not None and not _plain_data(free):
            return False
    return True


def _plain_extras(record: Any) -> bool:
    extra = record.__pydantic_extra__
    return not extra or _plain_data(extra)


def _plain_data(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON data only (str, int, float, bool, None, lists, str-keyed dicts).

    Nesting past ``MAX_NESTING_DEPTH`` is "not plain" (the content checks refuse it later).
    """
    kind = type(value)
    if kind in _SCALARS:
        return True
    if depth >= MAX_NESTING_DEPTH:
        return False
    if kind is dict:
        return all(
            type(key) is str and (type(item) in _SCALARS or _plain_data(item, depth + 1))
            for key, item in value.items()
        )
    if kind is list:
        return all(type(item) in _SCALARS or _plain_data(item, depth + 1) for item in value)
    return False


def _message_scope(chat_id: UUID, message_filter: MessageFilter) -> dict[str, Any]:
    if message_filter is _NO_FILTER or message_filter == _NO_FILTER:  # no model_dump per page
        return {"kind": "messages", "chat_id": str(chat_id), "filter": dict(_NO_FILTER_DATA)}
    data = message_filter.model_dump(mode="json")
    for key in ("roles", "kinds"):
        if data[key] is not None:
            data[key] = sorted(data[key])
    return {"kind": "messages", "chat_id": str(chat_id), "filter": data}


def _dedupe_batch(
    prepared: list[PreparedMessage],
) -> tuple[list[PreparedMessage], list[int]]:
    """Collapse repeated ``agui_id``s in one batch; return unique items and input positions."""
    unique: list[PreparedMessage] = []
    positions: list[int] = []
    seen: dict[str, int] = {}
    for item in prepared:
        agui_id = item.message.agui_id
        if agui_id is not None and agui_id in seen:
            first = unique[seen[agui_id]]
            if first.fingerprint != item.fingerprint:
                msg = f"agui_id {agui_id!r} appears twice in the batch with different payloads"
                raise IdempotencyConflict(msg)
            positions.append(seen[agui_id])
            continue
        if agui_id is not None:
            seen[agui_id] = len(unique)
        positions.append(len(unique))
        unique.append(item)
    return unique, positions


def _conflict_text(stored: Message) -> str:
    return (
        f"agui_id {stored.agui_id!r} is already stored in chat {stored.chat_id} "
        f"(message {stored.message_id}, seq {stored.seq}) with a different payload; "
        "use a new agui_id, or update_message to change it"
    )
